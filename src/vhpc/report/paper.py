"""What the paper found beside what this host measured, and the whole-seed page.

* :func:`study_of` — the study a stored campaign ran (its spec's ``study`` field).
* :func:`study_figure` — the study's :class:`~vhpc.analysis.figdata.FigureData`.
* :func:`judge` — one :class:`Line` per stated finding of the study (statements from
  :mod:`vhpc.campaign.paper_findings`, seed data): the paper's value, this host's measurement and
  agrees / disagrees / cannot tell with the reason (too few runs, TCG emulation, placement
  not makeable here).
* :func:`study_block` — figure (inline SVG) + finding lines as HTML, used by the campaign
  report and by :func:`write_seed_page` (one page: a seed's studies in the paper's order).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

import jinja2
from markupsafe import Markup

from vhpc.analysis import Analysis, figdata

from vhpc.campaign import paper_findings
from vhpc.core import intervals, numfmt, stats
from vhpc.core.paths import write_atomic
from vhpc.report.pagetext import quote_html, scaling_title
from vhpc.campaign.paper_findings import AGREES, CANNOT_TELL, DISAGREES
from vhpc.campaign.references import cite


def study_of(meta: dict[str, Any] | None) -> str | None:
    """Study name of a stored campaign (``meta``: a campaign row of the store): its spec's
    ``study`` field (``meta["spec"]["study"]``, or ``meta["study"]`` in a
    :meth:`~vhpc.store.Store.campaigns` row), or None when it ran no known study."""
    from vhpc.campaign.studies import STUDIES

    meta = meta or {}
    spec = meta.get("spec")
    name = spec.get("study") if isinstance(spec, dict) else meta.get("study")
    return name if isinstance(name, str) and name in STUDIES else None


def study_figure(name: str, analysis: Analysis, trials: Iterable[Any] = ()) -> figdata.FigureData | None:
    """The declared figure of study ``name`` filled from ``analysis`` (memory-profile: from
    the stored trials); None when the study declares none.  Each panel is then dressed as the
    paper drew it (:func:`dress`): node counts from the trials' rank placement, per-node
    values, panel titles, the metrics' directions and the node counts whose ranks shared host
    CPUs."""
    from dataclasses import replace

    from vhpc.campaign.studies import STUDIES
    from vhpc.report import scaleout

    spec = STUDIES.get(name).figure
    if spec is None:
        return None
    trials = list(trials)
    if spec.kind == "memprofile":
        return figdata.memory_profile_data(spec, trials, analysis.baseline)
    out = figdata.FigureData(spec.seed, spec.number, spec.title, analysis.baseline, [],
                             emulated=bool(analysis.emulated()))
    nodes = scaleout.nodes_by_ranks(trials)
    shared = sorted({s.nodes for s in scaleout.shared_cpus(trials)})
    for panel in spec.panels:
        dressed = [dress(pd, panel, analysis, nodes, shared)
                   for pd in figdata.figure_data(replace(spec, panels=(panel,)), analysis).panels]
        order = [t for _, t in panel.titles]  # split panels in the paper's figure order
        dressed.sort(key=lambda pd: order.index(pd.title) if pd.title in order else len(order))
        out.panels.extend(dressed)
    return out


def dress(pd: figdata.PanelData, panel, analysis: Analysis, nodes: dict[tuple[str, int], int],
          shared: list[int]) -> figdata.PanelData:
    """``pd`` (from ``panel``) as the paper drew it: ``titles`` applied to a split panel;
    ``x_nodes``: x = Slurm nodes of the point's ranks (``nodes``: (benchmark, ranks) → nodes,
    from the trials) with the ranks per node in the axis label; ``per_node``: y and interval
    divided by the node count; ``pd.higher`` = metric → higher is better (the paper's numbers
    are drawn in the panel's own units with it); ``pd.shared_x`` = the node counts in
    ``shared`` (ranks of different nodes or guests on one host CPU) drawn on this axis."""
    import fnmatch
    from dataclasses import replace

    titles = dict(panel.titles)
    key = pd.title[len(panel.title):].lstrip(" —") if pd.title.startswith(panel.title) else pd.title
    if key in titles:
        pd.title = titles[key]
    pd.title = scaling_title(pd.title, panel.bench, pd.metrics, analysis)
    pd.higher = {c.metric: c.higher_is_better for c in analysis.comparisons
                 if c.metric in pd.metrics}
    for s in analysis.summaries:
        if s.metric in pd.metrics and s.metric not in pd.higher:
            pd.higher[s.metric] = getattr(s, "higher_is_better", None)
    pd.x_metrics = _x_metrics(panel, analysis) if not pd.numeric_x else {}
    pd.shared_x = []
    if not nodes and "under slurm" in pd.xlabel:  # a local run: no nodes to speak of
        pd.xlabel = pd.xlabel.split(" (", 1)[0]
    if not (panel.x_nodes and pd.numeric_x):
        return pd
    mine = {r: n for (b, r), n in nodes.items() if fnmatch.fnmatchcase(b, panel.bench)}
    per = {r / n for r, n in mine.items() if n}
    found = all(int(p.x) in mine for s in pd.series for p in s.points)
    if not mine or not found:
        pd.xlabel = "MPI ranks (node count not recorded)"
        return pd
    for s in pd.series:
        pts = []
        for p in s.points:
            k = mine[int(p.x)]
            div = k if panel.per_node else 1
            pts.append(replace(p, x=k, y=p.y / div,
                               low=None if p.low is None else p.low / div,
                               high=None if p.high is None else p.high / div))
        s.points = sorted(pts, key=lambda p: p.x)
    rpn = per.pop() if len(per) == 1 else None
    pd.xlabel = (f"{pd.xlabel} ({rpn:g} MPI rank{'s' if rpn != 1 else ''} per node)"
                 if rpn else pd.xlabel)
    pd.shared_x = [n for n in shared if any(p.x == n for s in pd.series for p in s.points)]
    return pd


def _x_metrics(panel, analysis: Analysis) -> dict[str, set[str]]:
    """Category → the metrics drawn at it, for a panel with categorical x (the paper's
    number for one metric is drawn over its own bars only)."""
    import fnmatch
    import re as re_

    labels = dict(panel.labels)
    out: dict[str, set[str]] = {}
    for s in analysis.summaries:
        m = re_.fullmatch(panel.y, s.metric)
        if not m or not fnmatch.fnmatchcase(s.benchmark, panel.bench):
            continue
        try:
            x = figdata._source(panel.x, s.benchmark, s.params, s.metric, s.environment,
                                s.group, m)
        except ValueError:
            continue
        if x is not None:
            out.setdefault(labels.get(x, x), set()).add(s.metric)
    return out


@dataclass(frozen=True)
class Line:
    """One stated finding judged on this host; ``more``: the other measurements it was set
    beside (one text each: what, value with interval, outcome); ``kind``: ``paper`` (a seed's
    statement) or ``host`` (what vhpc found about this host's run, e.g. shared CPUs)."""

    statement: str
    source: str
    paper: str
    measured: str
    outcome: str
    reason: str
    more: tuple[str, ...] = ()
    kind: str = "paper"
    #: the measurements left out because CPUs were shared between nodes or guests there
    #: ("left out: hpccg[ranks=3] (CPUs shared between nodes/guests: contention)"), as the
    #: headline leaves them out of its means; "" when none was
    left_out: str = ""
    #: a size summary's per-size values ("32 B: 3.1 % slower — ratio …"), ascending size
    points: tuple[str, ...] = ()

    def text(self) -> str:
        """The line as plain text ("paper found: ... / this host: ... → outcome (reason)")."""
        head = (f"paper found: {self.statement} ({self.source}; {self.paper})"
                if self.kind == "paper" else f"{self.statement} ({self.source})")
        more = f" and {len(self.more)} more" if self.more else ""
        return (f"{head} / this host: {self.measured}{more} → {self.outcome}"
                + (f" ({self.reason})" if self.reason else "")
                + (f"; {self.left_out}" if self.left_out else ""))


def stated(study: str) -> list[paper_findings.Finding]:
    """The seed's stated findings for ``study`` ([] when none are stored)."""
    return paper_findings.for_study(study)


def _relative(overhead: float | None, ci: tuple[float | None, float | None]
              ) -> tuple[float | None, tuple[float | None, float | None]]:
    """A signed metric's worse-positive overhead (percent of the baseline's |mean|) with its
    interval as 1 + overhead/100: the scale :func:`vhpc.campaign.paper_findings.verdict` reads
    with ``linear``."""
    def one(v: float | None) -> float | None:
        return None if v is None else 1 + v / 100
    return one(overhead), (one(ci[0]), one(ci[1]))


def _worse_ratio(ratio: float, ci: tuple[float | None, float | None], higher_is_better: bool
                 ) -> tuple[float, tuple[float | None, float | None]]:
    """A ratio and its interval in the "worse is higher" sense the findings use: inverted for
    higher-is-better metrics (a VM at half the bandwidth is ratio 2)."""
    lo, hi = ci
    if not higher_is_better:
        return ratio, (lo, hi)
    inv = (lambda v: 1 / v if v else None)
    return 1 / ratio, (inv(hi), inv(lo))


@dataclass(frozen=True)
class Evidence:
    """One measurement a finding is set beside: ``environment``/``benchmark`` ``metric`` against
    ``versus`` (an environment), the worse-is-higher ``ratio`` and interval ``ci``, ``n`` (the
    smaller side), ``emulated`` (either side ran under TCG); ``higher_is_better``: the metric's
    direction (:func:`value_text` shows the ratio as measured, environment / reference);
    ``linear``: a signed metric (compared by the difference of means), whose ``ratio`` and
    ``ci`` are 1 + the table's worse-positive overhead, relative to the reference's |mean|.
    ``span``: for a quantity swept over message sizes, the sizes summarised (``32 B–1 MiB,
    geometric mean of 16 sizes``: ``metric`` is then the quantity) and ``points`` one text per
    size, in ascending size ("" and () for one metric)."""

    environment: str
    benchmark: str
    metric: str
    versus: str
    ratio: float
    ci: tuple[float | None, float | None]
    n: int
    emulated: bool
    linear: bool = False
    higher_is_better: bool = False
    params: str = ""
    runs: int | None = None
    span: str = ""
    points: tuple[str, ...] = ()
    plan: Any = None  # the runs that decide at a band (vhpc.analysis.versus.band_plan)

    @property
    def label(self) -> str:
        """``hpccg[nx=16,ranks=3] mflops``: which point of which benchmark (``osu-bw optime
        over 32 B–1 MiB, …`` for a size summary)."""
        what = f"{self.benchmark}[{self.params}] {self.metric}" if self.params else \
            f"{self.benchmark} {self.metric}"
        return f"{what} over {self.span}" if self.span else what


def evidence(finding: paper_findings.Finding, analysis: Analysis) -> list[Evidence]:
    """The measurements of ``analysis`` that statement ``finding`` compares (its metric, benchmark,
    environment and groups; against the baseline: the campaign's comparisons, otherwise
    :func:`vhpc.analysis.versus.pairs`), in report order (sizes and parameters numerically,
    :func:`vhpc.analysis.families.natural_key`).  Against the baseline, the points of a
    quantity swept over message size are one measurement: the family summary
    (:func:`vhpc.analysis.families.summarise_family`: geometric mean of the per-size ratios,
    a conservative interval) over the sizes the paper plots (``finding.sizes``; every size when it
    gives none), the per-size values kept as :attr:`Evidence.points`."""
    from vhpc.analysis import families, versus

    if finding.against_baseline:
        rows = [(c.environment, c.benchmark, c.metric, analysis.baseline, c.higher_is_better,
                 c.ratio, c.ratio_ci, min(c.n, c.n_baseline), c.ratio_ci_method, c.params,
                 c.runs_needed) if c.ratio_ci_method != stats.DIFFERENCE else
                (c.environment, c.benchmark, c.metric, analysis.baseline, False,
                 *_relative(c.overhead_pct, c.overhead_ci), min(c.n, c.n_baseline),
                 c.ratio_ci_method, c.params, c.runs_needed)
                for c in analysis.comparisons]
    else:
        rows = [(p.environment, p.benchmark, p.metric, p.versus, p.higher_is_better, p.ratio,
                 (p.low, p.high), p.n, p.method, p.params, p.runs)
                for p in versus.pairs(analysis, finding.group, finding.versus, finding.versus_group)]
    out = []
    swept: dict[tuple[str, str, str, str], list[int]] = {}  # (env, bench, params, quantity) → sizes
    for env, bench, metric, ref, hib, ratio, ci, n, method, params, runs in rows:
        if ratio is None or not (paper_findings.matches(finding.metric, metric)
                                 and paper_findings.matches(finding.benchmark, bench)
                                 and paper_findings.matches(finding.environment, env)):
            continue
        quantity, size = families.split_metric(metric)
        if finding.against_baseline and size is not None and method != stats.DIFFERENCE:
            swept.setdefault((env, bench, params or "", quantity), []).append(size)
            continue
        worse, wci = _worse_ratio(ratio, ci, hib)
        emulated = _emulated(analysis, env, ref)
        row = analysis.comparison(bench, params, metric, env) if finding.against_baseline else None
        level = row.level if row is not None else analysis.confidence
        plan = None if method == stats.DIFFERENCE else versus.band_plan(
            analysis.summary(bench, params, metric, env, finding.group),
            analysis.summary(bench, params, metric, ref, finding.versus_group), level,
            method == stats.RANK)
        out.append(Evidence(env, bench, metric, ref, worse, wci, n, emulated,
                            method == stats.DIFFERENCE, hib, params or "", runs, plan=plan))
    for (env, bench, params, quantity), sizes in swept.items():
        out.extend(_size_summary(finding, analysis, env, bench, params, quantity, sizes))
    return sorted(out, key=lambda e: (families.natural_key(e.environment),
                                      families.natural_key(e.label)))


def _emulated(analysis: Analysis, *names: str) -> bool:
    return any(analysis.environments.get(e) is not None and analysis.environments[e].emulated
               for e in names)


def _size_summary(f: paper_findings.Finding, analysis: Analysis, env: str, bench: str,
                  params: str, quantity: str, sizes: list[int]) -> list[Evidence]:
    """One :class:`Evidence` for ``quantity`` of ``bench[params]`` swept over ``sizes``
    (bytes) in ``env`` against the baseline: the family summary over the sizes within
    ``f.sizes`` (all of them when none is); a lone size stays a measurement of its own; []
    when no size lies in the paper's range."""
    from dataclasses import replace

    from vhpc.analysis import families

    lo, hi = f.sizes or (0, float("inf"))
    keep = sorted(x for x in sizes if lo <= x <= hi)
    if not keep:
        return []
    pts = tuple((x, params, f"{quantity}_{x}") for x in keep)
    hib = next(c.higher_is_better for x in keep
               if (c := analysis.comparison(bench, params, f"{quantity}_{x}", env)) is not None)
    fam = families.Family(bench, params, quantity, "", hib, pts, parameter=families.SIZE)
    emulated = _emulated(analysis, env, analysis.baseline)
    ones = []  # each size on its own
    for _, _, metric in pts:
        c = analysis.comparison(bench, params, metric, env)
        w, wci = _worse_ratio(c.ratio, c.ratio_ci, hib)
        ones.append(Evidence(env, bench, metric, analysis.baseline, w, wci,
                             min(c.n, c.n_baseline), emulated, False, hib, params,
                             c.runs_needed))
    fs = families.summarise_family(analysis, fam, env)
    if len(keep) == 1 or fs is None or fs.ratio is None:
        return ones[:1]
    per_size = tuple(f"{families.fmt_size(x)}: {measured_text(one)}"
                     for x, one in zip(keep, ones))
    w, wci = _worse_ratio(fs.ratio, (fs.low, fs.high), hib)
    span = (f"{families.fmt_size(keep[0])}–{families.fmt_size(keep[-1])}, geometric mean of "
            f"{len(keep)} sizes")
    if f.sizes:
        span += f" (the paper: {families.fmt_size(lo)}–{families.fmt_size(hi)})"
    return [replace(Evidence(env, bench, quantity, analysis.baseline, w, wci, fs.n_min,
                             emulated, False, hib, params, None), span=span, points=per_size)]


#: why a measurement is left out of a finding (the headline's words, vhpc.report._split)
CONTENDED = "CPUs shared between nodes/guests: contention"


def judge(study: str, analysis: Analysis, not_makeable: str | None = None,
          shared: Iterable[tuple[str, str, str]] = ()) -> list[Line]:
    """One line per stated finding of ``study`` (:func:`vhpc.campaign.paper_findings.verdict` on
    each measurement :func:`evidence` finds; one disagreement decides); a finding with no
    matching measurement is "cannot tell".  A measurement whose environment or reference ran
    where ranks of different nodes or guests shared a host CPU (``shared``: (environment,
    benchmark, params), :func:`vhpc.report.export.shared_points`) is left out, as the headline
    leaves it out of its means, and the line says which (:attr:`Line.left_out`); a finding
    with only such measurements is "cannot tell"."""
    shared = set(shared)
    out = []
    for f in stated(study):
        source = f"seed {f.seed[:3]}, {f.where}"
        found, contended = [], []
        for e in evidence(f, analysis):
            hit = {(e.environment, e.benchmark, e.params), (e.versus, e.benchmark, e.params)}
            (contended if hit & shared else found).append(e)
        left = f"left out: {_points_text(contended)} ({CONTENDED})" if contended else ""
        if contended and not found:
            out.append(Line(f.quote, source, f"paper: {f.stated()}", "no measurement without "
                            "shared CPUs", CANNOT_TELL, f"every matching point had {CONTENDED}, "
                            "not the paper's setting", left_out=left))
            continue
        if not found:
            why = not_makeable or "not measured in this campaign"
            if not not_makeable and f.environment and not any(
                    paper_findings.matches(f.environment, e) for e in analysis.environments):
                why = (f"no environment {f.environment} in this campaign (a placement this "
                       "host may not make)")
            out.append(Line(f.quote, source, f"paper: {f.stated()}", "no matching measurement",
                            CANNOT_TELL, f"placement not makeable: {why}" if not_makeable else why))
            continue
        verdicts = [(e, *paper_findings.verdict(f, e.ratio, e.ci, e.n, e.emulated,
                                          placement_ok=not_makeable is None,
                                          linear=e.linear, margin=analysis.margin,
                                          runs=e.runs, higher_is_better=e.higher_is_better,
                                          plan=e.plan)) for e in found]
        outs = {v[1] for v in verdicts}
        outcome = DISAGREES if DISAGREES in outs else (AGREES if outs == {AGREES} else CANNOT_TELL)
        first = next(v for v in verdicts if v[1] == outcome)
        rest = [v for v in verdicts if v is not first]
        group = "" if f.group == "all" else f" ({f.group})"
        ref_group = "" if f.versus_group == "all" else f" ({f.versus_group})"

        def said(v) -> str:
            """One measurement in words: which, which way, its value; and why it cannot
            tell (the verdict's reason without its interval, which the value shows by the
            table's rule)."""
            e, o, why = v
            seen = why.rsplit(": ", 1)[-1] if f.claim == "direction" and o != CANNOT_TELL else ""
            seen = "" if seen in ("slower", "faster") else seen  # the words say it already
            return (f"{e.environment}{group} vs {e.versus}{ref_group}, {e.label}: "
                    f"{measured_text(e, f, o != CANNOT_TELL)}" + (f": {seen}" if seen else ""))

        out.append(Line(f.quote, source, f"paper: {f.stated()}", said(first), outcome,
                        _reason(first[1], first[2]),
                        tuple(f"{said(v)} → {v[1]}" + (f" ({_reason(v[1], v[2])})"
                                                        if v[1] == CANNOT_TELL else "")
                              for v in rest),
                        left_out=left, points=first[0].points))
    return out


def _reason(outcome: str, why: str) -> str:
    """What a line says after its outcome: for cannot tell, the verdict's reason without the
    interval it quotes (``ratio … : not equivalent within ±5 %; ≈12 runs each to decide`` →
    ``not equivalent within ±5 %; ≈12 runs each to decide``: the value beside it shows the
    interval by the table's rule); "" otherwise."""
    if outcome != CANNOT_TELL:
        return ""
    head, sep, tail = why.partition("; ")
    if head.startswith(("ratio ", "overhead ")):
        seen = head.rsplit(": ", 1)[-1] if ": " in head else ""
        return "; ".join(p for p in (seen, tail) if p)
    return why


def _points_text(found: list[Evidence]) -> str:
    """The measurements ``found`` in few words: one by its label (``hpccg[ranks=3] mflops``);
    several of a benchmark by their count and the parameters they share (``4 osu-coll points
    at ranks=3,sizes=16``)."""
    out = []
    for bench in sorted({e.benchmark for e in found}):
        mine = sorted({e.label: e for e in found if e.benchmark == bench}.values(),
                      key=lambda e: e.label)
        if len(mine) == 1:
            out.append(mine[0].label)
            continue
        pairs = [set(e.params.split(",")) - {""} for e in mine]
        common = ",".join(sorted(set.intersection(*pairs), key=lambda kv: kv.split("=")[0]))
        out.append(f"{len(mine)} {bench} points" + (f" at {common}" if common else ""))
    return ", ".join(out)


def direction_text(measurement: Evidence) -> str:
    """Which way the environment went against its reference, in words, from the point
    estimate: ``21 % faster`` / ``8.0 % slower`` (the metric's own change: a bandwidth 1.21
    times the reference's is 21 % faster, a time 1.08 times it 8.0 % slower), as a factor from
    :data:`vhpc.core.numfmt.FACTOR_FROM` times on (``×147 worse``, ``×12.5 better``: the
    table's cost factor); ``the same`` at a ratio of exactly 1.  A signed metric: its
    overhead relative to the reference's |mean| (``+12.0 % worse``)."""
    w = measurement.ratio  # worse-is-higher
    if w == 1:
        return "the same"
    if measurement.linear:
        pct = (w - 1) * 100
        return f"{numfmt.pct(abs(pct))[1:]} {'worse' if pct > 0 else 'better'}"
    if math.isnan(w) or w <= 0:
        return "—"
    if w >= numfmt.FACTOR_FROM or w <= 1 / numfmt.FACTOR_FROM:  # the table's factor form
        return f"{numfmt.factor(w)} worse" if w > 1 else f"{numfmt.factor(1 / w)} better"
    raw = 1 / w if measurement.higher_is_better else w  # the metric's own ratio, environment / reference
    change = abs(raw - 1) * 100
    digits = ".2g" if change < 1 else ".1f" if change < 10 else ".0f"
    return f"{change:{digits}} % {'slower' if w > 1 else 'faster'}"


def value_text(finding: paper_findings.Finding | None, measurement: Evidence, decided: bool = False) -> str:
    """The measured value of ``measurement`` with its interval and n, as the figure shows it: the
    overhead for an overhead statement ``finding`` (``+12.3 % [+4.0, +21.0], n = 2``; > 0: the
    environment is worse), else (also for ``finding`` None) the ratio environment / reference in the
    metric's own sense (``ratio 0.020 [0.015, 0.026], n = 5``: bandwidth at 2 %), then n.  The interval follows the table's rule
    (:func:`vhpc.core.intervals.interval_hidden`; ``decided``: the line's outcome was read off
    it, so it is shown): below 3 runs a side or wider than
    :data:`vhpc.core.intervals.WIDE_FACTOR` times it is :func:`vhpc.core.intervals.too_few_text`
    with the runs that would decide, after n (``ratio 0.927, n = 2; too few runs …``);
    ``no interval`` when there is none."""
    lo, hi = measurement.ci
    has = lo is not None and hi is not None
    if has and intervals.interval_hidden(measurement.n, lo, hi, decided):
        lo = hi = None
        has = False
        no_ci = f"; {intervals.too_few_text(measurement.runs)}"
    else:
        no_ci = "; no interval"
    if measurement.linear:  # a signed metric: its difference relative to the reference's |mean|
        def pct(v: float | None) -> float | None:
            return None if v is None else (v - 1) * 100
        val = f"overhead {numfmt.pct_ci(pct(measurement.ratio), pct(lo), pct(hi))} (difference of means)"
        ci = "" if has else no_ci
    elif finding is not None and finding.claim == "overhead_pct":
        val = "overhead " + numfmt.cost_ci(measurement.ratio, lo, hi)  # e.ratio: worse-is-higher
        ci = "" if has else no_ci
    else:
        raw = (lambda v: 1 / v if v else float("nan")) if measurement.higher_is_better else (lambda v: v)
        ends = sorted((raw(lo), raw(hi))) if has else (None, None)
        val = "ratio " + numfmt.ratio_ci(raw(measurement.ratio), *ends)
        ci = "" if has else no_ci
    return f"{val}, n = {measurement.n}{ci}"


def measured_text(measurement: Evidence, finding: paper_findings.Finding | None = None,
                  decided: bool = False) -> str:
    """The direction in words, then the value (:func:`direction_text`, :func:`value_text`):
    ``×147 worse — ratio 6.8e-3 […], n = 3``; ``, not significant`` when the interval shown
    holds no difference (``21 % faster, not significant — ratio 1.214 [0.724, 2.034], n =
    3``), ``, undecided`` when none is shown."""
    lo, hi = measurement.ci
    shown = lo is not None and hi is not None and not intervals.interval_hidden(measurement.n, lo, hi,
                                                                               decided)
    words = direction_text(measurement)
    if words != "the same" and not (shown and (lo > 1 or hi < 1)):
        words += ", not significant" if shown else ", undecided"
    return f"{words} — {value_text(finding, measurement, decided)}"



def host_lines(trials: Iterable[Any]) -> list[Line]:
    """Findings about this run itself: one line per node count at which ranks of different
    Slurm nodes or guests shared a host CPU (contention, not scaling)."""
    from vhpc.report import scaleout

    return [Line(f"at {n} nodes ranks of different nodes or guests share a host CPU",
                 "rank placement read back", "", text, CANNOT_TELL,
                 "contention, not scaling: these points do not measure scaling", kind="host")
            for n, text in scaleout.by_node_count(scaleout.shared_cpus(trials)).items()]


#: a point of a numeric panel at most this fraction of the one before it (in the direction
#: where more is better) is flagged as a sudden drop
DROP = 0.5


def drop_lines(fd: figdata.FigureData | None, trials: Iterable[Any]) -> list[Line]:
    """A line per sudden drop along a node or rank axis: a series whose value falls to
    :data:`DROP` or less of the point before it in the metric's better direction (the native
    HPCCG of Lange et al., VEE 2011, Fig. 6, from 660 to 170 Mflop/s per node at 2 nodes),
    with what vhpc knows of the cause: this host's load average around those trials.  A point
    where ranks of different nodes or guests shared a host CPU is left to that line and the
    figure's shading."""
    from vhpc.report import scaleout

    trials = list(trials)
    shared = set(scaleout.by_node_count(scaleout.shared_cpus(trials)))
    loads = [d.loadavg_before[0] for t in trials
             if (d := getattr(t, "diagnostics", None)) is not None
             and getattr(d, "loadavg_before", None)]
    out = []
    for pd in (fd.panels if fd else []):
        if not pd.numeric_x or pd.relative or pd.xlog:  # a size axis grows by nature
            continue
        higher = set(getattr(pd, "higher", {}).values())
        if len(higher) != 1 or None in higher:
            continue
        higher_is_better = higher.pop()
        for series in pd.series:
            pts = sorted(series.points, key=lambda p: p.x)
            for before, after in zip(pts, pts[1:]):
                if before.y <= 0 or after.y <= 0 or after.x in shared:
                    continue
                kept = after.y / before.y if higher_is_better else before.y / after.y
                if kept > DROP:
                    continue
                cause = ("not known to vhpc: the nodes' CPUs were their own; this host's load "
                         f"average reached {max(loads):.1f} during the trials" if loads else
                         "not known to vhpc: the nodes' CPUs were their own")
                out.append(Line(f"{series.label}: {pd.title or pd.ylabel} drops from {before.y:.4g} at "
                                f"{before.x:g} to {after.y:.4g} at {after.x:g} ({pd.ylabel})", "this run", "",
                                f"{kept:.2f}× the point before", CANNOT_TELL, cause,
                                kind="host"))
    return out


def references(fd: figdata.FigureData, study: str) -> dict[int, list[tuple[str, float, tuple]]]:
    """Paper values to draw beside the measurement, in the panel's own units: panel index →
    [(label, ratio, categories)] for overhead findings on a relative panel showing their
    metric (``categories``: the bars of a categorical panel it is about; () for all).  An
    overhead of v % is a VM/native ratio of 1 + v/100 for a lower-is-better metric (time,
    latency) and 1 / (1 + v/100) for a higher-is-better one (a 31 % penalty on GUPS is drawn
    at 0.76, where the VM's bar would stand) — the ratio :func:`vhpc.campaign.paper_findings.verdict` compares."""
    refs: dict[int, list[tuple[str, float]]] = {}
    for f in stated(study):
        if f.claim != "overhead_pct":
            continue
        for i, p in enumerate(fd.panels):
            hit = [m for m in p.metrics if paper_findings.matches(f.metric, m)]
            if not (p.relative and f.against_baseline and hit):
                continue
            higher = {getattr(p, "higher", {}).get(m) for m in hit}
            if len(higher) != 1 or None in higher:
                continue  # direction unknown or mixed: no single place on this axis
            worse = 1 + f.value / 100
            cats = tuple(x for x, ms in getattr(p, "x_metrics", {}).items()
                         if any(paper_findings.matches(f.metric, m) for m in ms))
            refs.setdefault(i, []).append(
                (f"{f.value:g} % overhead ({f.where[:24]})", 1 / worse if higher.pop() else worse,
                 cats))
    return refs


_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
_ENV.filters["quote"] = quote_html

BLOCK_TPL = _ENV.from_string("""
<div class="study" id="study-{{ name }}">
<h3>{{ caption }}</h3>
{% for n, text in shared %}<div class="shared-cpus" data-nodes="{{ n }}" style="background:#fde8e6;border-left:4px solid #b00020;padding:.4rem .8rem;margin:.4rem 0"><b>At {{ n }} nodes: contention, not scaling.</b>
Ranks of different nodes or guests shared a host CPU ({{ text }}); these points measure CPUs taken in turns, not a larger machine.</div>
{% endfor %}
{% if figure %}<figure class="wide study-figure">{{ figure }}</figure>
{% if png %}<p class="caption">PNG: <a href="{{ png }}">{{ png }}</a></p>{% endif %}
{% else %}<p class="caption">Nothing to draw: the campaign has no data for this figure's axes.</p>{% endif %}
<h4>What the paper found / this host</h4>
{% if lines %}<ul class="paper-findings">
{% for l in lines %}<li class="finding-line o-{{ l.outcome|replace(' ', '-') }} k-{{ l.kind }}">{% if l.kind == "paper" %}<b>paper found:</b> {{ l.statement|quote }}
<span class="src">({{ l.source }}; {{ l.paper }})</span>{% else %}<b>this run:</b> {{ l.statement }} <span class="src">({{ l.source }})</span>{% endif %} — <b>this host:</b> {{ l.measured }} →
<span class="outcome">{{ l.outcome }}</span>{% if l.reason %} ({{ l.reason }}){% endif %}{% if l.left_out %} <span class="left-out src">{{ l.left_out }}</span>{% endif %}
{% if l.points %}<details class="sizes"><summary>per size ({{ l.points|length }})</summary><ul>{% for m in l.points %}<li>{{ m }}</li>{% endfor %}</ul></details>{% endif %}
{% if l.more %}<details class="more"><summary>… and {{ l.more|length }} more</summary><ul>{% for m in l.more %}<li>{{ m }}</li>{% endfor %}</ul></details>{% endif %}</li>
{% endfor %}</ul>
{% else %}<p class="no-findings">No stated findings are stored for this study.</p>{% endif %}
{% if tables %}<details class="placement"><summary>Where the ranks ran: {{ tables|length }} placement table(s), one per benchmark and node count</summary>
{% for t in tables %}<table class="placement-table" data-nodes="{{ t.nodes }}" style="margin:.4rem 0"><caption>{{ t.nodes }} node(s): {{ t.benchmarks|join(", ") }}</caption>
<thead><tr><th>environment</th><th>rank</th><th>Slurm node</th><th>guest</th><th>vCPU</th><th>host CPU</th></tr></thead><tbody>
{% set sh = t.shared %}{% for r in t.rows %}<tr{% if loop.index0 in sh %} class="shared-cpu" style="color:#b00020;font-weight:bold" title="this host CPU also runs a rank of another node or guest"{% endif %}>{% for c in r %}<td>{{ c }}</td>{% endfor %}</tr>{% endfor %}
</tbody></table>
{% endfor %}</details>{% endif %}
</div>
""")


def study_block(name: str, analysis: Analysis, trials: Iterable[Any] = (), *, prefix: str = "s-",
                note: str | None = None, png: str | None = None, svg: str | None = None
                ) -> tuple[Markup, figdata.FigureData | None, list[Line], str | None]:
    """(HTML block, figure data, finding lines, figure SVG or None when nothing is drawn) of
    study ``name`` for a campaign: a banner per node count whose ranks shared host CPUs, the
    figure, the paper-found / this-host lines (and this run's own: shared CPUs), and the folded
    placement tables of a multi-node run.  ``svg``: the figure already drawn from the same
    data (the campaign report's figure.svg); drawn here when None."""
    from vhpc.campaign.studies import STUDIES
    from vhpc.report import scaleout, studyfig
    from vhpc.report.html import embed_figure

    trials = list(trials)
    fd = study_figure(name, analysis, trials)
    if svg is None and fd:
        svg = studyfig.draw(fd, "svg", references(fd, name))
    from vhpc.report.export import shared_points

    lines = (judge(name, analysis, note, shared_points(trials)) + host_lines(trials)
             + drop_lines(fd, trials))
    spec = STUDIES.get(name).figure
    caption = f"Seed {spec.seed} {spec.number}: {spec.title}" if spec else name
    shared = scaleout.by_node_count(scaleout.shared_cpus(trials))
    html = BLOCK_TPL.render(name=name, caption=caption, figure=embed_figure(svg, prefix, caption),
                            png=png if svg else None, lines=lines, shared=list(shared.items()),
                            tables=scaleout.placement_tables(trials))
    return Markup(html), fd, lines, svg


def limits(fd: figdata.FigureData | None, trials: Iterable[Any], emulated: bool) -> list[str]:
    """What limits trust in a study's result, one phrase each: TCG emulation, points from
    fewer than 3 runs, node counts whose ranks shared host CPUs."""
    from vhpc.report import scaleout, studyfig

    out = ["TCG emulation, not KVM"] if emulated else []
    pts = [p for pd in (fd.panels if fd else []) for s in pd.series for p in s.points]
    if any(p.n < studyfig.MIN_N for p in pts):
        out.append(f"n < {studyfig.MIN_N} at some points (min n = {min(p.n for p in pts)})")
    shared = scaleout.by_node_count(scaleout.shared_cpus(trials))
    if shared:
        out.append("shared host CPUs at " + ", ".join(map(str, shared)) + " nodes: contention, "
                   "not scaling")
    return out


def figure_json(fd: figdata.FigureData | None, lines: list[Line]) -> dict[str, Any]:
    """The ``study_figure`` entry of results.json: the figure's data and the finding lines."""
    return {"figure": fd.to_dict() if fd else None,
            "paper_findings": [dict(asdict(l), line=l.text()) for l in lines]}


PAGE_TPL = _ENV.from_string("""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>vhpc: seed {{ seed }} re-run on this host</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 1400px; padding: 0 1rem; color: #222; }
h2 { border-bottom: 1px solid #ccc; } svg.figure, img.figure { max-width: 100%; height: auto; }
.o-agrees .outcome { color: #1b7f2a; font-weight: bold; } .o-disagrees .outcome { color: #b00020; font-weight: bold; }
.o-cannot-tell .outcome { color: #8a6d00; font-weight: bold; } .src, .caption { color: #555; font-size: .85rem; }
.banner { background: #b00020; color: #fff; padding: .6rem 1rem; border-radius: 4px; }
td .limits, td.limits { color: #8a6d00; font-size: .8rem; } .why { color: #b00020; font-size: .8rem; max-width: 22rem; }
td.why-wide { color: #555; } .s-finished { color: #1b7f2a; } .s-failed, .s-interrupted { color: #b00020; } .s-not { color: #555; }
table.seed-studies td { vertical-align: top; }
table { border-collapse: collapse; font-size: .85rem; } th, td { border: 1px solid #ddd; padding: .2rem .5rem; }
</style></head><body>
<h1>Seed {{ seed }}: the paper's evaluation re-run on this host</h1>
<p>{{ title }}</p>
<p class="cite">{{ citation }}</p>
<table class="seed-studies" id="headline"><thead><tr><th>study</th><th>status</th><th>the paper found</th><th>this host measured</th><th>outcome</th></tr></thead><tbody>
{% for e in entries %}{% set n = [e.lines|length, 1]|max %}
<tr class="study-row" data-study="{{ e.name }}"><td rowspan="{{ n }}"><a href="#study-{{ e.name }}">{{ e.name }}</a><br><small>{{ e.number }}</small>{% if e.limits %}<div class="limits">{% for l in e.limits %}<div>{{ l }}</div>{% endfor %}</div>{% endif %}</td>
<td rowspan="{{ n }}" class="status s-{{ e.status.split(' ')[0] }}"><b>{{ e.status }}</b>{% if e.why and e.lines %}<div class="why">{{ e.why }}</div>{% endif %}</td>
{% if e.lines %}{% for l in e.lines %}{% if not loop.first %}<tr>{% endif %}<td>{% if l.kind == "paper" %}{{ l.statement|quote }}{% else %}{{ l.statement }}{% endif %}<div class="src">{{ l.paper }} ({{ l.source }})</div></td><td>{{ l.measured }}{% if l.points %}<details class="sizes"><summary>per size ({{ l.points|length }})</summary><ul>{% for m in l.points %}<li>{{ m }}</li>{% endfor %}</ul></details>{% endif %}</td>
<td class="o-{{ l.outcome|replace(' ', '-') }}"><span class="outcome">{{ l.outcome }}</span>{% if l.reason %}<div class="src">{{ l.reason }}</div>{% endif %}{% if l.left_out %}<div class="src left-out">{{ l.left_out }}</div>{% endif %}</td></tr>
{% endfor %}{% else %}<td colspan="3" class="why-wide">{{ e.why or "—" }}</td></tr>{% endif %}
{% endfor %}
</tbody></table>
<p class="caption">Per stated finding of the paper, its number beside this host's (overhead or ratio with its interval and n) and whether they agree.
Status: <b>finished</b> (every trial ran), <b>failed N of M</b> (with the first failed trial's reason), <b>interrupted</b> (resume with <code>vhpc compare --resume ID</code>), <b>not run</b>.</p>
{% if emulated %}<div class="banner">Some results come from TCG emulation, not hardware virtualization: their overheads are not KVM overheads.</div>{% endif %}
{% for e in entries %}
<section id="sec-{{ e.name }}"><h2>{{ e.name }}{% if e.cid %} — campaign {{ e.cid }}{% if e.report %} (<a href="{{ e.report }}">full report</a>){% endif %}{% endif %}</h2>
{% if e.block %}{% if e.why %}<p class="why">{{ e.status }}: {{ e.why }}</p>{% endif %}{{ e.block }}{% else %}<p>{{ e.status }}{% if e.why %}: {{ e.why }}{% endif %}</p>{% endif %}
</section>
{% endfor %}
<script>
window.addEventListener("load", function () {
  var figs = document.querySelectorAll("img.figure, svg.figure"), ok = 0;
  for (var i = 0; i < figs.length; i++) { try { var f = figs[i];
    if (f.tagName.toLowerCase() === "img") { if (f.complete && f.naturalWidth > 0) ok++; }
    else { var b = f.getBBox(); if (b && b.width > 0) ok++; } } catch (e) {} }
  document.body.dataset.figuresOk = String(ok); document.body.dataset.figuresTotal = String(figs.length);
  document.body.dataset.pageHeight = String(Math.ceil(document.documentElement.scrollHeight));
  var h = document.getElementById("headline");
  document.body.dataset.headlineBottom = String(Math.ceil(h.getBoundingClientRect().bottom + window.scrollY));
});
</script>
</body></html>
""")


SEED_TITLES = {"000": "Xen on NUMA hosts: socket span, cold/warm, partitioning, page faults, problem size",
               "001": "MPI and Linpack under Xen", "003": "NUMA-aware placement: oversubscription, memory profile, vCPU mapping, co-runners",
               "004": "virtualized HPC at scale: collectives, scaling, paging, noise"}


def write_seed_page(seed: str, entries: list[dict[str, Any]], path: str | Path) -> Path:
    """One HTML page for seed ``seed``: ``entries`` (name, number, cid, status and ``why``,
    the study's paper-finding ``lines``, ``limits``, block Markup, report link, emulated) in
    the paper's order; the first table puts per finding the paper's number beside this
    host's, with each study's status.  Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = [{"number": "", "cid": None, "status": "", "why": "", "block": None,
                "report": None, "emulated": False, "limits": [], "lines": [], **e}
               for e in entries]
    write_atomic(path, PAGE_TPL.render(seed=seed, title=SEED_TITLES.get(seed, ""), entries=entries, citation=cite(seed),
                                    emulated=any(e.get("emulated") for e in entries)))
    return path
