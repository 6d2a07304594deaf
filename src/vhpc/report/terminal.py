"""Terminal presentation of an :class:`~vhpc.analysis.Analysis` with rich."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from vhpc.analysis import FASTER, INSUFFICIENT, NO_DIFFERENCE, SLOWER, Analysis
from vhpc.analysis.families import families, family_summaries
from vhpc.report import (TCG_MARK, comparison_rows, env_header, family_metric_label,
                         finding_groups, fmt_family_counts, fmt_family_overhead, fmt_family_range,
                         fmt_points)

__all__ = ["render_table", "render_families", "VERDICT_STYLE"]

#: rich style of each verdict
VERDICT_STYLE = {
    SLOWER: "bold red",
    FASTER: "bold green",
    NO_DIFFERENCE: "yellow",
    INSUFFICIENT: "magenta",
}


def _caption(analysis: Analysis) -> str:
    base, conf = analysis.baseline, f"{analysis.confidence * 100:g} %"
    return (f"mean ± {conf} CI half-width; ratio = env/{base} with {conf} CI (Fieller; \"(log)\":"
            " delta method on the log ratio, \"(BCa)\": bootstrap, where Fieller's interval would"
            " reach ≤ 0 for positive quantities); overhead > 0: environment worse in the metric's"
            f" direction; p: Welch t-test, Holm-adjusted; α = {analysis.alpha:g}; a verdict needs"
            " p < α and the interval to exclude 1")


def render_table(analysis: Analysis, console: Console | None = None, title: str | None = None,
                 html_path: str | None = None, detail: bool | None = None,
                 shared=()) -> Table:
    """Print the comparison table and the findings to ``console``; return the rich Table.

    A campaign with a sweep (a metric over message size, :mod:`vhpc.analysis.families`) gets
    the compact summary of :func:`render_families` instead (``detail=None``, the default,
    decides so; ``detail=True`` forces the per-metric table below, ``False`` the compact one);
    ``html_path``: the report the compact summary points to for the per-size numbers;
    ``shared``: (environment, benchmark, params) whose ranks shared host CPUs across nodes or
    guests (:func:`vhpc.report.export.shared_points`), named under "limits trust".

    One row per (benchmark, params, metric, non-baseline environment)
    (:func:`vhpc.report.comparison_rows`), so many environments never stack in one cell.
    Columns: benchmark, metric [unit] with ↑/↓ (higher/lower is better), the baseline's mean ±
    half-width of its confidence interval, the environment (marked "(TCG emulation)" in red when
    emulated), its mean ± half-width, ratio [CI] (tagged "(log)"/"(BCa)" when not Fieller's),
    overhead %, Holm-adjusted p and verdict.  Benchmark, metric and baseline cells are printed
    once per metric, with a line between metrics when there are several environments.  Then a
    TCG footnote and the findings, one line per kind.

    console: a rich Console (default: a new one on stdout); title: table title (default
    "Overhead relative to <baseline>").  Raises nothing for an empty analysis (prints a note).
    """
    console = console or Console()
    fams = families(analysis)
    if detail is False or (detail is None and any(f.sweep for f in fams)):
        return render_families(analysis, console, title, html_path, shared)
    secondary = [f for f in fams if f.secondary] if detail is None else []
    keys = [k for f in fams if f not in secondary for k in f.keys]
    base = analysis.baseline
    multi = len(analysis.others()) > 1
    table = Table(title=escape(title or f"Overhead relative to {env_header(analysis, base)}"),
                  caption=escape(_caption(analysis)))
    table.add_column("benchmark", style="bold")
    table.add_column("metric [unit]")
    table.add_column(Text(env_header(analysis, base) + " (baseline)"), justify="right")
    table.add_column("environment")
    table.add_column("mean", justify="right")
    table.add_column("ratio [CI]", justify="right")
    table.add_column("overhead", justify="right")
    table.add_column("p (Holm)", justify="right")
    table.add_column("verdict")
    rows = comparison_rows(analysis, keys)
    for i, r in enumerate(rows):
        # Text, not str: "[unit]" and "bench[params]" must not be read as rich markup
        head = [Text(r.bench), Text(r.metric), Text(r.base)] if r.first else [Text("")] * 3
        if r.verdict is None:
            verdict = Text("no baseline" if r.environment else "", style="dim")
        else:
            verdict = Text(r.verdict, style=VERDICT_STYLE.get(r.verdict, ""))
        last = i + 1 == len(rows) or rows[i + 1].first
        table.add_row(*head, Text(r.env_label, style="red" if r.emulated else ""), Text(r.mean),
                      Text(r.ratio), Text(r.overhead), Text(r.p), verdict,
                      end_section=multi and last)

    if not analysis.keys():
        console.print("[yellow]no observations to analyse[/yellow]")
    else:
        console.print(table)
    if secondary:
        names = ", ".join(sorted({f.quantity for f in secondary}))
        console.print(Text(f"Secondary metrics ({names}) are in the HTML report"
                           + (f": {html_path}" if html_path else "") + ".", style="dim"))
    _footer(analysis, console, advice=True)
    return table


def _footer(analysis: Analysis, console: Console, advice: bool) -> None:
    """The TCG footnote and the findings, one line per kind (its scopes listed; the advice
    when ``advice``)."""
    emulated = analysis.emulated()
    if emulated:
        console.print(
            Text(
                f"{TCG_MARK} {', '.join(emulated)}: results come from TCG emulation, not hardware"
                " virtualization; these overheads are not KVM overheads.",
                style="bold red",
            )
        )
    if analysis.findings:
        console.print(Text("Findings (details in the HTML report)", style="bold"))
        # one line per kind of finding, its scopes listed, the advice once
        for g in finding_groups(analysis.findings):
            line = Text("  ")
            line.append(f"{g.level:<4} ", style="bold yellow" if g.level == "warn" else "cyan")
            if len(g.findings) == 1:
                line.append(f"{g.findings[0].scope}: ", style="bold")
                line.append(g.head)
            else:
                line.append(f"{g.head}: ", style="bold")
                line.append(", ".join(f.scope for f in g.findings))
            if advice:
                line.append(f" → {g.advice}", style="dim")
            console.print(line)


def _verdict_cell(fs) -> Text:
    """The family's verdict in its colour, for a sweep the per-size counts on a second line."""
    cell = Text(fs.verdict, style=VERDICT_STYLE.get(fs.verdict, ""))
    counts = fmt_family_counts(fs)
    if counts:
        cell.append("\n" + counts, style="dim")
    return cell


def render_families(analysis: Analysis, console: Console | None = None, title: str | None = None,
                    html_path: str | None = None, shared=()) -> Table:
    """Print the compact summary of a campaign with sweeps and return its rich Table.

    One row per metric family (:func:`vhpc.analysis.families.families`) and non-baseline
    environment, primary families first: benchmark (never cut) with its sizes in ascending
    order ("19 sizes, 1 B – 256 KiB"), metric [unit] ↑/↓, environment, overhead [CI] (for a
    sweep: from the geometric mean of the per-size ratios, its interval from the geometric
    means of the per-size bounds), the smallest and largest per-size ratio with their sizes,
    the verdict with the count of significant sizes, and what limits trust.  Secondary
    families (min/max beside an average, counts) are named in one line; the per-size numbers
    are left to the HTML report (``html_path``).  Then the TCG footnote and one line per kind
    of finding (advice in the HTML).
    """
    console = console or Console()
    fams = families(analysis)
    sums = family_summaries(analysis, [f for f in fams if not f.secondary], shared)
    table = Table(title=Text(title or f"Overhead relative to {env_header(analysis, analysis.baseline)}"),
                  caption=Text("overhead > 0: worse than " + analysis.baseline + " in the metric's "
                               "direction; sweeps: from the geometric mean of the per-size ratios "
                               "env / " + analysis.baseline + " [interval]; ratio range: smallest and "
                               "largest per-size ratio"),
                  show_lines=False)
    width = max([len(f.label) for f in fams] + [9])
    table.add_column("benchmark", style="bold", no_wrap=True, min_width=width)
    table.add_column("metric [unit]", no_wrap=True)
    table.add_column("environment")
    table.add_column("overhead [CI]", justify="right", no_wrap=True)
    table.add_column("ratio range")
    table.add_column("verdict")
    table.add_column("limits trust")
    last = last_bench = None
    for i, fs in enumerate(sums):
        fam = fs.family
        key = (fam.benchmark, fam.params, fam.quantity)
        first, new_bench = key != last, (fam.benchmark, fam.params) != last_bench
        last, last_bench = key, (fam.benchmark, fam.params)
        bench = Text(fam.label) if new_bench else Text("")
        if first and fam.sweep:
            bench.append(("\n" if new_bench else "") + fmt_points(fam), style="dim")
        nxt = sums[i + 1].family if i + 1 < len(sums) else None
        table.add_row(bench if first else Text(""),
                      Text(family_metric_label(fam)) if first else Text(""),
                      Text(env_header(analysis, fs.environment), style="red" if fs.emulated else ""),
                      Text(fmt_family_overhead(fs)), Text(fmt_family_range(fs)),
                      _verdict_cell(fs),
                      Text("; ".join(fs.trust) or "—", style="yellow" if fs.trust else "dim"),
                      end_section=nxt is None or (nxt.benchmark, nxt.params) != (fam.benchmark, fam.params))
    if not sums:
        console.print(Text("no comparison against " + analysis.baseline, style="yellow"))
    else:
        console.print(table)
    secondary = sorted({f.quantity for f in fams if f.secondary})
    where = f"the HTML report: {html_path}" if html_path else "the HTML report"
    extra = f"; secondary metrics ({', '.join(secondary)}) too" if secondary else ""
    console.print(Text(f"Per-size numbers, figures and details: {where}{extra}.", style="dim"))
    _footer(analysis, console, advice=False)
    return table
