"""Overhead over time (``vhpc history``, docs/history.md): the series of each primary metric's
overhead across many campaigns, its change points at a stated false-alarm rate, what changed in
the fingerprints at each, and the CI gate's judgement of the latest campaign.

* :func:`gather` reads the campaigns of one or more stores that pass the filters
  (:class:`Filters`: benchmark and environment patterns, time window, campaign ids).
* :func:`build` turns them into :class:`Series`, one per (environment, benchmark, parameters,
  metric) of a primary metric, keyed also by the environment's kind and the baseline, so that
  only campaigns that ran the same benchmark, parameters and environment kinds meet in a series.
  Each point is the campaign's own ratio to its baseline with its interval and n
  (:func:`vhpc.analysis.diff.history`: the report's comparison, one definition of overhead).
  The change points come from :func:`vhpc.analysis.changepoints.detect` on the ln ratios, each
  with the overhead before and after (geometric mean of the segment's ratios, Student-t interval
  over its campaigns, :meth:`vhpc.core.logratio.LogMoments.interval`), the change after/before
  (Welch's t on the two segments' ln ratios, :func:`vhpc.core.logratio.log_welch`) and the
  fingerprint diff of the two campaigns either side (:func:`vhpc.analysis.fingerprints.
  fingerprint_changes`, as ``vhpc diff`` shows it).
* :meth:`History.check` is the CI gate: the latest campaign of each series against the model of
  the earlier ones since their last change point (:func:`vhpc.analysis.changepoints.gate`),
  Holm over the series at ``alpha`` (:func:`vhpc.core.stats.holm_adjust`): FAIL where the
  overhead grew beyond the margin.

Nothing here prints or writes files.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from vhpc.analysis import changepoints as cp
from vhpc.analysis.diff import CampaignData, HistoryPoint, history, load
from vhpc.analysis.fingerprints import FingerprintChange, fingerprint_changes
from vhpc.analysis.results import DEFAULT_MARGIN, PRIMARY
from vhpc.analysis.tolerance import DiffError
from vhpc.core import logratio, stats
from vhpc.core.errors import VhpcError
from vhpc.store import Store

#: series status: enough campaigns to judge, too few for any change at alpha, too noisy to
#: detect a step of the margin
JUDGED, TOO_SHORT, TOO_NOISY = "judged", "too short", "too noisy"
#: gate status per series
PASS, FAIL, NOT_CHECKED = "PASS", "FAIL", "not checked"

#: the trend is read over at most this many latest campaigns since the last change point
#: (Theil–Sen costs O(n²))
TREND_WINDOW = 30

#: (environment, benchmark, params, metric)
RowKey = tuple[str, str, str, str]


class HistoryError(DiffError):
    """Bad input to ``vhpc history`` (a filter, a store): one line, exit 2."""


@dataclass(frozen=True)
class Filters:
    """Which campaigns and rows a history takes: ``benchmarks`` / ``environments`` shell
    patterns (fnmatch; empty: all), ``since`` / ``until`` Unix seconds (inclusive; None: open),
    ``campaigns`` ids (empty: all)."""

    benchmarks: tuple[str, ...] = ()
    environments: tuple[str, ...] = ()
    since: float | None = None
    until: float | None = None
    campaigns: tuple[str, ...] = ()

    def takes_row(self, env: str, bench: str) -> bool:
        """Whether the row of environment ``env`` and benchmark ``bench`` passes."""
        return (not self.benchmarks or any(fnmatch.fnmatchcase(bench, p) for p in self.benchmarks)) \
            and (not self.environments or any(fnmatch.fnmatchcase(env, p)
                                              for p in self.environments))

    def takes_campaign(self, cid: str, created: float) -> bool:
        """Whether campaign ``cid``, created at ``created`` (Unix seconds), passes."""
        return (not self.campaigns or cid in self.campaigns) \
            and (self.since is None or created >= self.since) \
            and (self.until is None or created <= self.until)


def gather(stores: Sequence[Store], filters: Filters = Filters(),
           skipped: list[str] | None = None) -> list[CampaignData]:
    """The campaigns of ``stores`` that pass ``filters`` (finished or interrupted alike: each
    point has the runs it has), oldest first.  A campaign this vhpc cannot read, or whose id an
    earlier store already gave, is left out and named in ``skipped`` (one line each).  Raises :class:`HistoryError` when a campaign id of
    the filter is in no store."""
    out: list[CampaignData] = []
    seen: set[str] = set()
    for st in stores:
        for row in st.campaigns():
            cid = str(row["id"])
            if cid in seen:  # a copy of a store given beside it: one point per campaign
                if skipped is not None and filters.takes_campaign(cid, float(row.get("created") or 0.0)):
                    skipped.append(f"{cid} of {st.path} left out (already read from another store)")
                continue
            seen.add(cid)
            if not filters.takes_campaign(cid, float(row.get("created") or 0.0)):
                continue
            try:
                out.append(load(st, cid))
            except VhpcError as exc:
                if skipped is not None:
                    skipped.append(f"{cid} left out ({exc})")
    missing = [c for c in filters.campaigns if c not in seen]
    if missing:
        raise HistoryError(f"campaign {', '.join(missing)} is in none of the stores given: "
                           "check the id (vhpc list) or add its store with --store")
    return sorted(out, key=lambda c: c.created)


@dataclass(frozen=True)
class Segment:
    """Campaigns ``start``..``end − 1`` of a series between change points: ``ratio`` the
    geometric mean of their ratios, ``ci`` its Student-t interval over the campaigns at the
    history's confidence (None bounds with one campaign), ``n`` the campaigns."""

    start: int
    end: int
    ratio: float
    ci: tuple[float | None, float | None]
    n: int


@dataclass(frozen=True)
class ChangePoint:
    """A change in a series before point ``index`` (its first campaign ``campaign``):
    ``before`` / ``after`` the segments either side, ``change`` = after/before ratio with its
    Welch interval ``change_ci`` (None bounds when a side has one campaign), ``p`` the
    permutation p-value that found it, ``fingerprint`` what differs between the campaigns at
    ``index − 1`` and ``index`` in this series' environment, its baseline and the protocol."""

    index: int
    campaign: str
    before: Segment
    after: Segment
    change: float
    change_ci: tuple[float | None, float | None]
    p: float
    fingerprint: tuple[FingerprintChange, ...]


@dataclass(frozen=True)
class Trend:
    """Theil–Sen slope of the ln ratio over the campaigns since the last change point (at most
    the latest :data:`TREND_WINDOW`), as a
    percentage change per campaign with its interval at the history's confidence
    (``scipy.stats.theilslopes``; Sen 1968): ``direction`` ``rising`` / ``falling`` when the
    interval excludes 0, else ``flat``."""

    pct: float
    ci: tuple[float, float]
    n: int
    direction: str


@dataclass(frozen=True)
class GateResult:
    """The gate's judgement of a series' latest campaign (:func:`vhpc.analysis.changepoints.
    gate`): ``test`` (None when not judged), ``p_adjusted`` Holm over the checked series,
    ``level`` the one-sided level its ``bound`` (lower bound of the worse change, a fraction)
    is at, ``status`` PASS / FAIL / not checked, ``note`` why not, ``model`` the indices of the
    earlier campaigns judged against."""

    status: str
    test: cp.GateTest | None = None
    p_adjusted: float | None = None
    level: float | None = None
    bound: float | None = None
    model: tuple[int, int] = (0, 0)
    note: str = ""


@dataclass
class Series:
    """The overhead of one (environment, benchmark, params, metric) over campaigns, oldest
    first: ``points`` (each the campaign's ratio with its interval and n), ``change_points``,
    ``segments`` (between them), ``changes`` (what changed in the fingerprints between
    consecutive points), ``trend``, ``status`` (:data:`JUDGED`, :data:`TOO_SHORT`,
    :data:`TOO_NOISY`) with ``needed`` (campaigns needed to judge) and ``sd`` (standard
    deviation of the ln ratios about the segment means, ≈ the series' CV), ``gate``."""

    key: RowKey
    kind: str
    baseline: str
    unit: str
    higher_is_better: bool
    points: list[HistoryPoint]
    change_points: list[ChangePoint] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    trend: Trend | None = None
    status: str = JUDGED
    needed: int = 0
    sd: float | None = None
    gate: GateResult | None = None
    #: (index of the later point, what changed) for every pair of consecutive points whose
    #: fingerprints differ (as :attr:`ChangePoint.fingerprint`)
    changes: list[tuple[int, tuple[FingerprintChange, ...]]] = field(default_factory=list)

    @property
    def environment(self) -> str:
        """The series' environment name."""
        return self.key[0]

    @property
    def benchmark(self) -> str:
        """The series' benchmark name."""
        return self.key[1]

    @property
    def params(self) -> str:
        """The series' benchmark parameters, as the store writes them."""
        return self.key[2]

    @property
    def metric(self) -> str:
        """The series' metric name."""
        return self.key[3]

    @property
    def latest(self) -> HistoryPoint:
        """The newest point (points are oldest first)."""
        return self.points[-1]


@dataclass
class History:
    """Every series of a history, with the settings its sentences hold at: ``alpha`` (the
    false-alarm rate per series of the change points, and the gate's family-wise level),
    ``margin`` (the gate's allowed growth, 0.05 = 5 %), ``confidence`` of the intervals,
    ``campaigns`` read, ``skipped`` lines, ``permutations`` and ``seed`` of the tests."""

    series: list[Series]
    alpha: float
    margin: float
    confidence: float
    campaigns: list[CampaignData]
    skipped: list[str] = field(default_factory=list)
    permutations: int = cp.DEFAULT_PERMUTATIONS
    seed: int = 0
    checked: bool = False

    @property
    def failures(self) -> list[Series]:
        """The series whose gate FAILs (empty before :meth:`check`)."""
        return [s for s in self.series if s.gate is not None and s.gate.status == FAIL]

    @property
    def exit_status(self) -> int:
        """After :meth:`check`: 1 when a series FAILs, 2 when no series could be checked (a
        gate that checked nothing must not read as a pass), else 0.  0 without a check."""
        if not self.checked:
            return 0
        if self.failures:
            return 1
        return 0 if any(s.gate and s.gate.status == PASS for s in self.series) else 2

    def check(self) -> None:
        """Judge each series' latest campaign against the earlier ones since their last change
        point (:func:`vhpc.analysis.changepoints.gate`), Holm over the judged series at
        ``alpha``; sets each :attr:`Series.gate`."""
        tests: list[tuple[Series, cp.GateTest, tuple[int, int]]] = []
        for series in self.series:
            n = len(series.points)
            start = max([c.index for c in series.change_points if c.index <= n - 1 - cp.MIN_EARLIER],
                        default=0)
            earlier = [math.log(p.ratio) for p in series.points[start:n - 1]]  # type: ignore[arg-type]
            t = cp.gate(earlier, math.log(series.latest.ratio), series.higher_is_better,  # type: ignore[arg-type]
                        self.margin) if n >= 2 else None
            if t is None:
                series.gate = GateResult(NOT_CHECKED, model=(start, n - 1), note=(
                    f"{len(earlier)} earlier campaign(s) since the last change; the gate needs "
                    f"at least {cp.MIN_EARLIER}"))
                continue
            tests.append((series, t, (start, n - 1)))
        p_values = [t.p for _, t, _ in tests]
        level = logratio.holm_level(p_values, self.alpha)  # one-sided: p < 1 − level ⇔ Holm rejects
        for (series, t, model), p_adjusted in zip(tests, stats.holm_adjust(p_values, self.alpha)):
            series.gate = GateResult(FAIL if p_adjusted < self.alpha else PASS, t, p_adjusted, level,
                                t.bound(level), model)
        self.checked = True


def _segment(ratios: Sequence[float], start: int, end: int, confidence: float) -> Segment:
    m = logratio.log_moments(ratios[start:end])
    assert m is not None  # ratios are positive
    return Segment(start, end, float(m.gmean or math.inf), m.interval(confidence), end - start)


def _trend(ln: np.ndarray, confidence: float) -> Trend | None:
    if ln.size < 3 or np.ptp(ln) == 0:
        return None
    from scipy.stats import theilslopes

    r = theilslopes(ln, np.arange(ln.size), alpha=confidence)
    lo, hi = math.expm1(r.low_slope) * 100, math.expm1(r.high_slope) * 100
    direction = "rising" if r.low_slope > 0 else "falling" if r.high_slope < 0 else "flat"
    return Trend(math.expm1(r.slope) * 100, (lo, hi), int(ln.size), direction)


def _fingerprint(a: CampaignData, b: CampaignData, env: str, baseline: str
                 ) -> tuple[FingerprintChange, ...]:
    scopes = {"campaign", "all environments", env, baseline}
    return tuple(f for f in fingerprint_changes(a, b) if f.scope in scopes)


def _series(key: RowKey, kind: str, baseline: str, pts: list[HistoryPoint],
            by_id: dict[tuple[str, str], CampaignData], alpha: float, margin: float,
            confidence: float, permutations: int, seed: int) -> Series:
    first = pts[-1]
    series = Series(key, kind, baseline, first.unit, first.higher_is_better, pts)
    ratios = [p.ratio for p in pts]  # positive (None left out by the caller)
    ln = np.log(np.asarray(ratios, dtype=float))
    splits = cp.detect(ln, alpha, permutations, seed)
    bounds = [0, *(sp.index for sp in splits), len(pts)]
    series.segments = [_segment(ratios, i, j, confidence) for i, j in zip(bounds, bounds[1:])]
    for i in range(1, len(pts)):
        campaign_before, campaign_after = (by_id.get((p.source, p.campaign)) for p in pts[i - 1:i + 1])
        changes = _fingerprint(campaign_before, campaign_after, key[0], baseline) \
            if campaign_before and campaign_after else ()
        if changes:
            series.changes.append((i, changes))
    changed = dict(series.changes)
    for sp, before, after in zip(splits, series.segments, series.segments[1:]):
        lw = logratio.log_welch(ratios[after.start:after.end], ratios[before.start:before.end])
        change = after.ratio / before.ratio
        ci = lw.interval(confidence) if lw is not None else (None, None)
        changes = changed.get(sp.index, ())
        series.change_points.append(ChangePoint(sp.index, pts[sp.index].campaign, before, after,
                                                change, ci, sp.p, changes))
    series.sd = cp.residual_sd(ln, splits)
    series.trend = _trend(ln[max(bounds[-2], len(pts) - TREND_WINDOW):], confidence)
    shortest = cp.campaigns_needed(alpha)
    needed = cp.campaigns_needed(alpha, series.sd, margin)
    if len(pts) < shortest:
        series.status, series.needed = TOO_SHORT, shortest
    elif not splits and len(pts) < needed:
        series.status, series.needed = TOO_NOISY, needed
    return series


def points(campaigns: Iterable[CampaignData], filters: Filters = Filters(),
           alpha: float = 0.05) -> dict[tuple[RowKey, str, str], list[HistoryPoint]]:
    """Per (row key, environment kind, baseline) of a primary metric of a non-baseline
    environment that passes ``filters``: the campaigns' points, oldest first (each campaign
    analysed alone, :func:`vhpc.analysis.diff.history`, so each point keeps its own baseline and
    kinds); campaigns without a ratio for it — a metric that can be ≤ 0, a side without valid
    runs — left out."""
    rows: dict[tuple[RowKey, str, str], list[HistoryPoint]] = {}
    for c in sorted(campaigns, key=lambda c: c.created):
        kinds = {n: e.kind for n, e in c.environments.items()}
        for key, pts in history([c], alpha).items():
            p = pts[0]
            if p.role != PRIMARY or p.ratio is None or not p.ratio > 0 \
                    or not filters.takes_row(key[0], key[1]):
                continue
            rows.setdefault((key, kinds.get(key[0], ""), c.baseline), []).append(p)
    return rows


def analyse_series(rows: dict[tuple[RowKey, str, str], list[HistoryPoint]],
                   campaigns: Sequence[CampaignData] = (), alpha: float = 0.05,
                   margin: float = DEFAULT_MARGIN, permutations: int = cp.DEFAULT_PERMUTATIONS,
                   seed: int = 0, skipped: Sequence[str] = ()) -> History:
    """The :class:`History` of the series ``rows`` (:func:`points`): change points at
    false-alarm rate ``alpha`` per series, segments, trend and status, intervals at 1 − alpha;
    the fingerprint change at a change point from ``campaigns`` (none where a campaign is not
    among them).  Raises :class:`HistoryError` for alpha or margin out of range, and when
    ``rows`` is empty."""
    if not 0.0 < alpha < 1.0:
        raise HistoryError(f"--alpha must be between 0 and 1 (exclusive), got {alpha}")
    if not 0.0 <= margin < 10.0:
        raise HistoryError(f"--margin must be a percentage from 0% to 1000%, got {margin:.0%}")
    if not rows:
        raise HistoryError("no campaign in the stores has a primary metric of an environment "
                           "beside its baseline that passes the filters: run campaigns with "
                           "'vhpc compare', or widen --benchmark/--environment/--since")
    chosen = sorted(campaigns, key=lambda c: c.created)
    by_id = {(c.source, c.id): c for c in chosen}
    series = [_series(key, kind, base, pts, by_id, alpha, margin, 1.0 - alpha, permutations,
                      seed)
              for (key, kind, base), pts in sorted(rows.items(), key=lambda kv: (
                  kv[0][0][1], kv[0][0][2], kv[0][0][3], kv[0][0][0]))]
    return History(series, alpha, margin, 1.0 - alpha, chosen, list(skipped), permutations,
                   seed)


def build(campaigns: Iterable[CampaignData], filters: Filters = Filters(), alpha: float = 0.05,
          margin: float = DEFAULT_MARGIN, permutations: int = cp.DEFAULT_PERMUTATIONS,
          seed: int = 0, skipped: Sequence[str] = ()) -> History:
    """:func:`analyse_series` of the :func:`points` of ``campaigns``.  Raises
    :class:`HistoryError` as it does."""
    chosen = list(campaigns)
    return analyse_series(points(chosen, filters, alpha), chosen, alpha, margin, permutations,
                          seed, skipped)
