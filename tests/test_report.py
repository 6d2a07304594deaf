"""Report room: terminal table, self-contained HTML, figures, CSV/JSON export, browser check."""

from __future__ import annotations

import csv
import json
import re
import subprocess

import numpy as np
import pytest
from rich.console import Console

from vhpc.analysis import analyse
from vhpc.core.metrics import EnvInfo, Observation
from vhpc.report import figures
from vhpc.report.export import COMPARISON_COLUMNS, SAMPLE_COLUMNS, write_csv, write_json
from vhpc.report.html import inline_svg, write_html
from vhpc.report.terminal import render_table

from conftest import require_tool

ENVS = {
    "native": EnvInfo("native", "native", None, {"cpu_model": "Test CPU 9000", "kernel": "6.1.0-test"}),
    "vm-kvm": EnvInfo(
        "vm-kvm", "vm", "kvm",
        {"cpu_model": "Test CPU 9000", "qemu": "QEMU 8.2.1", "placement": {"vcpus": [0, 1], "memory_node": 0}},
    ),
    "vm-tcg": EnvInfo("vm-tcg", "vm", "tcg", {"qemu": "QEMU 8.2.1"}),
}


def make_observations(with_tcg: bool = True, sessions: bool = True) -> list[Observation]:
    rng = np.random.default_rng(3)
    out: list[Observation] = []
    tid = 0
    factors = {"native": (1.0, 1.0), "vm-kvm": (1.10, 1.0), "vm-tcg": (3.0, 0.5)}
    for env, (slow, bwf) in factors.items():
        if env == "vm-tcg" and not with_tcg:
            continue
        for i in range(8):
            si = None if env == "native" or not sessions else i % 4
            for metric, unit, hib, base in (("time", "s", False, 2.0), ("triad_bw", "GB/s", True, 20.0)):
                value = base * (slow if not hib else bwf / slow * 1.0) * (1 + rng.normal(0, 0.01))
                if env == "vm-kvm" and metric == "triad_bw":
                    value = 20.0 * (1 + rng.normal(0, 0.01))  # same bandwidth as native
                out.append(Observation(env, "stream", "threads=2", metric, unit, hib, float(value),
                                       valid=not (env == "vm-kvm" and i == 3), warmup=i == 0,
                                       trial_id=tid, session_index=si))
                tid += 1
    return out


@pytest.fixture
def data():
    obs = make_observations()
    return obs, analyse(obs, ENVS, "native")


CAMPAIGN = {"id": "c-0042", "date": "2024-05-01T10:00:00Z", "command": ["vhpc", "run", "--repeats", "7"]}


# ---------------------------------------------------------------- terminal


def test_terminal_table(data):
    obs, a = data
    console = Console(record=True, width=240, color_system=None)
    render_table(a, console=console)
    text = console.export_text()
    assert "vm-tcg (TCG emulation)" in text  # header marker
    assert "results come from TCG emulation, not hardware" in text  # footnote
    assert "stream[threads=2]" in text and "time [s]" in text and "triad_bw [GB/s]" in text
    assert "native (baseline)" in text
    assert "Findings" in text and "invalid samples" in text
    # one row per (benchmark, params, metric, environment): never two environments in one cell
    rows = [line for line in text.splitlines() if line.startswith("│ ") and ("vm-kvm" in line or "vm-tcg" in line)]
    assert len(rows) == 4
    assert [("vm-kvm" in r, "vm-tcg" in r) for r in rows] == [(True, False), (False, True)] * 2
    assert "time [s]" in rows[0] and "triad_bw [GB/s]" in rows[2]
    assert rows[0].rstrip(" │").endswith("slower") and rows[1].rstrip(" │").endswith("slower")
    assert rows[2].rstrip(" │").endswith("equivalent")  # bandwidth equal to native, within 5 %
    # benchmark and metric are printed once per metric
    assert sum(line.startswith("│ stream[threads=2]") for line in text.splitlines()) == 2


def test_terminal_verdict_colours(data):
    _, a = data
    console = Console(record=True, width=240, force_terminal=True, color_system="truecolor")
    render_table(a, console=console)
    html = console.export_html(inline_styles=True)
    # "slower" is drawn in red
    assert re.search(r'<span style="[^"]*color: #800000[^"]*">slower', html) or re.search(
        r'<span style="[^"]*color: #[89a-f][0-9a-f]0000[^"]*">[^<]*slower', html
    )


def test_terminal_without_tcg_has_no_marker():
    obs = make_observations(with_tcg=False)
    a = analyse(obs, ENVS, "native")
    console = Console(record=True, width=200)
    render_table(a, console=console, title="my title")
    text = console.export_text()
    assert "TCG" not in text and "my title" in text


# ---------------------------------------------------------------- HTML


def test_html_self_contained(data, tmp_path):
    obs, a = data
    path = write_html(a, obs, tmp_path / "r.html", CAMPAIGN)
    html = path.read_text()
    assert not re.search(r'(src|href)\s*=\s*["\']?\s*(https?:)?//', html, re.I)
    assert "http://" not in html and "https://" not in html  # not even xmlns URLs
    assert "<link" not in html and "@import" not in html
    assert "c-0042" in html and "vhpc run --repeats 7" in html and "2024-05-01" in html
    assert 'id="tcg-banner"' in html and "vm-tcg" in html
    # figures: relative bars + cold/warm + one distribution per metric (2)
    assert html.count('<svg class="figure"') == 4
    assert 'id="relative"' in html and 'id="cold-warm"' in html and 'id="distributions"' in html
    # summary table with verdicts
    assert "v-slower" in html and "v-equivalent" in html
    # fingerprints side by side: rows are keys, nested values as JSON
    assert "Test CPU 9000" in html and "6.1.0-test" in html and "QEMU 8.2.1" in html
    assert "{&#34;memory_node&#34;: 0, &#34;vcpus&#34;: [0, 1]}" in html
    assert "data-figures-ok" not in html  # set by the script at load time, not statically
    assert "dataset.figuresOk" in html
    # SVG ids are unique across figures
    ids = re.findall(r'\sid="([^"]+)"', html)
    assert len(ids) == len(set(ids))


def test_html_png_figures_and_no_banner(tmp_path):
    obs = make_observations(with_tcg=False, sessions=False)
    a = analyse(obs, ENVS, "native")
    html = write_html(a, obs, tmp_path / "r.html", {"id": "x"}, fmt="png").read_text()
    assert 'id="tcg-banner"' not in html
    assert 'id="cold-warm"' not in html
    imgs = re.findall(r'<img class="figure"[^>]*src="data:image/png;base64,', html)
    assert len(imgs) == 3  # relative + 2 distributions
    assert "http" not in html


def test_inline_svg_rewrites_document():
    svg = figures.relative_bars(analyse(make_observations(), ENVS, "native"))
    assert svg.lstrip().startswith("<?xml")
    s = inline_svg(svg, "p7-")
    assert s.startswith('<svg class="figure"')
    assert "http" not in s and "xlink:" not in s and "<metadata" not in s
    assert re.search(r'id="p7-', s) and "url(#p7-" in s


# ---------------------------------------------------------------- figures


def test_figures(data):
    obs, a = data
    assert "<svg" in figures.relative_bars(a)
    png = figures.relative_bars(a, fmt="png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    d = figures.distributions(a, obs)
    assert [t for t, _ in d] == ["stream[threads=2]: time", "stream[threads=2]: triad_bw"]
    assert figures.cold_warm_bars(a) is not None
    # the axis label names the baseline (text is drawn as paths, so check via PNG-less route:
    # the label is in the figure object; render must not fail for an empty analysis)
    empty = analyse([], ENVS, "native")
    assert figures.relative_bars(empty) is None and figures.cold_warm_bars(empty) is None
    assert figures.distributions(empty, []) == []
    with pytest.raises(ValueError):
        figures.relative_bars(a, fmt="gif")


def test_invalid_samples_drawn_hollow_red(data):
    obs, a = data
    # distributions of "time": vm-kvm has one invalid sample (trial 3)
    svg = dict(figures.distributions(a, obs))["stream[threads=2]: time"]
    assert re.search(r"fill:\s*none[^\"]*stroke:\s*#ff0000", svg)


# ---------------------------------------------------------------- export


def test_csv_round_trip(data, tmp_path):
    obs, a = data
    sp, cp = write_csv(a, obs, tmp_path / "samples.csv", tmp_path / "comparisons.csv")
    with sp.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(obs)
    assert list(rows[0]) == SAMPLE_COLUMNS
    for r, o in zip(rows, obs):
        assert r["environment"] == o.environment and float(r["value"]) == o.value
        assert r["valid"] == ("true" if o.valid else "false")
        assert r["warmup"] == ("true" if o.warmup else "false")
        assert r["accel"] == (ENVS[o.environment].accel or "")
        assert r["emulated"] == ("true" if o.environment == "vm-tcg" else "false")
        assert r["session_index"] == ("" if o.session_index is None else str(o.session_index))
    with cp.open() as fh:
        crow = list(csv.DictReader(fh))
    assert len(crow) == len(a.comparisons) == 4
    assert list(crow[0]) == COMPARISON_COLUMNS
    for r, c in zip(crow, a.comparisons):
        assert float(r["ratio"]) == c.ratio and r["verdict"] == c.verdict
        assert float(r["ratio_ci_low"]) == c.ratio_ci[0]
        assert float(r["p_adjusted"]) == c.p_adjusted
        assert r["emulated"] == ("true" if c.environment == "vm-tcg" else "false")
    # the printed centres are the ratio's: geometric means of the valid, non-warm-up samples
    from scipy.stats import gmean

    def values(env, metric):
        return [o.value for o in obs if o.environment == env and o.metric == metric
                and o.valid and not o.warmup]

    for r in crow:
        g, gb = gmean(values(r["environment"], r["metric"])), gmean(values("native", r["metric"]))
        assert float(r["gmean"]) == pytest.approx(g, rel=1e-12)
        assert float(r["gmean_baseline"]) == pytest.approx(gb, rel=1e-12)
        assert float(r["ratio"]) == pytest.approx(g / gb, rel=1e-12)
        assert float(r["mean"]) != pytest.approx(g, rel=1e-9)  # the arithmetic one stays


def test_json_round_trip(data, tmp_path):
    obs, a = data
    path = write_json(a, obs, tmp_path / "a.json")
    doc = json.loads(path.read_text())
    assert len(doc["samples"]) == len(obs)
    assert sum(1 for s in doc["samples"] if s["emulated"]) == sum(1 for o in obs if o.environment == "vm-tcg")
    assert len(doc["comparisons"]) == len(a.comparisons)
    assert len(doc["summaries"]) == len(a.summaries)
    for d, c in zip(doc["comparisons"], a.comparisons):
        assert d["ratio"] == c.ratio and d["verdict"] == c.verdict and d["accel"] == ENVS[c.environment].accel
    assert doc["environments"]["vm-tcg"]["emulated"] is True
    assert any(f["kind"] == "tcg" for f in doc["findings"])


# ---------------------------------------------------------------- browser


@pytest.mark.browser
@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_report_renders_in_headless_chromium(data, tmp_path, fmt):
    exe = require_tool("chromium", "chromium-browser", "google-chrome")
    obs, a = data
    path = write_html(a, obs, tmp_path / "r.html", CAMPAIGN, fmt=fmt)
    profile = tmp_path / "profile"
    proc = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=5000", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = re.search(r'<body[^>]*data-figures-ok="(\d+)"[^>]*data-figures-total="(\d+)"', proc.stdout)
    assert m, "the page script did not run: " + proc.stdout[:500]
    ok, total = int(m.group(1)), int(m.group(2))
    assert total == 4 and ok == total
    page_errors = [line for line in proc.stderr.splitlines()
                   if "Uncaught" in line or (":CONSOLE" in line and path.name in line)]
    assert not page_errors, page_errors


def test_export_all_writes_every_format_through_one_protocol(data, tmp_path):
    from vhpc.report.export import EXPORTERS, ReportData, export_all

    obs, a = data
    out = export_all(ReportData(a, obs, CAMPAIGN), tmp_path / "c", {"json": tmp_path / "x.json"})
    assert set(out) == set(EXPORTERS) == {"html", "samples-csv", "comparisons-csv", "families-csv", "json"}
    assert out["json"] == tmp_path / "x.json" and out["html"] == tmp_path / "c" / "report.html"
    assert "c-0042" in out["html"].read_text()
    with out["comparisons-csv"].open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["ratio_ci_method"] for r in rows] == [c.ratio_ci_method for c in a.comparisons]
    assert json.loads(out["json"].read_text())["comparisons"][0]["ratio_ci_method"] == "log-welch"


def test_the_per_metric_table_shows_the_centres_its_ratio_divides(data):
    """Issue 41: the printed ratio is the ratio of the printed centres (geometric means, from
    scipy), in the terminal's and the HTML's rows; one environment keeps mean ± half-width."""
    from scipy.stats import gmean

    from vhpc.report import comparison_rows

    obs, a = data
    rows = comparison_rows(a)
    assert rows
    base = None
    for r in rows:
        if r.first:
            base = r.base
        num = lambda text: float(text.split()[0])  # noqa: E731
        vals = [o.value for o in obs if o.environment == r.environment and o.valid
                and not o.warmup and r.metric.startswith(o.metric + " ")]
        assert num(r.mean) == pytest.approx(gmean(vals), rel=5e-4)
        assert "[" in r.mean and "±" not in r.mean
        assert num(r.ratio) == pytest.approx(num(r.mean) / num(base), abs=1.5e-3)
    one = analyse([o for o in obs if o.environment == "native"], ENVS, "native")
    (r0, *_) = comparison_rows(one)
    assert "±" in r0.base


def test_a_baseline_with_values_at_or_below_zero_shows_arithmetic_centres():
    """Off the log scale (the baseline has a value ≤ 0) the metric is compared by the
    difference of means (Welch): the cells say "mean" and are the arithmetic means, the ratio
    column the difference in the metric's unit."""
    from vhpc.report import comparison_rows

    def o(env, vals):
        return [Observation(env, "b", "", "delta", "J", False, v, valid=True, warmup=False,
                            trial_id=i, session_index=None) for i, v in enumerate(vals)]

    a = analyse(o("native", [-1.0, 2.0, 3.0, 4.0]) + o("vm-kvm", [4.0, 4.4, 3.6, 4.2]),
                ENVS, "native")
    (r,) = comparison_rows(a)
    assert r.base.startswith("mean 2 ±") and r.mean.startswith("mean 4.05 ±")
    assert r.method == "welch-difference" and r.ratio.startswith(f"Δ +{4.05 - 2.0:.4g} [")
    assert r.ratio.endswith("J (difference)")


def test_comparisons_csv_and_json_carry_a_signed_metrics_difference(tmp_path):
    """A metric with values ≤ 0 is compared by the difference of means: comparisons.csv and
    results.json carry that difference and its interval in the metric's unit (scipy's Welch
    interval), the method that made it and which level its interval is at."""
    from scipy import stats as sps

    y, x = [-1.0, -1.2, -0.8], [-2.0, -1.5, -2.5]

    def mk(env, vals, metric):
        return [Observation(env, "bal", "", metric, "J", False, v, True, False, i)
                for i, v in enumerate(vals)]

    obs = mk("native", y, "e") + mk("vm", x, "e") + mk("native", [1.0, 1.1, 0.9], "t") \
        + mk("vm", [1.5, 1.6, 1.4], "t")
    envs = {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "kvm")}
    a = analyse(obs, envs, "native")
    _, cp = write_csv(a, obs, tmp_path / "s.csv", tmp_path / "c.csv")
    with cp.open() as fh:
        rows = {r["metric"]: r for r in csv.DictReader(fh)}
    ci = sps.ttest_ind(x, y, equal_var=False).confidence_interval(float(rows["e"]["level"]))
    e, t = rows["e"], rows["t"]
    assert e["ratio_ci_method"] == "welch-difference" and e["ratio"] == ""
    assert float(e["difference"]) == pytest.approx(-1.0)
    assert (float(e["difference_low"]), float(e["difference_high"])) == pytest.approx(
        (ci.low, ci.high))
    assert e["level_kind"] in ("1-alpha", "holm", "bonferroni")
    # a ratio row leaves the difference empty
    assert t["ratio_ci_method"] == "log-welch" and t["difference"] == t["difference_low"] == ""
    doc = json.loads(write_json(a, obs, tmp_path / "r.json").read_text())
    je = next(c for c in doc["comparisons"] if c["metric"] == "e")
    assert je["difference"] == pytest.approx(-1.0)
    assert je["difference_ci"] == pytest.approx([ci.low, ci.high])
    assert je["level_kind"] == e["level_kind"]
