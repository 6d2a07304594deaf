"""Terminal presentation of an :class:`~vhpc.analysis.Analysis` with rich."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from vhpc.analysis import FASTER, INSUFFICIENT, NO_DIFFERENCE, SLOWER, Analysis
from vhpc.report import TCG_MARK, comparison_rows, env_header

__all__ = ["render_table", "VERDICT_STYLE"]

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


def render_table(analysis: Analysis, console: Console | None = None, title: str | None = None) -> Table:
    """Print the comparison table and the findings to ``console``; return the rich Table.

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
    rows = comparison_rows(analysis)
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
        kinds: dict[tuple[str, str], list] = {}
        for f in analysis.findings:
            kinds.setdefault((f.level, f.kind or f.message), []).append(f)
        for (level, _), group in kinds.items():
            line = Text("  ")
            line.append(f"{level:<4} ", style="bold yellow" if level == "warn" else "cyan")
            if len(group) == 1:
                line.append(f"{group[0].scope}: ", style="bold")
                line.append(group[0].message)
            else:
                head = group[0].message.split(":")[0]
                line.append(f"{head}: ", style="bold")
                line.append(", ".join(f.scope for f in group))
            line.append(f" → {group[0].advice}", style="dim")
            console.print(line)
    return table
