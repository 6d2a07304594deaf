"""Terminal presentation of an :class:`~vhpc.analysis.Analysis` with rich."""

from __future__ import annotations

import textwrap

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from vhpc.analysis import Analysis
from vhpc.analysis.families import Family
from vhpc.core.numfmt import FACTOR_NOTE, is_factor_text
from vhpc.core.stats import RANK
from vhpc.report import (TCG_MARK, TOO_FEW, common_notes, comparison_rows, env_header,
                         env_label, family_centre, family_metric_label, finding_groups,
                         fmt_centre, fmt_family_counts, fmt_family_level, fmt_family_overhead,
                         fmt_points, headline_rows, measured_rows, p_adjustment)

__all__ = ["render_table", "render_headline", "render_metrics", "VERDICT_STYLE"]

#: rich style of a verdict (by its text, so a new verdict word needs no import here); one not
#: named is yellow
VERDICT_STYLE = {"slower": "bold red", "faster": "bold green", "equivalent": "cyan"}
#: most places a finding of the terminal names (the HTML report lists every one)
SCOPES = 3
#: the trust note of an emulated environment (its "(TCG)" mark and the footnote say it)
TCG_TRUST = "TCG emulation, not KVM"


#: the line above a headline decided by ranks (``--method rank``)
RANK_LINE = ("By ranks (--method rank): HL overhead = the Hodges–Lehmann ratio the verdict is "
             "read off, with its Mann–Whitney interval")


def _caption(analysis: Analysis) -> str:
    base, conf = analysis.baseline, f"{analysis.confidence * 100:g} %"
    levels = ("1 − α/m for every row, simultaneous" if p_adjustment(analysis) == "Bonferroni"
              else "Holm's where it says slower/faster, 1 − α/m for the rest")
    return (f"geo. mean of each side over n runs (\"mean … ± half-width\": arithmetic, where a"
            f" value is ≤ 0); ratio = env/{base} of those means, with the"
            f" interval the verdict is read off ({_method_words(analysis)}; {conf}, or the level"
            f" of the primary metrics' family where named: {levels}); overhead > 0: environment"
            f" worse in the metric's direction; p: {p_adjustment(analysis)}-adjusted;"
            " slower/faster: the interval"
            f" excludes 1; equivalent: it lies within ±{analysis.margin * 100:g} %;"
            " inconclusive: neither")


def _method_words(analysis: Analysis) -> str:
    """How the ratios' intervals were computed, in words: Welch's t on ln values, or (``--method
    rank``) the Hodges–Lehmann ratio with the Mann–Whitney interval (its ratio is that
    estimate, not the geo. means' quotient)."""
    if any(c.ratio_ci_method == RANK for c in analysis.comparisons):
        return ("by ranks, --method rank: the Hodges–Lehmann ratio with the Mann–Whitney "
                "interval on ln values, not the geo. means' quotient")
    return "Welch's t on ln values"


def render_table(analysis: Analysis, console: Console | None = None, title: str | None = None,
                 html_path: str | None = None, detail: bool | None = None,
                 shared=(), all_hint: str | None = None, notes=()) -> Table:
    """Print the headline (and, with ``detail``, every metric) and the findings to ``console``;
    return the headline's rich Table.

    The headline (:func:`render_headline`) is the answer, and what a campaign's terminal ends
    with: one row per benchmark's primary metric (family) and environment, at 80 columns
    without a cut cell.  ``detail=True`` (``vhpc report ID --all``) prints the per-metric table
    (:func:`render_metrics`) before it; ``None`` (the default) prints it too when it fits the
    console's width in at most :data:`FIT_ROWS` rows, and says how to get it otherwise
    (``all_hint``: the command, e.g. ``vhpc report ID --all``); ``False`` never prints it.
    ``html_path``: the report named for figures and details; ``shared``: (environment,
    benchmark, params) whose ranks shared host CPUs across nodes or guests
    (:func:`vhpc.report.export.shared_points`), named under "trust"; ``notes``: lines printed
    after the findings (this host's load).  Raises nothing for an empty analysis (prints a
    note).
    """
    console = console or Console()
    if not analysis.keys():
        console.print(Text("no observations to analyse", style="yellow"))
        _footer(analysis, console, advice=True)
        return Table()
    metrics = render_metrics(analysis, title=None) if analysis.others() else None
    shown = metrics is not None and (detail or (detail is None and _fits(console, metrics)))
    if shown and _natural(console, metrics) > console.width:
        _print_stacked(analysis, console)  # --all on a narrow console: no number folded
    elif shown:
        console.print(metrics)
    _footer(analysis, console, advice=False)  # the findings first: the answer ends the output
    for note in notes:
        console.print(Text(note, style="dim"), overflow="fold")
    table = render_headline(analysis, console, title, shared, every=bool(detail),
                            all_hint=all_hint)
    more = [] if shown or metrics is None or detail is False else [
        f"every metric: {all_hint}" if all_hint else "every metric: vhpc report ID --all"]
    if html_path:
        more.append(f"figures and details: {html_path}")
    if more:
        console.print(Text("; ".join(more), style="dim"), overflow="fold")
    return table


#: the per-metric table is printed unasked when it has at most this many rows and fits the
#: console's width (so a 2-benchmark, 2-environment demo shows its whole result in one screen)
FIT_ROWS = 8


def _natural(console: Console, table: Table) -> int:
    """The width ``table`` takes when nothing has to wrap."""
    return console.measure(table, options=console.options.update_width(10_000)).maximum


def _fits(console: Console, table: Table) -> bool:
    """Whether ``table`` renders within the console's width in at most :data:`FIT_ROWS` rows."""
    return table.row_count <= FIT_ROWS and _natural(console, table) <= console.width


def _print_stacked(analysis: Analysis, console: Console) -> None:
    """The per-metric table (:func:`render_metrics`) for a console too narrow for it: per
    metric a line "benchmark[params] · metric [unit] ↑ · baseline: its geo. mean (n)", beneath
    it one row per environment (geo. mean, ratio [CI] broken before its interval where
    narrow, overhead, adjusted p, verdict).  No number is folded."""
    rows = comparison_rows(analysis)
    # "too few runs for an interval (…)" a line of its own beneath the row: the ratio cell
    # keeps the number
    ratios = {id(r): r.ratio.split(", " + TOO_FEW)[0] for r in rows}
    heads = ("environment", "geo. mean", "ratio [CI]", "overhead",
             f"p ({p_adjustment(analysis)})", "verdict")
    envs = {r.environment: Text("  ").append_text(_short_env(analysis, r.environment))
            for r in rows if r.environment}
    cols = [[e.cell_len for e in envs.values()], [len(r.mean) for r in rows],
            None, [len(r.overhead) for r in rows], [len(r.p) for r in rows],
            [len(r.verdict or "no baseline") for r in rows]]
    widths = [max(len(h), *c) if c else len(h) for h, c in zip(heads, cols) if c is not None]
    ratio_w = max(len(heads[2]), console.width - sum(widths) - 2 * (len(heads) - 1),
                  *(len(x) for r in rows for x in _lines(ratios[id(r)], 1).plain.split("\n")))
    widths.insert(2, min(ratio_w, max((len(ratios[id(r)]) for r in rows), default=10)))
    over = sum(widths) + 2 * (len(widths) - 1) - console.width
    if over > 0:  # the geometric mean's n beneath it
        widths[1] = max(len(heads[1]), widths[1] - over,
                        *(len(x) for r in rows for x in _lines(r.mean, 1).plain.split("\n")))

    def grid() -> Table:
        t = Table.grid(padding=(0, 2))
        for i, w in enumerate(widths):
            t.add_column(width=w, justify="left" if i in (0, 5) else "right", overflow="fold",
                         no_wrap=i in (1, 2, 3, 4))
        return t

    base = env_header(analysis, analysis.baseline)
    console.print(Text(f"Every metric, relative to {base}", style="bold"), justify="center")
    head = grid()
    head.add_row(*(Text(h, style="bold") for h in heads))
    console.print(head)
    console.print(Text("─" * min(console.width, sum(widths) + 2 * (len(widths) - 1)), style="dim"))
    for r in rows:
        if r.first:
            line = Text(r.bench, style="bold").append(f" · {r.metric} · {base}: {r.base}")
            console.print(line, overflow="fold")
        if not r.environment:
            continue
        verdict = (Text(r.verdict, style=VERDICT_STYLE.get(r.verdict, "yellow"))
                   if r.verdict else Text("no baseline", style="dim"))
        body = grid()
        body.add_row(envs[r.environment], _lines(r.mean, widths[1]),
                     _lines(ratios[id(r)], widths[2]), Text(r.overhead), Text(r.p), verdict)
        console.print(body)
        if ratios[id(r)] != r.ratio:  # the interval not shown as numbers, and why
            note = Table.grid()
            note.add_column(width=widths[0] + 2)
            note.add_column(width=max(20, console.width - widths[0] - 2), overflow="fold")
            note.add_row("", Text(r.ratio[len(ratios[id(r)]) + 2:], style="dim"))
            console.print(note)
    console.print(Text(_caption(analysis), style="dim"), overflow="fold")


def render_metrics(analysis: Analysis, title: str | None = None) -> Table:
    """The per-metric table (``vhpc report ID --all``), as a rich Table, not printed.

    One row per (benchmark, params, metric, non-baseline environment)
    (:func:`vhpc.report.comparison_rows`), secondary metrics included, so many environments
    never stack in one cell.  Columns: benchmark, metric [unit] with ↑/↓ (higher/lower is
    better), the baseline's geometric mean [interval] (n=…), the environment (marked "(TCG
    emulation)" when emulated), its geometric mean [interval] (n=…) (the ratio's centres as
    docs/statistics.md promises: :func:`vhpc.report.fmt_gmean_ci`), ratio [CI] (tagged
    "(Fieller)" for values ≤ 0, off the log scale), the overhead in its interval's form,
    adjusted p (Holm's, Bonferroni's under ``--intervals simultaneous``) and verdict.  Benchmark,
    metric and baseline cells are printed once per metric, with a line between metrics when
    there are several environments.  Cells fold rather than being cut, but for the verdict."""
    base = analysis.baseline
    multi = len(analysis.others()) > 1
    table = Table(title=escape(title or f"Every metric, relative to {env_header(analysis, base)}"),
                  caption=escape(_caption(analysis)))
    for name, right in (("benchmark", False), ("metric [unit]", False),
                        (env_header(analysis, base) + " (baseline)", True), ("environment", False),
                        ("geo. mean", True), ("ratio [CI]", True), ("overhead", True),
                        (f"p ({p_adjustment(analysis)})", True), ("verdict", False)):
        table.add_column(Text(name), justify="right" if right else "left", overflow="fold",
                         style="bold" if name == "benchmark" else "", no_wrap=name == "verdict")
    rows = comparison_rows(analysis)
    for i, r in enumerate(rows):
        # Text, not str: "[unit]" and "bench[params]" must not be read as rich markup
        head = [Text(r.bench), Text(r.metric), Text(r.base)] if r.first else [Text("")] * 3
        if r.verdict is None:
            verdict = Text("no baseline" if r.environment else "", style="dim")
        else:
            verdict = Text(r.verdict, style=VERDICT_STYLE.get(r.verdict, "yellow"))
        last = i + 1 == len(rows) or rows[i + 1].first
        table.add_row(*head, Text(r.env_label, style="red" if r.emulated else ""), Text(r.mean),
                      Text(r.ratio), Text(r.overhead), Text(r.p), verdict,
                      end_section=multi and last)
    return table


def _footer(analysis: Analysis, console: Console, advice: bool) -> None:
    """The TCG footnote and the findings, one entry per kind (its scopes listed; the advice of
    a warning); with ``advice`` every finding with its advice, else the notes (info) named in
    one line, left to the HTML report, and the kinds the headline's rows say already
    (:data:`ROW_KINDS`) not repeated."""
    emulated = analysis.emulated()
    if emulated:
        console.print(
            Text(
                f"{TCG_MARK} {', '.join(emulated)}: results come from TCG emulation, not hardware"
                " virtualization; these overheads are not KVM overheads.",
                style="bold red",
            )
        )
    said = ROW_KINDS if not advice and analysis.others() else ()  # the rows say these
    shown = [f for f in analysis.findings
             if (f.kind != "tcg" or not emulated) and f.kind not in said]
    if shown:
        console.print(Text("Findings (details in the HTML report)", style="bold"))
        # one entry per kind of finding, its scopes listed, the advice once; a long one
        # continues under its text, not under the level
        grid = Table.grid(padding=(0, 1))
        grid.add_column(width=6, justify="right")
        grid.add_column(overflow="fold")
        groups = finding_groups(shown)
        notes = [] if advice else [g for g in groups if g.level != "warn"]
        for g in groups:
            if g in notes:
                continue
            level = Text(g.level, style="bold yellow" if g.level == "warn" else "cyan")
            line = Text()
            if len(g.findings) == 1:
                line.append(f"{g.findings[0].scope}: ", style="bold")
                line.append(g.head)
            else:
                line.append(f"{g.head}: ", style="bold")
                scopes = [f.scope for f in g.findings]  # the rest in the HTML report
                line.append(", ".join(scopes[:SCOPES]) + (
                    f" and {len(scopes) - SCOPES} more" if len(scopes) > SCOPES else ""))
            if advice or g.level == "warn":
                line.append(f" → {g.advice}", style="dim")
            grid.add_row(level, line)
        if notes:
            grid.add_row(Text("info", style="cyan"),
                         Text("also noted, in the HTML report: "
                              + "; ".join(g.head.split(":")[0] for g in notes)[:150], style="dim"))
        console.print(grid)


#: kinds of findings the headline's rows say already (the verdict and the runs to decide it,
#: "too few runs", "noisy (CV …)", the check line): not repeated beneath them in the terminal
ROW_KINDS = frozenset({"inconclusive", "few-samples", "high-variation", "check-passed"})


def _short_env(analysis: Analysis, env: str) -> Text:
    """The environment's name, "(TCG)" after it in red when emulated (the footnote says what
    that means)."""
    info = analysis.environments.get(env)
    emulated = bool(info and info.emulated)
    return Text(env_label(analysis, env) + (" (TCG)" if emulated else ""),
                style="red" if emulated else "")


def _verdict_cell(fs, check: str = "") -> Text:
    """The family's verdict in its colour; beneath it a sweep's per-point counts and the
    check ("check pass" / "check fail: …" in red)."""
    cell = Text(fs.verdict, style=VERDICT_STYLE.get(fs.verdict, "yellow"))
    counts = fmt_family_counts(fs)
    if counts:
        cell.append("\n" + counts, style="dim")
    if check:
        cell.append("\ncheck " + check, style="bold red" if "fail" in check else "green")
    return cell


def _overhead_cells(analysis: Analysis, rows) -> list[Text]:
    """Each headline row's overhead cell: the overhead with its interval on one line, a Holm
    level (or why there is no interval) beneath; "too few runs for an interval" (and why, by
    ranks) wrapped to the width the numbers need, so the verdict beside it keeps its width."""
    texts = [fmt_family_overhead(r.summary, level=False, margin=analysis.margin) for r in rows]
    numbers = [t.split(", " + TOO_FEW)[0] for t in texts]
    width = max(19, *map(len, numbers))
    return [Text("\n".join(filter(None, [n] + (textwrap.wrap(t[len(n) + 2:], width)
                                               if TOO_FEW in t else [])
                                  + [fmt_family_level(r.summary)])))
            for r, t, n in zip(rows, texts, numbers)]


def _column_widths(heads: tuple[str, ...], envs: list[Text], centres: list[Text],
                   cells: list[Text], verdicts: list[Text], console_width: int) -> list[int]:
    """The headline's four column widths in characters: each as wide as its widest line
    (the environment indented by 2); the verdict takes the rest of ``console_width``, at least
    17 ("insufficient data")."""
    widths = [max(len(heads[0]), *(e.cell_len for e in envs)) + 2,
              max(len(heads[1]), *(c.cell_len for c in centres)),
              max(len(heads[2]), *(len(x) for c in cells for x in c.plain.split("\n")))]
    need = max(len(heads[3]), *(len(x) for v in verdicts for x in v.plain.split("\n")))
    widths.append(min(need, max(17, console_width - sum(widths) - 2 * 3)))
    return widths


def _headline_grid(widths: list[int]) -> Table:
    """An empty grid of the headline's columns: cells fold, never cut; the geometric mean and
    the overhead right-aligned."""
    table = Table.grid(padding=(0, 2))
    for i, width in enumerate(widths):
        table.add_column(width=width, overflow="fold", justify="right" if i in (1, 2) else "left")
    return table


def _print_preamble(console: Console, analysis: Analysis, title: str | None, ranked: bool,
                    common: list[str], all_pass: bool) -> None:
    """The headline's title, and what holds for every row: ranks, the trust notes every row
    shares, every check passed."""
    console.print(Text(title or f"Overhead relative to {analysis.baseline}", style="bold"),
                  justify="center")
    if ranked:
        console.print(Text(RANK_LINE, style="bold"), overflow="fold")
    if common:
        console.print(Text("Limits trust in every row: " + "; ".join(common), style="yellow"),
                      overflow="fold")
    if all_pass:
        console.print(Text("Check: every benchmark's verification or check passed in every run",
                           style="green"), overflow="fold")


def _print_family_line(console: Console, analysis: Analysis, fam: Family) -> None:
    """A family's line above its rows, "benchmark[params] · metric [unit] ↑/↓", then the
    baseline's centre and a sweep's points after it while they fit whole, else on a line of
    their own beneath it ("0 B" and "us" stay whole)."""
    line = Text(fam.label, style="bold")
    line.append(f" · {family_metric_label(fam)}")
    base = fmt_centre(family_centre(analysis, fam, analysis.baseline), fam.unit)
    extra = [(f"{analysis.baseline} {base}", ""), (fmt_points(fam), "dim")]
    rest = []
    for text, style in (e for e in extra if e[0]):
        if not rest and line.cell_len + 3 + len(text) <= console.width:
            line.append(" · " + text, style=style)
        else:
            rest.append((text, style))
    console.print(line, overflow="fold")
    if rest:
        more = Text("  ")
        for j, (text, style) in enumerate(rest):
            more.append((" · " if j else "") + text, style=style)
        console.print(more, overflow="fold")


def _print_trust_note(console: Console, indent: int, trust: list[str]) -> None:
    """A row's own "limits trust" notes beneath it, indented past the environment column
    (``indent`` characters), its words wrapped under each other."""
    note = Table.grid()
    note.add_column(width=indent + 2)
    note.add_column(width=max(20, console.width - indent - 2), overflow="fold")
    note.add_row("", Text("limits trust: " + "; ".join(trust), style="yellow"))
    console.print(note)


def _legend(analysis: Analysis, rows, cells: list[Text], ranked: bool) -> Text:
    """The line under the headline saying how to read it: the sign of an overhead, the
    interval's level, the margin, which means the rows use, and what a factor is where one is
    shown."""
    conf = f"{analysis.confidence * 100:g} %"
    return Text(("HL overhead: from the Hodges–Lehmann ratio, not the geo. means' "
                 "quotient; " if ranked else "")
                + f"overhead > 0: worse than {analysis.baseline} in the metric's direction;"
                f" [{conf} interval, or at the family level it names];"
                f" margin ±{analysis.margin * 100:g} % (equivalent: the interval inside it)"
                + "; geo. mean: of the valid runs, as the ratio divides"
                + ("; a Δ row: arithmetic means, as the difference subtracts"
                   if any(r.summary.difference is not None for r in rows) else "")
                + ("; a sweep: the geometric mean over its points"
                   if any(r.summary.family.sweep for r in rows) else "")
                + ("; " + FACTOR_NOTE if any(is_factor_text(c.plain) for c in cells) else ""),
                style="dim")


def render_headline(analysis: Analysis, console: Console | None = None, title: str | None = None,
                    shared=(), every: bool = False, all_hint: str | None = None) -> Table:
    """Print the headline of ``analysis`` and return its last row as a rich Table: the answer,
    within the console's width (80 columns included) and without a cut cell.

    With a baseline and other environments (:func:`vhpc.report.headline_rows`): per primary
    family (a benchmark's primary metric, or that metric over a swept parameter) one line
    "benchmark[params] · metric [unit] ↑/↓ · its points", then one row per non-baseline
    environment: the environment ("(TCG)" when emulated), overhead [interval] (the analysis'
    family summary at its confidence, never recomputed here), the verdict (a sweep's per-point
    counts and the check beneath it) and what limits trust.  Every row's column has one width
    across the families, so the rows line up; cells fold, never cut.  A trust note every row
    shares is printed once above instead.  A campaign with one environment has nothing to
    compare: :func:`_render_measured` (what was measured; with ``every``, every metric but the
    secondary ones).
    """
    console = console or Console()
    if not analysis.others():
        return _render_measured(analysis, console, title, every, all_hint)
    rows = headline_rows(analysis, shared)
    if not rows:
        console.print(Text("no comparison against " + analysis.baseline, style="yellow"))
        return Table()
    # said once: every row's note above the table (emulation too, when every row is: as the
    # HTML report says it); a row's own emulation by "(TCG)" and the footnote
    common = common_notes([r.trust for r in rows])
    said = {*common, TCG_TRUST}
    envs = [_short_env(analysis, r.summary.environment) for r in rows]
    cells = _overhead_cells(analysis, rows)
    ranked = any(r.summary.method == RANK for r in rows)
    centres = [Text(fmt_centre(family_centre(analysis, r.summary.family, r.summary.environment),
                               r.summary.family.unit)) for r in rows]
    all_pass = all(r.check == "pass" for r in rows)  # said once, above
    verdicts = [_verdict_cell(r.summary, "" if all_pass else r.check) for r in rows]
    trusts = [[t for t in r.trust if t not in said] for r in rows]
    heads = ("environment", "geo. mean", "HL overhead [interval]" if ranked
             else "overhead [interval]", "verdict")
    widths = _column_widths(heads, envs, centres, cells, verdicts, console.width)
    _print_preamble(console, analysis, title, ranked, common, all_pass)
    head = _headline_grid(widths)
    head.add_row(*(Text(h, style="bold") for h in heads))
    console.print(head)
    console.print(Text("─" * min(console.width, sum(widths) + 2 * (len(widths) - 1)), style="dim"))
    last, body = None, None
    for i, r in enumerate(rows):
        fam = r.summary.family
        if (fam.benchmark, fam.params, fam.quantity) != last:
            last = (fam.benchmark, fam.params, fam.quantity)
            _print_family_line(console, analysis, fam)
        body = _headline_grid(widths)
        body.add_row(Text("  ").append_text(envs[i]), centres[i], cells[i], verdicts[i])
        console.print(body)
        if trusts[i]:
            _print_trust_note(console, widths[0], trusts[i])
    console.print(_legend(analysis, rows, cells, ranked), overflow="fold")
    return body


def _lines(text: str, width: int) -> Text:
    """``text`` on as many lines as it needs to fit ``width``: broken after a sweep's "…",
    before an interval ("[…]") and before a level ("at 97.5 %"), never inside a number."""
    lines = [text]
    for sep, after in ((" … ", " …"), (" [", ""), (", ", ","), (" at ", ""), (" (n=", ""),
                       (" (", "")):
        if max(map(len, lines)) <= width:
            break
        out = []
        for line in lines:
            head, found, tail = line.partition(sep)
            out += ([head + after, (found.lstrip() if not after else "") + tail]
                    if found and len(line) > width else [line])
        lines = out
    if max(map(len, lines)) > width:  # still too long (a sentence): between its words
        lines = [w for line in lines
                 for w in (textwrap.wrap(line, width, break_long_words=False) or [line])]
    return Text("\n".join(lines))


def _render_measured(analysis: Analysis, console: Console, title: str | None,
                     every: bool = False, all_hint: str | None = None) -> Table:
    """The headline of a one-environment campaign: what was measured (no comparison), each
    benchmark's primary metric, or every metric but the secondary ones with ``every``.

    As the two-environment headline: the benchmark's label on a line of its own (never cut),
    under it one row per metric: metric ↑/↓, mean ± half-width (a sweep: its smallest and
    largest point, on two lines where the console is narrow), n, unit and the check (said once
    above when every benchmark passed).  Fits 80 columns without a cell cut inside a number."""
    rows = measured_rows(analysis, primary_only=not every)
    env = analysis.environment_order()[0] if analysis.environments else ""
    conf = f"{analysis.confidence * 100:g} %"
    all_pass = bool(rows) and all(r.check == "pass" for r in rows)
    heads = ["metric", "mean ± CI", "n", "unit"] + ([] if all_pass else ["check"])
    metric_w = max(len(heads[0]), *(len(r.metric) for r in rows)) if rows else 6
    n_w = max(1, *(len(r.n) for r in rows)) if rows else 1
    unit_w = max(len(heads[3]), *(len(r.unit) for r in rows)) if rows else 4
    check_w = 0 if all_pass else max(5, *(len(r.check) for r in rows))
    room = console.width - 2 - metric_w - n_w - unit_w - check_w - 2 * (len(heads) - 1)
    value_w = max(len(heads[1]), min(max((len(r.value) for r in rows), default=9), max(room, 20)))
    widths = [metric_w + 2, value_w, n_w, unit_w] + ([] if all_pass else [check_w])

    def grid() -> Table:
        t = Table.grid(padding=(0, 2))
        for i, w in enumerate(widths):
            t.add_column(width=w, justify="right" if i in (1, 2) else "left",
                         overflow="fold", no_wrap=i in (1, 2))
        return t

    console.print(Text(title or f"Measured in {env}", style="bold"), justify="center")
    if env and analysis.environments[env].emulated:
        console.print(Text(f"{env}: {TCG_TRUST}", style="red"), overflow="fold")
    if all_pass:
        console.print(Text("Check: every benchmark's verification or check passed in every run",
                           style="green"), overflow="fold")
    head = grid()
    head.add_row(*(Text(h, style="bold") for h in heads))
    console.print(head)
    console.print(Text("─" * min(console.width, sum(widths) + 2 * (len(widths) - 1)), style="dim"))
    body, last = grid(), None
    for r in rows:
        if r.bench != last:
            if last is not None:
                console.print(body)
                body = grid()
            console.print(Text(r.bench, style="bold"), overflow="fold")
            last = r.bench
        check = [] if all_pass else [Text(r.check, style="red" if r.check.startswith("fail")
                                          else "")]
        body.add_row(Text("  " + r.metric), _lines(r.value, value_w), Text(r.n), Text(r.unit),
                     *check)
    console.print(body)
    console.print(Text(f"mean ± {conf} interval half-width over n valid runs in {env}; one "
                       "environment: nothing to compare (add -e vm for an overhead)", style="dim"),
                  overflow="fold")
    more = 0 if every else len(measured_rows(analysis, primary_only=False)) - len(rows)
    if more:
        console.print(Text(f"{more} more metric(s): {all_hint or 'vhpc report ID --all'}",
                           style="dim"), overflow="fold")
    return body
