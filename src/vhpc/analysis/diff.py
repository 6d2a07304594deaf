"""Campaign against campaign (``vhpc diff A B``): did the overhead change, and what changed
on the host?

* :func:`load` reads one campaign from a store into :class:`CampaignData` (a store of an older
  vhpc is read as far as it has the data; what it cannot give is one :class:`DiffError` line).
* :func:`diff` matches rows by (environment, benchmark, parameters, metric) and returns a
  :class:`Diff`:

  - :class:`OverheadChange` per matched non-baseline row: the environment/baseline ratio in A
    and in B (geometric means, each with its interval), their quotient ``Q = ratio_B /
    ratio_A`` with Welch's t on the ln values of the four samples
    (:func:`vhpc.core.logratio.log_contrast`), the model of every comparison (docs/statistics.md):
    Holm over the rows of B's primary metrics (a sweep's points within the sweep; secondary
    metrics in no family, checks not at all), the interval at the family's Holm level and the
    verdict read off it — ``regression`` / ``improvement`` (the interval excludes 1),
    ``equivalent`` (within ±margin), ``inconclusive`` — and, with a tolerance, PASS/FAIL.
    A metric whose values can be ≤ 0 (declared signed, or a value ≤ 0 in either campaign) is
    read by the table's signed rule instead: the change of the difference of means
    ``(x̄_B − ȳ_B) − (x̄_A − ȳ_A)`` in the metric's unit with Welch's interval
    (:func:`vhpc.core.stats.difference_contrast`), decided by
    :func:`vhpc.analysis.compare.difference_verdict` relative to A's baseline |mean|;
  - :class:`RawChange` per matched row, baseline included: B / A (geometric means) with its
    interval; for a signed metric B − A (arithmetic means, Welch's interval);
  - :class:`Unmatched` rows (only in A, only in B, or without valid samples on a side);
  - :class:`FingerprintChange` rows: what differs between the two campaigns' environment
    fingerprints, environment options (``slowdown=``…) and protocol.

* :func:`history` gives each non-baseline row's ratio with its interval over several
  campaigns of the same spec (:func:`same_spec`), for the history figure.

Every number comes from :mod:`vhpc.core.stats`; nothing here prints or writes files.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

from vhpc.core import logratio, stats
from vhpc.analysis.fingerprints import FingerprintChange, fingerprint_changes
from vhpc.analysis.compare import (
    declared_signed, difference_overhead, difference_verdict, off_log_scale, overhead_interval,
    overhead_pct, verdict_of,
)
from vhpc.analysis.results import (
    DEFAULT_MARGIN, EQUIVALENT as EQ, FASTER, INCONCLUSIVE as INC, INVERSE, POINT, PRIMARY,
    SAME, SLOWER, Comparison,
)
from vhpc.analysis.findings import slowdown_findings
from vhpc.analysis.results import Finding
from vhpc.analysis.pipeline import analyse, registry_signed
from vhpc.analysis.summaries import group_observations
from vhpc.core.errors import VhpcError
from vhpc.analysis.tolerance import (  # parse_*: also vhpc diff's, through this module
    DiffError, Tolerance, parse_percent as parse_percent,
    parse_tolerance_file as parse_tolerance_file,
)
from vhpc.core.metrics import EnvInfo, Observation
from vhpc.core.records import json_ready
from vhpc.spec.parse import default_baseline
from vhpc.store import Store, StoreError

REGRESSION = "regression"
IMPROVEMENT = "improvement"
EQUIVALENT = "equivalent"
INCONCLUSIVE = "inconclusive"
INSUFFICIENT = "insufficient data"
PASS, FAIL, NA = "PASS", "FAIL", "n/a"
#: :attr:`Diff.outcome` when a tolerance was given but no overhead row had an interval to hold to it
NOTHING_CHECKED = "NOTHING CHECKED"

RowKey = tuple[str, str, str, str]  # (environment, benchmark, params, metric)


# --------------------------------------------------------------------------------------------
# input
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CampaignData:
    """One campaign as the diff needs it: id, creation time (Unix seconds), the spec as stored
    (a JSON dict, read leniently: older specs may lack fields), environments with their
    fingerprints, every observation, and the store it came from."""

    id: str
    created: float
    spec: dict[str, Any]
    environments: dict[str, EnvInfo]
    observations: tuple[Observation, ...]
    source: str = ""
    status: str = ""
    #: findings read from the trials (a slowdown= the kernel did not apply)
    findings: tuple[Finding, ...] = ()

    @property
    def baseline(self) -> str:
        """The spec's baseline environment (:func:`default_baseline` when the spec names none)."""
        return str(self.spec.get("baseline") or default_baseline())

    def options(self, env: str) -> dict[str, Any]:
        """The environment's options as given in the spec (``{}`` when not recorded)."""
        for e in self.spec.get("environments") or []:
            if isinstance(e, dict) and e.get("name") == env:
                return dict(e.get("options") or {})
        return {}


#: columns a diff reads (store.campaign, environments, observations)
NEEDED = {"campaigns": ("id", "created", "status", "spec_json"),
          "environments": ("campaign_id", "name", "kind", "accel", "fingerprint_json"),
          "trials": ("id", "campaign_id", "seq", "round", "warmup", "environment", "benchmark",
                     "params", "session_index", "reboot"),
          "samples": ("trial_id", "metric", "value", "unit", "higher_is_better", "valid")}


def load(store: Store, cid: str) -> CampaignData:
    """Campaign ``cid`` of ``store``.  Raises :class:`DiffError` (one line) for an unknown id
    or a store whose tables lack what a diff needs (a much older vhpc)."""
    try:
        missing = [f"{table}.{c}" for table, cols in NEEDED.items()
                   for c in sorted(set(cols) - {r[1] for r in store.db.execute(
                       f"PRAGMA table_info({table})")})]
    except sqlite3.Error as exc:
        missing = [str(exc)]
    if missing:
        raise DiffError(f"{store.path} was written by an older vhpc and lacks "
                        f"{', '.join(missing)}, which a diff needs: re-run the campaign "
                        "with this vhpc (vhpc report reads what it can)")
    try:
        row = store.campaign(cid)
        envs = store.environments(cid)
        obs = tuple(store.observations(cid))
    except StoreError as exc:
        raise DiffError(str(exc)) from None
    except (sqlite3.Error, KeyError, IndexError, ValueError, TypeError) as exc:
        raise DiffError(f"{store.path}: campaign {cid} cannot be diffed, its store lacks what "
                        f"this vhpc reads ({exc}); re-run the campaign with this vhpc") from None
    spec = row.get("spec") if isinstance(row.get("spec"), dict) else {}
    try:  # trial diagnostics: a slowdown= that was not applied (best effort on old stores)
        found = tuple(slowdown_findings(store.trials(cid)))
    except (VhpcError, sqlite3.Error, KeyError, IndexError, ValueError, TypeError):
        found = ()
    return CampaignData(cid, float(row.get("created") or 0.0), spec, envs, obs,
                        str(store.path), str(row.get("status") or ""), found)


# --------------------------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RawChange:
    """One environment's metric in B against A: ``ratio`` = mean_b / mean_a with its interval
    (:func:`ratio_ci`, method named), where ``mean_a``/``mean_b`` are the centres the ratio
    divides: geometric means (``geometric``); ``change_pct`` positive = B worse in the
    metric's direction (as overhead_pct: rates inverted).  A signed metric (values can be
    ≤ 0) has no ratio: ``difference`` = mean_b − mean_a (arithmetic means, the metric's unit)
    with Welch's interval ``difference_ci`` (method ``welch-difference``), ``change_pct`` the
    worse-positive difference in percent of |mean_a|."""

    environment: str
    benchmark: str
    params: str
    metric: str
    unit: str
    higher_is_better: bool
    n_a: int
    n_b: int
    mean_a: float | None
    mean_b: float | None
    ratio: float | None
    ratio_ci: tuple[float | None, float | None]
    method: str
    change_pct: float | None
    change_ci: tuple[float | None, float | None]
    geometric: bool = True
    difference: float | None = None
    difference_ci: tuple[float | None, float | None] = (None, None)


@dataclass(frozen=True)
class OverheadChange:
    """Change of one environment's ratio to the baseline between A and B.

    ``ratio_a``/``ratio_b``: env / baseline (geometric means) in each campaign, with
    intervals; ``q`` = ratio_b / ratio_a with ``q_ci`` at its family's Holm level (Welch's t
    on ln values of the four samples, ``method`` log-welch), ``df``, ``p_value`` (H0: q = 1)
    and ``p_adjusted`` (Holm within the row's family: B's primary metrics, or one sweep);
    ``change_pct``: how much worse the overhead got, in percent of the A ratio, in the metric's
    direction (lower-is-better ``(q − 1)·100``, rates ``(1/q − 1)·100``), ``change_ci`` the
    same map of ``q_ci``; ``verdict`` read off ``q_ci``: regression / improvement (it
    excludes 1) / equivalent (within ±margin) / inconclusive / insufficient data; ``tolerance`` (fraction or None) and ``status`` PASS / FAIL / n/a:
    FAIL = a regression whose change exceeds the tolerance; ``note`` explains a PASS whose
    interval still reaches beyond the tolerance, or a verdict criterion that disagreed.

    A signed metric (values can be ≤ 0; ``method`` welch-difference) has no ratios (None):
    ``difference_a``/``difference_b`` are env − baseline (arithmetic means, the metric's unit)
    with Welch's intervals, ``difference`` = difference_b − difference_a with Welch's
    interval of the four-sample contrast ``difference_ci`` at the family's level (the verdict
    is read off it in the metric's direction, relative to A's baseline |mean|, as the table
    reads a signed metric), ``change_pct`` that change in percent of A's baseline |mean|."""

    environment: str
    baseline: str
    benchmark: str
    params: str
    metric: str
    unit: str
    higher_is_better: bool
    ratio_a: float | None
    ratio_a_ci: tuple[float | None, float | None]
    ratio_b: float | None
    ratio_b_ci: tuple[float | None, float | None]
    q: float | None
    q_ci: tuple[float | None, float | None]
    method: str
    df: float | None
    p_value: float | None
    p_adjusted: float | None
    change_pct: float | None
    change_ci: tuple[float | None, float | None]
    verdict: str
    tolerance: float | None = None
    status: str = NA
    note: str = ""
    difference_a: float | None = None
    difference_a_ci: tuple[float | None, float | None] = (None, None)
    difference_b: float | None = None
    difference_b_ci: tuple[float | None, float | None] = (None, None)
    difference: float | None = None
    difference_ci: tuple[float | None, float | None] = (None, None)


@dataclass(frozen=True)
class Unmatched:
    """A row that could not be diffed: ``side`` ``A`` or ``B`` (the only campaign that has it)
    or ``both`` (present in both but ``reason`` says why not comparable)."""

    side: str
    environment: str
    benchmark: str
    params: str
    metric: str
    reason: str


@dataclass(frozen=True)
class CampaignRef:
    """One side of a diff as its report names it: the campaign's ``id``, when it was
    ``created`` (seconds since the epoch), its ``source`` (the store it was read from), its
    ``baseline`` environment and its ``status`` (done, interrupted, ...)."""

    id: str
    created: float
    source: str
    baseline: str
    status: str


@dataclass
class Diff:
    """The whole diff of campaign ``a`` (before) and ``b`` (after)."""

    a: CampaignRef
    b: CampaignRef
    fingerprint: list[FingerprintChange]
    overhead: list[OverheadChange]
    raw: list[RawChange]
    unmatched: list[Unmatched]
    alpha: float
    confidence: float
    tolerance: Tolerance | None = None
    margin: float = DEFAULT_MARGIN
    #: (campaign "A" or "B", finding) read from either campaign's trials
    findings: list[tuple[str, Finding]] = field(default_factory=list)

    @property
    def failures(self) -> list[OverheadChange]:
        """The overhead rows whose status is FAIL (their growth beyond the tolerance)."""
        return [o for o in self.overhead if o.status == FAIL]

    @property
    def outcome(self) -> tuple[str, str] | None:
        """(status, sentence) of the diff against its tolerance: FAIL when a row FAILs, PASS
        when every row with an interval is within it, NOTHING CHECKED when no overhead row
        could be judged (each campaign needs an environment beside its baseline, with data in
        both: a gate that checked nothing must not read as PASS).  None without a tolerance."""
        if self.tolerance is None:
            return None
        tol = self.tolerance.describe()
        if self.failures:
            return FAIL, f"{len(self.failures)} regression(s) beyond the tolerance ({tol})"
        if not any(o.status == PASS for o in self.overhead):
            return NOTHING_CHECKED, (
                f"no overhead row to hold to the tolerance ({tol}): each campaign needs an "
                f"environment beside its baseline {self.a.baseline!r}, with data in both; the "
                f"raw figures are not judged")
        return PASS, f"no regression beyond the tolerance ({tol})"

    @property
    def exit_status(self) -> int:
        """1 when a row FAILs its tolerance, 2 when a tolerance was given and nothing could be
        checked against it (:attr:`outcome`), else 0."""
        status = (self.outcome or ("", ""))[0]
        return {FAIL: 1, NOTHING_CHECKED: 2}.get(status, 0)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (NaN/inf as None)."""
        return json_ready({
            "a": asdict(self.a), "b": asdict(self.b), "alpha": self.alpha,
            "margin": self.margin,
            "confidence": self.confidence,
            "tolerance": None if self.tolerance is None else {
                "default": self.tolerance.default,
                "rules": [list(r) for r in self.tolerance.rules]},
            "exit_status": self.exit_status,
            "fingerprint": [asdict(f) for f in self.fingerprint],
            "overhead": [asdict(o) for o in self.overhead],
            "raw": [asdict(r) for r in self.raw],
            "unmatched": [asdict(u) for u in self.unmatched],
            "findings": [{"campaign": tag, **asdict(f)} for tag, f in self.findings],
        })


# --------------------------------------------------------------------------------------------
# the diff
# --------------------------------------------------------------------------------------------


@dataclass
class _Side:
    """Valid values per row key of one campaign, with unit and direction."""

    values: dict[RowKey, list[float]] = field(default_factory=dict)
    unit: dict[RowKey, str] = field(default_factory=dict)
    hib: dict[RowKey, bool] = field(default_factory=dict)
    #: row keys stored with samples that are all invalid (no value to compare)
    invalid: set[RowKey] = field(default_factory=set)


def _side(c: CampaignData) -> _Side:
    s = _Side()
    for (bench, params, metric, env), g in group_observations(c.observations).items():
        k = (env, bench, params, metric)
        if not len(g.values["all"]):  # every sample invalid: an unmatched row, not a ratio
            s.invalid.add(k)
            continue
        s.values[k], s.unit[k], s.hib[k] = list(g.values["all"]), g.unit, g.hib
    return s


def ratio_ci(x: list[float], y: list[float], level: float
             ) -> tuple[float | None, tuple[float | None, float | None], str]:
    """(ratio, interval at ``level``, method) of positive samples x / y as every comparison
    computes it: geometric means with Welch's t on ln values; a side of one value: the ratio
    of geometric means without an interval (:func:`vhpc.analysis.compare.off_log_scale`).
    Values ≤ 0 are a signed metric's (:func:`_signed_keys`), never a ratio in a diff."""
    lw = logratio.log_welch(x, y)
    if lw is not None:
        return (lw.ratio if math.isfinite(lw.ratio) else None), lw.interval(level), \
            stats.LOG_WELCH
    ratio, ci, method, _ = off_log_scale(x, y)
    return ratio, ci, method


def _signed_keys(a: CampaignData, b: CampaignData, sides: tuple[_Side, _Side]
                 ) -> set[tuple[str, str, str]]:
    """(benchmark, params, metric) a diff of ``a`` and ``b`` reads by the signed rule (the
    difference of means, as the table reads them: :func:`vhpc.analysis.compare.draft`):
    declared signed by either campaign's custom metrics or by the registry, or holding a value
    ≤ 0 in either campaign, in any environment (one rule for a row, its baseline's row and
    its raw figures)."""
    keys = {k[1:] for side in sides for k in side.values}
    declared = declared_signed(a.spec) | declared_signed(b.spec) | registry_signed(
        {k[0] for k in keys})
    out = {k for k in keys if (k[0], k[2]) in declared}
    out |= {k[1:] for side in sides for k, vs in side.values.items() if any(v <= 0 for v in vs)}
    return out


def _raw_signed(k: RowKey, sa: _Side, sb: _Side, confidence: float) -> RawChange:
    """:class:`RawChange` of a signed metric: B − A by Welch's difference of means."""
    env, bench, params, metric = k
    xa, xb = sa.values[k], sb.values[k]
    hib = sa.hib[k]
    difference, lo, hi, _, _ = stats.welch_difference(xb, xa, confidence)
    mean_a, mean_b = stats.mean(xa), stats.mean(xb)
    change, change_ci = difference_overhead(difference, lo, hi, hib, abs(mean_a or 0.0))
    return RawChange(env, bench, params, metric, sa.unit[k], hib, len(xa), len(xb), mean_a, mean_b,
                     None, (None, None), stats.DIFFERENCE, change, change_ci, False, difference,
                     (lo, hi))


def _raw(k: RowKey, sa: _Side, sb: _Side, confidence: float) -> RawChange:
    """:class:`RawChange` of a positive metric: B / A with its interval (:func:`ratio_ci`),
    each side's geometric mean (arithmetic where a side has no log moments)."""
    env, bench, params, metric = k
    xa, xb = sa.values[k], sb.values[k]
    hib = sa.hib[k]
    ratio, (lo, hi), method = ratio_ci(xb, xa, confidence)
    moments_a, moments_b = logratio.log_moments(xa), logratio.log_moments(xb)
    geometric = moments_a is not None and moments_b is not None  # the ratio is of geometric means
    mean_a, mean_b = (moments_a.gmean, moments_b.gmean) if geometric else (stats.mean(xa), stats.mean(xb))
    return RawChange(env, bench, params, metric, sa.unit[k], hib, len(xa), len(xb), mean_a, mean_b,
                     ratio, (lo, hi), method, overhead_pct(ratio, hib),
                     overhead_interval(lo, hi, hib), geometric)


#: the table's verdicts as a diff names them
_AS_CHANGE = {SLOWER: REGRESSION, FASTER: IMPROVEMENT, EQ: EQUIVALENT, INC: INCONCLUSIVE}


def _verdict(lo: float | None, hi: float | None, hib: bool, margin: float) -> str:
    """The verdict read off the interval of Q (B's ratio over A's), in the metric's
    direction (:func:`vhpc.analysis.compare.verdict_of`)."""
    return _AS_CHANGE.get(verdict_of(lo, hi, hib, margin), INSUFFICIENT)


def _family(c: Comparison | None) -> object:
    """The Holm family of a diff row from B's comparison of it: the primary metrics together,
    a sweep's points per (environment, benchmark, quantity), None for the rest (no family)."""
    if c is None or c.role not in (PRIMARY, POINT):
        return None
    if c.role == PRIMARY:
        return "campaign"
    from vhpc.analysis.families import split_metric

    return ("sweep", c.environment, c.benchmark, split_metric(c.metric)[0])


def _status(change: float | None, change_ci: tuple[float | None, float | None], verdict: str,
            tol: float | None) -> tuple[str, str]:
    if tol is None:
        return NA, ""
    if verdict == INSUFFICIENT or change is None:
        return NA, "no interval: too few valid samples on a side"
    limit = tol * 100.0
    if verdict == REGRESSION and change > limit:
        return FAIL, f"overhead {change:+.1f} % > tolerance {limit:g} %"
    hi = change_ci[1]
    if verdict == REGRESSION:
        return PASS, f"regression of {change:+.1f} % within tolerance {limit:g} %"
    if hi is not None and hi > limit:
        return PASS, f"inconclusive: the interval reaches {hi:+.1f} % (> {limit:g} %)"
    return PASS, ""


def _signed_change(row: dict[str, Any], samples: tuple[list[float], ...], level: float,
                   confidence: float, margin: float, p_adjusted: float | None,
                   tol: float | None, lvl: str) -> OverheadChange:
    """:class:`OverheadChange` of a signed metric (values can be ≤ 0): the table's rule on the
    change of the difference env − baseline, ``(x̄_B − ȳ_B) − (x̄_A − ȳ_A)`` with Welch's
    interval at ``level`` (:func:`vhpc.core.stats.difference_contrast`), read by
    :func:`vhpc.analysis.compare.difference_verdict` in the metric's direction relative to A's
    baseline |mean|.  ``row``: the row's fields; ``samples``: (x_A, y_A, x_B, y_B)."""
    xa, ya, xb, yb = samples
    hib = row["higher_is_better"]
    difference_a, low_a, high_a, _, _ = stats.welch_difference(xa, ya, confidence)
    difference_b, low_b, high_b, _, _ = stats.welch_difference(xb, yb, confidence)
    difference, lo, hi, df, p = stats.difference_contrast((xb, yb, xa, ya), (1, -1, -1, 1), level)
    scale = abs(stats.mean(ya) or 0.0)
    verdict = _AS_CHANGE.get(difference_verdict(lo, hi, hib, margin, scale), INSUFFICIENT)
    change, change_ci = difference_overhead(difference, lo, hi, hib, scale)
    status, snote = _status(change, change_ci, verdict, tol)
    return OverheadChange(
        ratio_a=None, ratio_a_ci=(None, None), ratio_b=None, ratio_b_ci=(None, None), q=None,
        q_ci=(None, None), method=stats.DIFFERENCE, df=df, p_value=p, p_adjusted=p_adjusted,
        change_pct=change, change_ci=change_ci, verdict=verdict, tolerance=tol, status=status,
        note="; ".join(x for x in (snote, lvl) if x), difference_a=difference_a,
        difference_a_ci=(low_a, high_a), difference_b=difference_b,
        difference_b_ci=(low_b, high_b), difference=difference, difference_ci=(lo, hi), **row)


def _positive_change(row: dict[str, Any], samples: tuple[list[float], ...],
                     lw: logratio.LogWelch | None, level: float, confidence: float,
                     margin: float, p_adjusted: float | None, tol: float | None,
                     lvl: str) -> OverheadChange:
    """:class:`OverheadChange` of a positive metric: Q = (x_B/y_B) / (x_A/y_A), the change of
    the ratio env / baseline, by Welch's t on ln values (``lw``, :func:`logratio.log_contrast`)
    at ``level``; with a side of fewer than 2 values the model's centre without an interval.
    ``row``: the row's fields; ``samples``: (x_A, y_A, x_B, y_B); ``tol``: the row's tolerance
    (a fraction); ``lvl``: the note naming a Holm level."""
    xa, ya, xb, yb = samples
    hib = row["higher_is_better"]
    ratio_a, ratio_a_ci, _ = ratio_ci(xa, ya, confidence)
    ratio_b, ratio_b_ci, _ = ratio_ci(xb, yb, confidence)
    if lw is not None:
        q = lw.ratio if math.isfinite(lw.ratio) else None
        lo, hi = lw.interval(level)
        method, df, p = stats.LOG_WELCH, lw.df, lw.p
    else:  # positive, but a side of fewer than 2 values: the model's centre, no interval
        moments = [logratio.log_moments(v) for v in (xb, yb, xa, ya)]
        d_ln = moments[0].mean - moments[1].mean - moments[2].mean + moments[3].mean
        q = math.exp(d_ln) if d_ln < 700 else None
        lo = hi = df = p = None
        method = stats.NO_INTERVAL
    verdict = _verdict(lo, hi, hib, margin) if q is not None else INSUFFICIENT
    change, change_ci = overhead_pct(q, hib), overhead_interval(lo, hi, hib)
    status, snote = _status(change, change_ci, verdict, tol)
    return OverheadChange(
        ratio_a=ratio_a, ratio_a_ci=ratio_a_ci, ratio_b=ratio_b, ratio_b_ci=ratio_b_ci, q=q,
        q_ci=(lo, hi),
        method=method, df=df, p_value=p, p_adjusted=p_adjusted, change_pct=change,
        change_ci=change_ci, verdict=verdict, tolerance=tol, status=status,
        note="; ".join(x for x in (snote, lvl) if x), **row)


def _one_sided_rows(campaign_a: CampaignData, campaign_b: CampaignData, sa: _Side,
                    sb: _Side) -> list[Unmatched]:
    """The rows only one campaign has a valid sample of, then those neither has."""
    unmatched: list[Unmatched] = []
    for k in sorted(set(sa.values) - set(sb.values)):
        unmatched.append(Unmatched("A", *k, f"no valid sample in campaign {campaign_b.id}"
                                   if k in sb.invalid else f"not in campaign {campaign_b.id}"))
    for k in sorted(set(sb.values) - set(sa.values)):
        unmatched.append(Unmatched("B", *k, f"no valid sample in campaign {campaign_a.id}"
                                   if k in sa.invalid else f"not in campaign {campaign_a.id}"))
    for k in sorted((sa.invalid & sb.invalid) | (sa.invalid - set(sb.values))
                    | (sb.invalid - set(sa.values))):
        unmatched.append(Unmatched("both", *k, "no valid sample"))
    return unmatched


def _matched_rows(sa: _Side, sb: _Side, base: str, confidence: float,
                  signed: set[tuple[str, str, str]], checks: set[RowKey],
                  roles: Mapping[RowKey, Comparison], unmatched: list[Unmatched]
                  ) -> tuple[list[RawChange], list[dict[str, Any]]]:
    """The rows both campaigns have: their raw changes, and the drafts of the overhead rows
    (every non-baseline row but check figures and inverse duplicates, with its samples, ln
    contrast, p and Holm family).  A row that cannot be diffed (unit or direction differs, no
    baseline) is added to ``unmatched``."""
    common = sorted(set(sa.values) & set(sb.values), key=lambda k: (k[1], k[2], k[3], k[0] != base, k[0]))
    raw: list[RawChange] = []
    drafts: list[dict[str, Any]] = []
    for k in common:
        env, bench, params, metric = k
        if sa.unit[k] != sb.unit[k] or sa.hib[k] != sb.hib[k]:
            unmatched.append(Unmatched("both", *k, f"unit or direction differs "
                                       f"({sa.unit[k]} in A, {sb.unit[k]} in B)"))
            continue
        raw.append((_raw_signed if k[1:] in signed else _raw)(k, sa, sb, confidence))
        if env == base or k in checks:  # a check figure is no overhead (the raw row shows it)
            continue
        base_key = (base, bench, params, metric)
        if base_key not in sa.values or base_key not in sb.values:
            missing = " and ".join(s for s, side in (("A", sa), ("B", sb)) if base_key not in side.values)
            unmatched.append(Unmatched("both", *k, f"no {base} baseline for it in {missing}"))
            continue
        if sa.unit[base_key] != sa.unit[k] or sb.unit[base_key] != sb.unit[k]:
            unmatched.append(Unmatched("both", *k, "unit differs from the baseline's"))
            continue
        xa, ya, xb, yb = sa.values[k], sa.values[base_key], sb.values[k], sb.values[base_key]
        comparison = roles.get(k)
        if comparison is not None and comparison.role in (INVERSE, SAME):  # one effect: its partner's row
            continue
        is_signed = k[1:] in signed
        lw = None if is_signed else logratio.log_contrast((xb, yb, xa, ya), (1, -1, -1, 1))
        p = stats.difference_contrast((xb, yb, xa, ya), (1, -1, -1, 1))[4] if is_signed \
            else (lw.p if lw is not None else None)
        drafts.append(dict(
            environment=env, baseline=base, benchmark=bench, params=params, metric=metric,
            unit=sa.unit[k], higher_is_better=sa.hib[k], _ab=(xa, ya, xb, yb), _lw=lw,
            _p=p, _signed=is_signed, _family=_family(comparison)))
    return raw, drafts


def _holm_levels(drafts: list[dict[str, Any]], alpha: float
                 ) -> tuple[dict[int, float], dict[int, float], dict[int, int]]:
    """Per draft (by index): its Holm family's interval level
    (:func:`vhpc.core.logratio.holm_level`), its Holm-adjusted p (Holm 1979, only where it has
    a p) and the family's size (rows with a p, at least 1)."""
    by_family: dict[object, list[int]] = {}
    for i, d in enumerate(drafts):
        by_family.setdefault(d["_family"] if d["_family"] is not None else ("alone", i), []).append(i)
    level: dict[int, float] = {}
    adjusted: dict[int, float] = {}
    sizes: dict[int, int] = {}
    for members in by_family.values():
        p_values = [drafts[i]["_p"] for i in members]
        family_level = logratio.holm_level(p_values, alpha)
        with_p = [(i, p) for i, p in zip(members, p_values) if p is not None]
        for (i, _), p_adjusted in zip(with_p, stats.holm_adjust([p for _, p in with_p], alpha)):
            adjusted[i] = p_adjusted
        for i in members:
            level[i], sizes[i] = family_level, len(with_p) or 1
    return level, adjusted, sizes


def _campaign_ref(campaign: CampaignData) -> CampaignRef:
    """What a diff keeps of a campaign: id, creation time, store, baseline and status."""
    return CampaignRef(campaign.id, campaign.created, campaign.source, campaign.baseline,
                       campaign.status)


def diff(campaign_a: CampaignData, campaign_b: CampaignData, alpha: float = 0.05,
         tolerance: Tolerance | None = None, confidence: float | None = None,
         margin: float = DEFAULT_MARGIN) -> Diff:
    """Diff of campaign A (before) and B (after); see the module docstring.  ``alpha``: the
    false-positive rate of each Holm family; ``confidence``: the level of the raw rows'
    intervals (default 1 − alpha); ``margin``: the equivalence margin of the verdicts (0.05 =
    ±5 %); ``tolerance``: how much an overhead may grow before its row FAILs.

    Raises DiffError when the baselines have different names, alpha/confidence are outside
    (0, 1), or no row is in both campaigns."""
    if not 0.0 < alpha < 1.0:
        raise DiffError(f"--alpha must be between 0 and 1 (exclusive), got {alpha}")
    confidence = 1.0 - alpha if confidence is None else confidence
    if not 0.0 < confidence < 1.0:
        raise DiffError(f"confidence must be between 0 and 1 (exclusive), got {confidence}")
    if campaign_a.baseline != campaign_b.baseline:
        raise DiffError(f"campaign {campaign_a.id} compares against {campaign_a.baseline!r}, "
                        f"{campaign_b.id} against {campaign_b.baseline!r}: diff campaigns with "
                        "the same baseline environment")
    base = campaign_a.baseline
    sa, sb = _side(campaign_a), _side(campaign_b)
    from vhpc.analysis.checks import check_specs, pair_specs

    an_b = analyse(campaign_b.observations, campaign_b.environments, base, alpha, margin=margin,
                   checks=check_specs(campaign_b.spec), pairs=pair_specs(campaign_b.spec),
                   signed=declared_signed(campaign_b.spec))
    signed = _signed_keys(campaign_a, campaign_b, (sa, sb))
    roles = {(c.environment, c.benchmark, c.params, c.metric): c for c in an_b.comparisons}
    checks = {(e, k[0], k[1], k[2]) for k in an_b.keys() for e in an_b.environments
              if an_b.is_check(k[0], k[2])}
    unmatched = _one_sided_rows(campaign_a, campaign_b, sa, sb)
    raw, drafts = _matched_rows(sa, sb, base, confidence, signed, checks, roles, unmatched)
    level, adjusted, sizes = _holm_levels(drafts, alpha)
    overhead: list[OverheadChange] = []
    for i, row in enumerate(drafts):
        samples = row.pop("_ab")
        lw = row.pop("_lw")
        is_signed = row.pop("_signed")
        row.pop("_family"), row.pop("_p")
        tol = tolerance.for_row(row["environment"], row["benchmark"], row["metric"]) if tolerance else None
        lvl = f"interval at {level[i] * 100:.4g} % (Holm over {sizes[i]} rows)" \
            if sizes[i] > 1 and not math.isclose(level[i], 1 - alpha) else ""
        if is_signed:
            overhead.append(_signed_change(row, samples, level[i], confidence, margin,
                                           adjusted.get(i), tol, lvl))
        else:
            overhead.append(_positive_change(row, samples, lw, level[i], confidence, margin,
                                             adjusted.get(i), tol, lvl))
    if not raw:
        raise DiffError(f"campaigns {campaign_a.id} and {campaign_b.id} share no (environment, "
                        "benchmark, parameters, metric) with valid samples: nothing to diff "
                        "(check the ids)")
    found = [("A", f) for f in campaign_a.findings] + [("B", f) for f in campaign_b.findings]
    return Diff(_campaign_ref(campaign_a), _campaign_ref(campaign_b),
                fingerprint_changes(campaign_a, campaign_b), overhead, raw, unmatched, alpha,
                confidence, tolerance, margin, found)


# --------------------------------------------------------------------------------------------
# history
# --------------------------------------------------------------------------------------------


def spec_shape(spec: Mapping[str, Any]) -> tuple:
    """What makes two campaigns "of the same spec" for the history: benchmarks with their
    parameters, environment names and kinds, and the baseline.  Environment options and the
    protocol may differ (the fingerprint diff shows them)."""
    benches = sorted(json.dumps([b.get("name"), b.get("params")], sort_keys=True)
                     for b in spec.get("benchmarks") or [] if isinstance(b, dict))
    envs = sorted((str(e.get("name")), str(e.get("kind"))) for e in spec.get("environments") or []
                  if isinstance(e, dict))
    return (tuple(benches), tuple(envs), str(spec.get("baseline") or default_baseline()))


def same_spec(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether campaign specs ``a`` and ``b`` have one :func:`spec_shape`."""
    return spec_shape(a) == spec_shape(b)


@dataclass(frozen=True)
class HistoryPoint:
    """One campaign's ratio (environment / baseline) for one row, with its interval: ``n`` and
    ``n_baseline`` valid runs a side, ``role`` the comparison's (``primary``, ``secondary``…),
    ``unit``/``higher_is_better`` the metric's, ``source`` the store the campaign came from."""

    campaign: str
    created: float
    ratio: float | None
    ci: tuple[float | None, float | None]
    method: str
    n: int
    n_baseline: int = 0
    role: str = ""
    unit: str = ""
    higher_is_better: bool = False
    source: str = ""


def history(campaigns: Iterable[CampaignData], alpha: float = 0.05
            ) -> dict[RowKey, list[HistoryPoint]]:
    """Per (environment, benchmark, params, metric) of a non-baseline environment: the ratio
    to the baseline in each campaign (:func:`vhpc.analysis.analyse` with the campaign's
    declared checks: a check figure has no ratio to draw), oldest first."""
    from vhpc.analysis.checks import check_specs, pair_specs

    out: dict[RowKey, list[HistoryPoint]] = {}
    for c in sorted(campaigns, key=lambda c: c.created):
        an = analyse(c.observations, c.environments, c.baseline, alpha,
                     checks=check_specs(c.spec), pairs=pair_specs(c.spec),
                     signed=declared_signed(c.spec))
        for cmp in an.comparisons:
            key = (cmp.environment, cmp.benchmark, cmp.params, cmp.metric)
            out.setdefault(key, []).append(HistoryPoint(
                c.id, c.created, cmp.ratio, cmp.ratio_ci, cmp.ratio_ci_method, cmp.n,
                cmp.n_baseline, cmp.role, cmp.unit, cmp.higher_is_better, c.source))
    return out
