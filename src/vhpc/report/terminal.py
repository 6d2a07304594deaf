"""Terminal presentation of an :class:`~vhpc.analysis.Analysis` with rich."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from vhpc.analysis import FASTER, INSUFFICIENT, NO_DIFFERENCE, SLOWER, Analysis
from vhpc.report import (
    TCG_MARK,
    direction_mark,
    env_header,
    fmt_mean_ci,
    fmt_overhead,
    fmt_p,
    fmt_ratio,
    params_label,
)

__all__ = ["render_table", "VERDICT_STYLE"]

#: rich style of each verdict
VERDICT_STYLE = {
    SLOWER: "bold red",
    FASTER: "bold green",
    NO_DIFFERENCE: "yellow",
    INSUFFICIENT: "magenta",
}


def _stack(lines: list[Text | str]) -> Text:
    out = Text()
    for i, line in enumerate(lines):
        if i:
            out.append("\n")
        out.append(line if isinstance(line, Text) else Text(line))
    return out


def render_table(analysis: Analysis, console: Console | None = None, title: str | None = None) -> Table:
    """Print the comparison table and the findings to ``console``; return the rich Table.

    One row per (benchmark, params, metric).  Columns: benchmark, metric [unit] with ↑/↓
    (higher/lower is better), the baseline's mean ± half-width of its confidence interval,
    each other environment's mean ± half-width, then ratio [CI], overhead %, Holm-adjusted p
    and verdict.  With several non-baseline environments the last four columns hold one line
    per environment, prefixed with its name, in column order.  Emulated (TCG) environments are
    marked "(TCG emulation)" in their header and explained in a footnote.  Then the findings.

    console: a rich Console (default: a new one on stdout); title: table title (default
    "Overhead relative to <baseline>").  Raises nothing for an empty analysis (prints a note).
    """
    console = console or Console()
    base = analysis.baseline
    others = analysis.others()
    conf = f"{analysis.confidence * 100:g} %"
    table = Table(
        title=escape(title or f"Overhead relative to {env_header(analysis, base)}"),
        caption=escape(
            f"mean ± {conf} CI half-width; ratio = env/{base} with {conf} Fieller CI; overhead > 0:"
            f" environment worse in the metric's direction; p: Welch t-test, Holm-adjusted;"
            f" α = {analysis.alpha:g}"
        ),
        show_lines=len(others) > 1,
    )
    table.add_column("benchmark", style="bold")
    table.add_column("metric [unit]")
    table.add_column(Text(env_header(analysis, base) + " (baseline)"), justify="right")
    for env in others:
        style = "red" if analysis.environments[env].emulated else None
        table.add_column(Text(env_header(analysis, env)), justify="right", header_style=style)
    multi = len(others) > 1
    table.add_column("ratio [CI]", justify="right")
    table.add_column("overhead", justify="right")
    table.add_column("p (Holm)", justify="right")
    table.add_column("verdict")

    for bench, params, metric in analysis.keys():
        sb = analysis.summary(bench, params, metric, base)
        any_s = sb or next(
            (analysis.summary(bench, params, metric, e) for e in others if analysis.summary(bench, params, metric, e)),
            None,
        )
        unit = any_s.unit if any_s else ""
        hib = any_s.higher_is_better if any_s else False
        # Text, not str: "[unit]" and "bench[params]" must not be read as rich markup
        cells: list = [
            Text(params_label(bench, params)),
            Text(f"{metric} [{unit}] {direction_mark(hib)}"),
            Text(fmt_mean_ci(sb)),
        ]
        for env in others:
            cells.append(Text(fmt_mean_ci(analysis.summary(bench, params, metric, env))))
        ratios, overheads, ps, verdicts = [], [], [], []
        for env in others:
            c = analysis.comparison(bench, params, metric, env)
            if c is None and analysis.summary(bench, params, metric, env) is None:
                continue
            prefix = f"{env}: " if multi else ""
            ratios.append(prefix + fmt_ratio(c))
            overheads.append(prefix + fmt_overhead(c))
            ps.append(prefix + fmt_p(c))
            if c is None:
                verdicts.append(Text(prefix + "no baseline", style="dim"))
            else:
                verdicts.append(Text(prefix + c.verdict, style=VERDICT_STYLE.get(c.verdict, "")))
        cells += [_stack(ratios), _stack(overheads), _stack(ps), _stack(verdicts)]
        table.add_row(*cells)

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
