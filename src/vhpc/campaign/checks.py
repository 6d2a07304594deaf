"""The ``check:`` of a benchmark, applied once the environments have run: a figure each run
prints (an energy, a residual; :class:`vhpc.benchmarks.base.Check`) compared with the baseline
environment's within a relative tolerance, as ReFrame's hpctestlib checks an application's
energy against a reference.

The reference for one (benchmark, parameters) is the median of the baseline environment's own
valid check values (measured rounds; warm-up rounds only when there are none), per *check key*
(:meth:`~vhpc.benchmarks.base.Benchmark.check_key`: e.g. "4000 atoms on 2 ranks", since
``ranks`` left to ``auto`` resolves per environment).  A trial whose value lies further than
``rtol`` x |reference| from it fails: all its samples are stored invalid (never averaged in)
and its ``error`` column says why ("check failed: ..."), which the report's findings show
(:func:`vhpc.analysis.checks.check_findings`).  Baseline trials are held to the same
reference, so one broken baseline run among good ones is caught too.  A trial with no
baseline value to compare with keeps its samples and says so ("check not applied: ...").

Idempotent: every pass re-parses the stored raw output (parsing is pure), so resuming a
campaign, adding rounds or ``vhpc report --reparse`` re-derives the same outcome from all
trials there are.  A check value that is not a finite number (``nan``, ``inf``) fails the
check.  Another done trial whose ``error`` holds another note (the store's, e.g. a non-finite
metric dropped) is left as it is.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from vhpc.benchmarks.base import ParseError
from vhpc.store import DONE, Store

#: Prefixes of the trial ``error`` texts this module writes (and may rewrite).
FAILED_PREFIX = "check failed: "
NOT_APPLIED_PREFIX = "check not applied: "


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def verdict(value: float, reference: float, rtol: float) -> tuple[bool, float]:
    """(passes, relative difference) of ``value`` against ``reference``: passes when
    |value - reference| <= rtol x |reference| (a reference of 0 needs value 0 within rtol)."""
    diff = abs(value - reference)
    rel = diff / abs(reference) if reference else (0.0 if diff == 0 else math.inf)
    return rel <= rtol, rel


def apply(store: Store, cid: str, spec: Any) -> dict[str, int]:
    """Apply every benchmark's checks (:meth:`~vhpc.benchmarks.base.Benchmark.all_checks`) to
    campaign ``cid`` (module docstring); ``spec``: its :class:`~vhpc.spec.parse.CampaignSpec`.
    A trial fails when any check does.  Returns counts ``{"passed", "failed",
    "not_applied"}`` over the trials of benchmarks that have a check."""
    counts = {"passed": 0, "failed": 0, "not_applied": 0}
    bspecs = {(b.name, b.key): b for b in spec.benchmarks}
    if not any(c.rtol is not None for name, _ in bspecs
               for c in getattr(spec.benchmark(name), "all_checks", tuple)()):
        return counts  # no benchmark compares a figure: the stored trials need not be read
    groups: dict[tuple[str, str], list] = {}
    for row in store.trials(cid, DONE):
        groups.setdefault((row.benchmark, row.params), []).append(row)
    for (name, key), rows in groups.items():
        bench = spec.benchmark(name)
        all_checks = getattr(bench, "all_checks", None)
        # an identity figure (rtol None) is shown by the report and never compared
        chks = [c for c in (all_checks() if all_checks else ()) if c.rtol is not None]
        if not chks or (name, key) not in bspecs:
            continue
        params = bench.resolve(bspecs[(name, key)].params)
        parsed = []
        for row in rows:
            try:
                samples = bench.parse(params, row.stdout or "", row.stderr or "", row.returncode)
            except ParseError:
                continue
            values = {s.metric: s.value for s in samples}
            parsed.append((row, samples, values, bench.check_key(params, row.stdout or "")))
        refs: dict[tuple[str, str], float] = {}
        for chk in chks:
            for ckey in {p[3] for p in parsed}:
                base = [(r.warmup, v[chk.metric]) for r, s, v, k in parsed if k == ckey
                        and v.get(chk.metric) is not None and r.environment == spec.baseline
                        and all(x.valid for x in s) and math.isfinite(v[chk.metric])]
                measured = [v for w, v in base if not w] or [v for _, v in base]
                if measured:
                    refs[(chk.metric, ckey)] = statistics.median(measured)
        for row, samples, values, ckey in parsed:
            nonfinite = [c for c in chks if values.get(c.metric) is not None
                         and not math.isfinite(values[c.metric])]
            if row.error and not row.error.startswith((FAILED_PREFIX, NOT_APPLIED_PREFIX)) \
                    and not nonfinite:
                continue  # a note of the trial's own (e.g. non-finite values dropped): kept
            error = None
            if nonfinite:  # nan or inf agrees with nothing: the check fails, whatever else
                error = (FAILED_PREFIX + "; ".join(f"{_what(c)} = {values[c.metric]}, not a "
                                                   "finite number" for c in nonfinite)
                         + "; all samples of this trial stored invalid")
            elif all(x.valid for x in samples):  # else its own verification failed already
                error = _judge(chks, values, ckey, refs, spec.baseline)
            if error and error.startswith(FAILED_PREFIX):
                samples = [type(s)(s.metric, s.value, s.unit, s.higher_is_better, False)
                           for s in samples]
            if all(x.valid for x in samples) or error:
                counts["failed" if error and error.startswith(FAILED_PREFIX) else
                       "not_applied" if error else "passed"] += 1
            # a non-finite value's row keeps the store's note after the check's: same outcome
            same = error == row.error or bool(nonfinite) and (row.error or "").startswith(
                str(error))
            if not same:
                store.replace_samples(row.id, DONE, samples, error)
    return counts


def _what(chk) -> str:
    """The check as the trial's error names it: "FIGURE (metric)" or the metric."""
    return chk.metric if not chk.what or chk.what == chk.metric else f"{chk.what} ({chk.metric})"


def _judge(chks, values: dict[str, float], ckey: str,
           refs: dict[tuple[str, str], float], baseline: str) -> str | None:
    """The ``error`` of one trial whose own verification passed and whose check values are
    finite: None when every check agrees with its reference; ``check failed: ...`` naming each
    check that does not; ``check not applied: ...`` when a value or its reference is missing
    (and none failed)."""
    failed, missing = [], None
    for chk in chks:
        value, ref = values.get(chk.metric), refs.get((chk.metric, ckey))
        if value is None:
            missing = missing or f"the output has no {chk.metric}"
        elif ref is None:
            other = ", ".join(sorted({k for m, k in refs if m == chk.metric and k})) \
                or "no valid run"
            missing = missing or (f"no baseline ({baseline}) value of {_what(chk)} for "
                                  f"{ckey or 'these parameters'} (baseline: {other})")
        else:
            ok, rel = verdict(value, ref, chk.rtol)
            if not ok:
                failed.append(f"{_what(chk)} = {_fmt(value)}, baseline {baseline} {_fmt(ref)}"
                              f"{' (' + ckey + ')' if ckey else ''}: {rel:.3g} relative "
                              f"difference > tolerance {chk.rtol:g}")
    if failed:
        return FAILED_PREFIX + "; ".join(failed) + "; all samples of this trial stored invalid"
    return NOT_APPLIED_PREFIX + missing if missing else None
