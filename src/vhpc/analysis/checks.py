"""Findings for the ``check:`` of a campaign's benchmarks (:mod:`vhpc.campaign.checks` stored
each failing trial's samples invalid and wrote why into the trial's ``error``): the reader sees
which trials were excluded and the figure that disagreed with the baseline's, not only an
"invalid samples" count."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from vhpc.analysis.findings import fmt_list, label
from vhpc.analysis.results import Finding
from vhpc.benchmarks.custom import from_mapping
from vhpc.campaign.checks import FAILED_PREFIX, NOT_APPLIED_PREFIX
from vhpc.spec.parse import default_baseline


def checked(spec: Mapping[str, Any] | None) -> dict[str, str]:
    """Benchmarks of a stored campaign spec (its JSON form) that carry a check: name → "the
    FIGURE[, FIGURE] within RTOL" (built-in benchmarks'
    :meth:`~vhpc.benchmarks.base.Benchmark.all_checks`,
    custom ones' ``check:``)."""
    from vhpc import benchmarks

    out: dict[str, str] = {}
    if not spec:
        return out
    for b in spec.get("benchmarks") or []:
        name = b.get("name") if isinstance(b, Mapping) else None
        bench = benchmarks.REGISTRY.get(name or "")
        chks = [c for c in (bench.all_checks() if bench is not None else ())
                if c.rtol is not None]
        if chks:
            out[name] = ", ".join(f"{c.what or c.metric} within {c.rtol:g}" for c in chks)
    for c in spec.get("custom") or []:
        chk = c.get("check") if isinstance(c, Mapping) else None
        if isinstance(chk, Mapping) and chk.get("rtol") is not None:
            out[c.get("name", "")] = (f"{chk.get('metric') or chk.get('name') or 'check'} "
                                      f"within {chk.get('rtol')}")
    return out


def check_specs(spec: Mapping[str, Any] | None) -> dict[str, tuple[str, float | None]]:
    """Check figures of a stored campaign spec's custom benchmarks (``check:`` with a numeric
    ``rtol``, or none: an identity figure, rtol None): name → (metric, rtol), for
    :func:`vhpc.analysis.analyse` (the registry's own checks it finds itself)."""
    out: dict[str, tuple[str, float | None]] = {}
    for c in (spec or {}).get("custom") or []:
        chk = c.get("check") if isinstance(c, Mapping) else None
        if not isinstance(chk, Mapping) or not isinstance(c.get("name"), str):
            continue
        metric = chk.get("metric") or chk.get("name") or ("check" if "regex" in chk else None)
        rtol = chk.get("rtol")
        if isinstance(metric, str) and rtol is None:
            out[c["name"]] = (metric, None)
        elif isinstance(metric, str) and isinstance(rtol, (int, float)) \
                and not isinstance(rtol, bool):
            out[c["name"]] = (metric, float(rtol))
    return out


def pair_specs(spec: Mapping[str, Any] | None) -> dict[str, tuple[tuple[str, str, str], ...]]:
    """Metric pairs declared by a stored campaign spec's custom benchmarks (a metric's
    ``inverse_of``/``same_as``): name → ((metric, partner, kind), ...) for
    :func:`vhpc.analysis.analyse` (the registry's own it finds itself).  A definition that no
    longer validates declares none (its campaign was checked when it ran)."""
    out: dict[str, tuple[tuple[str, str, str], ...]] = {}
    for c in (spec or {}).get("custom") or []:
        try:
            bench = from_mapping(c)
        except (ValueError, TypeError):
            continue
        if bench.pairs():
            out[bench.name] = bench.pairs()
    return out


def check_findings(trials: Iterable, spec: Mapping[str, Any] | None = None,
                   invalid: Iterable[int] = ()) -> list[Finding]:
    """One ``check-failed`` finding (warn) per environment and benchmark[params] whose trials
    failed their check, quoting the reason of each distinct failure, and one
    ``check-not-applied`` (info) where no baseline value could be compared.  ``trials``: the
    campaign's stored trials (:class:`vhpc.store.TrialRow`); warm-up trials count too (their
    samples are never analysed, but a failing warm-up still says something is wrong).  With the
    campaign's ``spec`` (JSON form) also one ``check-passed`` (info) per checked benchmark
    saying how many of the other environments' trials agreed with the baseline (its own are
    the reference, not counted), so a reader sees every sample was checked; ``invalid``: ids of trials with invalid samples (their own verification failed:
    not checked, not counted as agreeing)."""
    failed: dict[str, list[tuple[int, str]]] = {}
    skipped: dict[str, list[str]] = {}
    with_check = checked(spec)
    passed: dict[str, list[int]] = {}
    invalid = set(invalid)
    baseline = (spec or {}).get("baseline") or default_baseline()
    for t in trials:
        error = getattr(t, "error", None) or ""
        if t.benchmark in with_check and t.status == "done" and t.environment != baseline \
                and (error.startswith(FAILED_PREFIX) or not (error or t.id in invalid)):
            key = label(t.benchmark, t.params)
            passed.setdefault(key, [0, 0])[1] += 1
            if not error:
                passed[key][0] += 1
        error = getattr(t, "error", None) or ""
        scope = f"{t.environment} / {label(t.benchmark, t.params)}"
        if t.status == "done" and error.startswith(FAILED_PREFIX):
            failed.setdefault(scope, []).append((t.round, error[len(FAILED_PREFIX):]))
        elif t.status == "done" and error.startswith(NOT_APPLIED_PREFIX):
            skipped.setdefault(scope, []).append(error[len(NOT_APPLIED_PREFIX):])
    out = []
    for scope, items in failed.items():
        reasons = list(dict.fromkeys(r.split("; all samples", 1)[0] for _, r in items))
        rounds = sorted({r for r, _ in items})
        out.append(Finding(
            "warn", scope,
            f"{len(items)} trial(s) failed the check against the baseline and were excluded "
            f"(all their samples stored invalid; rounds {fmt_list([str(r) for r in rounds])}): "
            + " | ".join(reasons[:3]) + (f" | and {len(reasons) - 3} more" if len(reasons) > 3
                                        else ""),
            "the run computed something else than the baseline's: compare the inputs, "
            "binaries and libraries of the two environments (raw output: vhpc report ID --json)",
            kind="check-failed"))
    for scope, items in skipped.items():
        out.append(Finding(
            "info", scope, f"{len(items)} trial(s) not checked: {items[0]}",
            "run the baseline with the same problem (e.g. give ranks= explicitly) so that its "
            "figure can be compared", kind="check-not-applied"))
    for key, (ok, total) in passed.items():  # the baseline's own trials are not counted
        what = with_check[key.split("[", 1)[0]]
        out.append(Finding(
            "info", key, f"check: {ok} of {total} trials agree with {baseline} ({what}, "
            "relative)", "the figures of merit come from runs that computed the baseline's result"
            if ok == total else "see the check-failed findings", kind="check-passed"))
    return out
