"""Findings: one table of rules turned into diagnostics for the reader.

A :class:`Rule` looks at one object of its ``subject`` — an environment (:class:`EnvInfo`), a
summary of the ``all`` group (:class:`Summary`) or a comparison (:class:`Comparison`) — and
returns an item text when it applies.  Items are aggregated per scope (an environment, or
"environment / benchmark[params]"), so one finding lists every metric it concerns.  To add a
diagnostic, add a row to :data:`RULES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from vhpc.analysis.results import (
    CV_THRESHOLD, GROUP_ALL, INCONCLUSIVE, INVERSE, MIN_SAMPLES, POINT, SAME, Comparison,
    Finding, Summary,
)
from vhpc.core import intervals, numfmt, power
from vhpc.core.metrics import EnvInfo
from vhpc.core.stats import MAD_THRESHOLD


def label(benchmark: str, params: str) -> str:
    """"benchmark[params]" or "benchmark"."""
    return f"{benchmark}[{params}]" if params else benchmark


def fmt_list(items: list[str], limit: int = 6) -> str:
    """Comma-separated items, the tail beyond ``limit`` counted ("and 3 more")."""
    if len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f" and {len(items) - limit} more"


@dataclass(frozen=True)
class Rule:
    """kind and level of the finding; subject: ``"environment"``, ``"summary"`` or
    ``"comparison"``; item(subject) → text when the rule applies, else None; message: the
    finding's text with ``{items}`` (the aggregated items) and ``{name}`` (the scope);
    advice: what to do."""

    kind: str
    level: str
    subject: str
    item: Callable[[Any], str | None]
    message: str
    advice: str


RULES: tuple[Rule, ...] = (
    Rule("unknown-environment", "info", "environment",
         lambda e: "" if e.kind == "unknown" else None,
         "environment {name!r} has observations but no description (kind, accelerator,"
         " fingerprint)",
         "check that the campaign store records every environment it ran"),
    Rule("tcg", "warn", "environment", lambda e: "" if e.emulated else None,
         "results of {name} come from TCG emulation, not hardware virtualization: overheads are"
         " not KVM overheads",
         "run on a host where /dev/kvm is usable (check permissions and that virtualization is"
         " enabled) to measure virtualization overhead"),
    Rule("unit-mismatch", "warn", "comparison",
         lambda c: c.metric if c.note == "units differ from the baseline's" else None,
         "metric(s) reported in different units than by the baseline, not compared: {items}",
         "fix the benchmark parser so that it always reports one unit"),
    Rule("high-variation", "warn", "summary",
         lambda s: f"{s.metric} (CV {s.cv * 100:.1f} %)"
         if s.cv is not None and s.cv > CV_THRESHOLD else None,
         f"high variation (coefficient of variation > {CV_THRESHOLD * 100:.0f} %): {{items}}",
         "add repeats (--repeats), pin vCPUs and threads, and quiet the host (no other jobs,"
         " fixed CPU frequency) before trusting small differences"),
    Rule("few-samples", "warn", "summary",
         lambda s: f"{s.metric} (n={s.n})" if s.n < MIN_SAMPLES else None,
         f"too few valid samples (< {MIN_SAMPLES}): {{items}}",
         "increase --repeats: confidence intervals and tests need at least 3 samples, better 10"
         " or more"),
    Rule("invalid", "warn", "summary",
         lambda s: f"{s.metric} ({s.n_invalid})" if s.n_invalid else None,
         "invalid samples (verification failed or value not finite), excluded: {items}",
         "check the raw output with `vhpc report ID --json`"),
    Rule("outliers", "info", "summary",
         lambda s: f"{s.metric} ({s.outliers} of {s.n})" if s.outliers else None,
         f"outliers (modified z-score > {MAD_THRESHOLD}): {{items}}",
         "check for noise on the host (other jobs, frequency changes, interrupts) and look at"
         " the distribution figure"),
    Rule("constant-figure", "info", "comparison",
         lambda c: c.metric if c.n >= 2 and c.n_baseline >= 2 and c.ratio not in (None, 1.0)
         and c.ratio_ci == (c.ratio, c.ratio) and c.role not in (INVERSE, SAME) else None,
         "never varied within an environment but differs between them (an identity figure"
         " such as a size or a version, not a speed?): {items}",
         "if it is not a speed, declare it in the custom benchmark as a check without a"
         " tolerance, check: {metric: NAME}: shown beside the baseline's, never given a"
         " verdict (docs/applications.md)"),
    Rule("log-normal", "warn", "comparison",
         lambda c: f"{c.metric} ({c.diagnostic})" if c.diagnostic else None,
         "the log-normal model's check (from 8 runs a side: Shapiro–Wilk on the ln residuals,"
         " outliers on the log scale) failed: {items}",
         "compare by ranks (--method rank: Hodges–Lehmann with the Mann–Whitney interval on ln"
         " values), or find the noise that makes the runs skewed"),
    Rule("inconclusive", "warn", "comparison", lambda c: inconclusive(c),
         "inconclusive (the interval neither excludes 1 nor lies within the equivalence"
         " margin): {items}",
         "raise --repeats to the runs shown (or use --target-ci); until then the data cannot"
         " tell a difference from equivalence"),
)


def inconclusive(comparison: Comparison) -> str | None:
    """Item text for an ``inconclusive`` comparison of a primary or secondary metric (not a
    sweep's point, which its sweep's row counts, nor the inverse of another, which its
    partner's item covers): the overhead with its interval (the one overhead of the table) and
    the runs per side that would likely decide (:attr:`Comparison.runs_needed`,
    :func:`vhpc.core.logratio.runs_to_decide`)."""
    if comparison.verdict != INCONCLUSIVE or comparison.role in (INVERSE, SAME, POINT) or comparison.overhead_pct is None:
        return None
    need = runs_text(comparison.runs_needed, min(comparison.n, comparison.n_baseline))
    if comparison.ratio is not None and intervals.interval_hidden(min(comparison.n, comparison.n_baseline), *comparison.ratio_ci):
        oh = numfmt.overhead(comparison.ratio, None, None, comparison.higher_is_better)
        return f"{comparison.metric} (overhead {oh}, {intervals.TOO_FEW}; {need})"
    oh = numfmt.overhead(comparison.ratio, *comparison.ratio_ci, comparison.higher_is_better, comparison.margin) \
        if comparison.ratio is not None \
        else numfmt.pct_ci(comparison.overhead_pct, *comparison.overhead_ci)
    return (f"{comparison.metric} (overhead {oh} at {comparison.level * 100:.4g} %, "
            f"margin ±{comparison.margin * 100:g} %; {need})")


def runs_text(runs: int | None, n: int) -> str:
    """What to say about the runs that would decide an inconclusive comparison whose smaller
    side has ``n`` runs (:func:`vhpc.core.power.plan_text`): the plan with the probability it
    delivers, the pilot advice from fewer than :data:`vhpc.core.power.MIN_PILOT` runs a side,
    or why there is no plan."""
    return power.plan_text(runs, n)


def _scope(subject: str, obj: Any) -> str:
    if subject == "environment":
        return obj.name
    return f"{obj.environment} / {label(obj.benchmark, obj.params)}"


def apply_rules(envs: dict[str, EnvInfo], summaries: list[Summary],
                comparisons: list[Comparison], rules: tuple[Rule, ...] = RULES) -> list[Finding]:
    """Findings of every rule, in rule order, one per (rule, scope) with its items."""
    from vhpc.analysis.families import natural_key

    def order(x: Any) -> tuple:  # items in numeric order: lat_128 before lat_1024
        return (natural_key(x.params), natural_key(x.metric))

    subjects = {"environment": list(envs.values()),
                "summary": sorted((s for s in summaries if s.group == GROUP_ALL), key=order),
                "comparison": sorted(comparisons, key=order)}
    out: list[Finding] = []
    for rule in rules:
        scopes: dict[str, list[str]] = {}
        for obj in subjects[rule.subject]:
            item = rule.item(obj)
            if item is not None:
                scopes.setdefault(_scope(rule.subject, obj), []).append(item)
        for scope, items in scopes.items():
            named = [i for i in items if i]
            message = rule.message.format(items=fmt_list(named), name=scope)
            out.append(Finding(rule.level, scope, message, rule.advice, kind=rule.kind,
                               items=tuple(named)))
    return out


def baseline_findings(baseline: str, has_baseline: bool,
                      missing: dict[tuple[str, str], set[str]]) -> list[Finding]:
    """The baseline has no observations at all, or none for some (benchmark, params)."""
    if not has_baseline:
        return [Finding("warn", "campaign",
                        f"baseline environment {baseline!r} has no observations: nothing can be"
                        " compared",
                        "run the baseline in the same campaign or choose another baseline with"
                        " --baseline", kind="baseline-missing")]
    return [Finding("warn", label(b, p),
                    f"baseline {baseline!r} has no observations for {label(b, p)}"
                    f" (metric(s) {fmt_list(sorted(metrics))}): no comparison",
                    "run this benchmark in the baseline environment too, or choose another"
                    " baseline with --baseline", kind="baseline-missing")
            for (b, p), metrics in missing.items()]


def empty_environment_findings(trials, analysed: Iterable[str]) -> list[Finding]:
    """A warning per environment whose measured trials finished but left no valid sample
    (every value dropped: not a finite number, not found), so that it is named with the
    reason instead of vanishing from the comparison.  ``trials``: stored trials
    (environment, status, warmup, error); ``analysed``: the environments the analysis holds."""
    seen = set(analysed)
    why: dict[str, list[str]] = {}
    for t in trials:
        env = str(getattr(t, "environment", ""))
        if (not env or env in seen or getattr(t, "status", "") != "done"
                or getattr(t, "warmup", False)):
            continue
        reasons = why.setdefault(env, [])
        error = str(getattr(t, "error", None) or "")
        if error and error not in reasons:
            reasons.append(error)
    return [Finding("warn", env, f"no valid sample in {env}, so nothing to compare it by: "
                    f"{fmt_list(reasons) or 'its trials left no sample'}",
                    "check the raw output with `vhpc report ID --json`",
                    kind="invalid", items=tuple(reasons))
            for env, reasons in why.items()]


#: a ``slowdown=`` counts as not applied when the kernel's accounting shows less than this
#: share of the requested slowdown (mean over the environment's measured trials)
SLOWDOWN_APPLIED_SHARE = 0.5

#: ... unless the quota ran out in more than this share of the CFS periods (cgroup v2
#: ``cpu.stat`` nr_throttled / nr_periods): then the limit did bite, whatever the throttled time
SLOWDOWN_BIT_PERIODS = 0.5


def slowdown_findings(trials) -> list[Finding]:
    """A warning per environment whose ``slowdown=`` the kernel did not apply: the mean
    throttle-based slowdown of its finished measured trials (unless the quota ran out in more
    than :data:`SLOWDOWN_BIT_PERIODS` of the CFS periods, i.e. the limit did bite; diagnostics
    ``throttle``,
    :mod:`vhpc.host.cpu_bandwidth`) is below :data:`SLOWDOWN_APPLIED_SHARE` of the request.
    The usual cause: the CPU quota is for more CPUs than the benchmark keeps busy (a
    one-thread benchmark, quota for 2 CPUs), so it never reaches the quota.  ``trials``:
    stored trials (environment, status, warmup, diagnostics)."""
    per_env: dict[str, list[dict]] = {}
    for t in trials:
        diag = getattr(t, "diagnostics", None)
        th = getattr(diag, "throttle", None) if diag is not None else None
        if isinstance(diag, dict):
            th = diag.get("throttle")
        if getattr(t, "status", "done") != "done" or getattr(t, "warmup", False) \
                or not isinstance(th, dict):
            continue
        per_env.setdefault(t.environment, []).append(th)
    out = []
    for env, readings in per_env.items():
        try:
            requested = max(float(r.get("requested") or 0.0) for r in readings)
            applied = [float(r["applied"]) for r in readings if r.get("applied") is not None]
            # share of CFS periods in which the quota ran out: a limit that bit in most
            # periods was applied, even when a busy host's waiting for a CPU makes the
            # throttled time understate it (slowdown=1: 42 % from throttled time, ratio 2.16)
            bit = [float(r["throttled_periods"]) / float(r["periods"]) for r in readings
                   if r.get("periods") and r.get("throttled_periods") is not None]
        except (TypeError, ValueError):
            continue
        if requested <= 0 or not applied:
            continue
        mean = sum(applied) / len(applied)
        if mean >= SLOWDOWN_APPLIED_SHARE * requested \
                or (bit and sum(bit) / len(bit) > SLOWDOWN_BIT_PERIODS):
            continue
        cpus = readings[0].get("cpus")
        if readings[0].get("method") == "freezer":
            out.append(Finding(
                "warn", env,
                f"slowdown={requested:g} was requested but the freezer took away {mean:.1%} on "
                f"average over {len(applied)} trial(s) (less than half of {requested:.0%}): "
                "the trials are too short for its duty cycle, so their results are not slowed "
                "as asked", "give the benchmark a larger problem (trials of a second or more)",
                kind="slowdown-not-applied", items=(f"applied {mean:.3f} of {requested:g}",)))
            continue
        out.append(Finding(
            "warn", env,
            f"slowdown={requested:g} was requested but the kernel applied {mean:.1%} on average "
            f"over {len(applied)} trial(s) (less than half of {requested:.0%}): the CPU quota "
            f"is for {cpus} CPU(s) and the benchmark kept fewer busy, so its results are not "
            "slowed as asked",
            f"pin the environment (cpus=LIST, e.g. {env}:cpus=0) or set slowdown_cpus= to the "
            "number of CPUs the benchmark keeps busy, then run again",
            kind="slowdown-not-applied", items=(f"applied {mean:.3f} of {requested:g}",)))
    return out


def unfinished_findings(trials, status: str, cid: str) -> list[Finding]:
    """A warning when campaign ``cid`` has trials still to run (``status``: the campaign's,
    ``running`` while its vhpc lives, else ``interrupted``): its n, intervals and verdicts are
    those of the trials so far, and may change.  ``trials``: stored trials (status, warmup)."""
    measured = [t for t in trials if not getattr(t, "warmup", False)]
    left = [t for t in trials if getattr(t, "status", "") in ("pending", "running")]
    if not left:
        return []
    done = sum(1 for t in measured if getattr(t, "status", "") == "done")
    advice = ("report it again when it has finished" if status == "running" else
              f"resume it with vhpc compare --resume {cid}")
    return [Finding("warn", "campaign", f"the campaign is unfinished ({status}): {done} of "
                    f"{len(measured)} measured trials done, {len(left)} to run; every figure "
                    "here is from the trials so far", advice, kind="unfinished")]
