"""How an overhead and a ratio are written (vhpc.core.numfmt), and that every page uses it:
a two-run emulated comparison prints a factor, never "+25,229 % [-100.0, +368,718,696,975,…]"."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from vhpc.analysis import analyse
from vhpc.core import numfmt
from vhpc.core.metrics import EnvInfo, Observation


def test_a_percentage_below_ten_times_keeps_one_decimal():
    assert numfmt.pct(12.34) == "+12.3 %" and numfmt.pct(-4.25, unit=False) == "-4.2"
    assert numfmt.pct(899.9) == "+899.9 %" and numfmt.pct(-89.9) == "-89.9 %"
    assert numfmt.pct_ci(12.3, 8.1, 16.04) == "+12.3 % [+8.1, +16.0]"
    assert numfmt.pct_ci(12.3, None, 16.0) == "+12.3 %"


def test_from_ten_times_on_an_overhead_is_a_factor():
    # +900 % is 10 times the baseline's time; −90 % a tenth of it
    assert numfmt.pct(900.0) == "×10" and numfmt.pct(-90.0) == "÷10"
    # a TCG guest 3,594.9 times slower (+359,391 %), and one 25,230 times (+2,522,900 %)
    assert numfmt.pct(359391.06) == "×3,595"
    assert numfmt.pct(2522900.0) == "×25,230" and numfmt.pct(1e7) == "×1.0e5"
    # −99.999 % is 1/100,000 of the time: not "-100.0"
    assert numfmt.pct(-99.999) == "÷1.0e5"
    assert numfmt.factor(1.0004) == "×1.0004" and numfmt.factor(0.5) == "÷2"


def test_a_value_and_its_interval_share_one_form():
    # the reported case: −24.2 % [−100.0, +10,120,729] (ratio 0.758 of the time,
    # 1/1.8e5 .. 1.0e5 times)
    text = numfmt.pct_ci(-24.2, -100 + 100 / 1.8e5, 10_120_729.0)
    assert text == "÷1.32 [÷1.8e5, ×1.0e5]"
    assert "%" not in text and len(text) <= 24
    # in percent, a nonzero bound is never printed as the neutral +0.0 (a "slower" verdict
    # must be readable off the bounds)
    assert numfmt.pct_ci(3.2, 0.0004, 6.1) == "+3.2 % [+0.0004, +6.1]"


def test_a_ratio_never_reads_0_000_nor_runs_to_eleven_digits():
    assert numfmt.ratio_ci(1.319, 9.9e-06, 176200.139) == "1.319 [9.9e-6, 1.8e5]"
    assert numfmt.ratio(0.0022) == "2.2e-3" and numfmt.ratio(0.02) == "0.020"
    assert numfmt.ratio(1.0002) == "1.0002" and numfmt.ratio(1.0) == "1.000"


ENVS = {"native": EnvInfo("native", "native", None, {}), "vm": EnvInfo("vm", "vm", "tcg", {})}


@pytest.fixture
def wild():
    """HPCCG at n = 2 under emulation: 100 and 104 Mflop/s natively, 0.2 and 2.0 in the
    guest; Welch on ln values with one degree of freedom spans eleven orders of magnitude."""
    obs = [Observation(env, "hpccg", "ranks=2", "mflops", "Mflop/s", True, v, valid=True,
                       warmup=False, trial_id=i)
           for i, (env, v) in enumerate([("native", 100.0), ("native", 104.0),
                                         ("vm", 0.2), ("vm", 2.0)])]
    return obs, analyse(obs, ENVS, "native")


def test_the_terminal_headline_and_findings_write_a_wild_interval_as_factors(wild):
    from vhpc.report.terminal import render_table

    _, a = wild
    c = a.comparisons[0]
    assert c.verdict == "inconclusive" and c.overhead_ci[0] < -99.99 and c.overhead_ci[1] > 1e9
    console = Console(record=True, width=80, color_system=None)
    render_table(a, console=console)
    text = console.export_text()
    assert "-100.0" not in text and not re.search(r"\d{1,3}(,\d{3}){2,}", text), text
    row = next(line for line in text.splitlines() if line.startswith("  vm (TCG)"))
    # two runs a side: the overhead as a factor, its interval not printed as numbers
    assert re.search(r"×1\d\d\s+inconclusive", row) and not re.search(r"\de\d", text), row
    assert "too few runs for an" in text
    assert numfmt.FACTOR_NOTE.split("(")[0].strip() in " ".join(text.split())
    # the inconclusive finding writes the same overhead the same way
    finding = next(f for f in a.findings if f.kind == "inconclusive")
    assert re.search(r"overhead ×1\d\d, too few runs for an interval", finding.message), \
        finding.message
    assert max(map(len, text.splitlines())) <= 80


def test_the_html_headline_writes_a_wild_interval_as_factors(wild, tmp_path):
    from vhpc.report.html import write_html

    obs, a = wild
    html = write_html(a, obs, tmp_path / "r.html", {"id": "c-1"}).read_text()
    head = re.search(r'<section id="headline">(.*?)</section>', html, re.S).group(1)
    text = re.sub(r"<span[^>]*>|</span>", "", head)  # a number and its interval in spans
    # two runs a side: the factor, and no interval bound printed as numbers
    assert re.search(r">×1\d\d<", text) and "too few runs for an interval" in text
    assert "-100.0" not in head and not re.search(r"\d\.?\d*e\d", text), text
    assert "N times worse / better than the baseline" in head
    cells = re.findall(r'<td class="num">([^<]*)', text)
    assert any(re.fullmatch(r"[\d.]+e-\d+", c.strip()) for c in cells), cells  # the ratio
    assert not re.search(r"\d{7}", head)


def test_an_overhead_from_its_ratios_is_exact_past_what_a_percentage_holds():
    """A ratio interval reaching 1e-70 is −100.0 % in floating point; from the ratio the bound
    is a factor (÷1.0e70), never "—" nor "-100.0"."""
    assert numfmt.overhead(253.0, 1e-70, 3.7e66, False) == "×253 [÷1.0e70, ×3.7e66]"
    # a rate: the cost factor is the reciprocal, its bounds swapped
    assert numfmt.overhead(0.5, 0.25, 1.0, True) == "+100.0 % [+0.0, +300.0]"
    assert numfmt.overhead(1 / 253, 1e-6, 2.0, True) == "×253 [÷2, ×1.0e6]"
    # values ≤ 0 (Fieller's ratio of arithmetic means) stay a percentage
    assert numfmt.overhead(1.2, -0.5, 3.0, False) == "+20.0 % [-150.0, +200.0]"
    assert numfmt.ratio(96.598) == "96.6" and numfmt.ratio(157.672) == "157.7"


def test_every_metric_at_80_columns_folds_no_number(wild):
    """``vhpc report ID --all`` at 80 columns folded "[9.9e-06, 176200.139]" over five lines:
    the per-metric table goes one metric a line, its environments beneath, each number whole;
    at two runs a side the interval is "too few runs for an interval", never its bounds."""
    from vhpc.report.terminal import render_table

    _, a = wild
    console = Console(record=True, width=80, color_system=None)
    render_table(a, console=console, detail=True)
    lines = console.export_text().splitlines()
    assert max(map(len, lines)) <= 80, "\n".join(lines)
    i = next(i for i, line in enumerate(lines)
             if line.startswith("hpccg[ranks=2] · mflops [Mflop/s] ↑ · native: "))
    row = lines[i + 1]
    c = a.comparisons[0]
    assert row.startswith("  vm (TCG)") and "(n=2)" in row
    interval = f"[{numfmt.ratio(c.ratio_ci[0])}, {numfmt.ratio(c.ratio_ci[1])}]"
    assert interval not in "\n".join(lines) and numfmt.ratio(c.ratio) in row
    assert "too few runs for an" in "\n".join(lines[i + 1:i + 4])
    assert "inconclusive" in row
