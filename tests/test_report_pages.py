"""The campaign report answers first: metric families, the headline on the first
screen, sweeps as curves, numeric order everywhere, and a page that fits (rendered in Chromium).

A sweep campaign is built from observations shaped like the OSU benchmarks' (``lat_<size>``
over 24 sizes, ``avg/min/max_<size>`` over 19), so the page checks are fast and deterministic;
one test runs the real command line (`vhpc compare`) on a small native-only sweep.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from vhpc.analysis import EQUIVALENT, INCONCLUSIVE, SLOWER, analyse
from vhpc.analysis.families import families, fmt_size, headline, natural_key, split_metric
from vhpc.core.metrics import EnvInfo, Observation
from vhpc.report.export import EXPORTERS, ReportData, export_all
from vhpc.report.html import write_html
from vhpc.report.terminal import render_table

from conftest import require_file, require_tool

ENVS = {"native": EnvInfo("native", "native"), "other": EnvInfo("other", "native")}
LAT_SIZES = [0] + [1 << i for i in range(23)]          # 0 B .. 4 MiB: 24 sizes
COLL_SIZES = [1 << i for i in range(2, 21)]            # 4 B .. 1 MiB: 19 sizes
#: "other" is 20 % slower in latency at every size, equal in the collective
SLOWDOWN = {"osu-latency": 1.2, "osu-coll": 1.0}


def sweep_observations(repeats: int = 3, seed: int = 7) -> list[Observation]:
    """native and other × osu-latency (lat) and osu-coll[op=allreduce] (avg/min/max), values
    that grow with the size (0.2 µs .. ~5 ms, more than two decades), 1 % noise."""
    rng = np.random.default_rng(seed)
    out, tid = [], 0
    for r in range(repeats):
        for env in ("native", "other"):
            for bench, params, sizes, qs in (("osu-latency", "", LAT_SIZES, ("lat",)),
                                             ("osu-coll", "op=allreduce", COLL_SIZES, ("avg", "min", "max"))):
                f = SLOWDOWN[bench] if env == "other" else 1.0
                for size in sizes:
                    for q, k in zip(qs, (1.0, 0.8, 1.3)):
                        v = (0.2 + size / 1000.0) * k * f * (1 + rng.normal(0, 0.01))
                        out.append(Observation(env, bench, params, f"{q}_{size}", "us", False,
                                               float(v), True, False, tid, r))
                tid += 1
    return out


@pytest.fixture(scope="module")
def sweep():
    obs = sweep_observations()
    return obs, analyse(obs, ENVS, "native")


# ---------------------------------------------------------------- families (analysis room)


def test_natural_key_orders_numbers_inside_names():
    names = ["lat_1024", "lat_1048576", "lat_128", "lat_16", "lat_2", "lat_0"]
    assert sorted(names, key=natural_key) == ["lat_0", "lat_2", "lat_16", "lat_128", "lat_1024",
                                              "lat_1048576"]
    assert sorted(["ranks=16", "ranks=2", "ranks=4"], key=natural_key) == ["ranks=2", "ranks=4",
                                                                            "ranks=16"]
    # text and numbers at the same place never raise
    assert sorted(["a1", "ab", "1a"], key=natural_key)
    assert split_metric("bw_avg_1048576") == ("bw_avg", 1048576)
    assert split_metric("mflops") == ("mflops", None)
    assert [fmt_size(x) for x in (0, 8, 1024, 1536, 1 << 20)] == ["0 B", "8 B", "1 KiB", "1.5 KiB",
                                                                 "1 MiB"]


def test_families_group_sizes_and_mark_primary_and_secondary(sweep):
    _, a = sweep
    fams = families(a)
    got = [(f.benchmark, f.quantity, f.primary, f.secondary, len(f.points)) for f in fams]
    # osu-coll declares avg, min, max: avg is the primary, min and max beside it secondary
    assert got == [("osu-coll", "avg", True, False, 19), ("osu-coll", "min", False, True, 19),
                   ("osu-coll", "max", False, True, 19), ("osu-latency", "lat", True, False, 24)]
    assert fams[3].xs == LAT_SIZES and fams[0].xs == COLL_SIZES  # numeric, not text order


def test_hpccg_counts_are_secondary_and_mflops_primary():
    obs = [Observation(env, "hpccg", "", m, unit, hib, v * (1.1 if env == "other" and hib is False else 1.0) + i * 0.01,
                       True, False, i)
           for env in ("native", "other") for i in range(3)
           for m, unit, hib, v in (("mflops", "Mflop/s", True, 900.0), ("time_s", "s", False, 2.0),
                                   ("iterations", "count", False, 150.0), ("residual", "1", False, 1e-9))]
    fams = families(analyse(obs, ENVS, "native"))
    by = {f.quantity: f for f in fams}
    assert by["mflops"].primary and not by["time_s"].secondary
    assert by["iterations"].secondary and by["residual"].secondary
    assert [f.quantity for f in fams][0] == "mflops"


def test_headline_is_the_geometric_mean_of_the_per_size_ratios(sweep):
    obs, a = sweep
    rows = {fs.family.benchmark: fs for fs in headline(a)}
    assert set(rows) == {"osu-latency", "osu-coll"}
    lat = rows["osu-latency"]
    # expected from the observations themselves: mean per size and environment, their ratio
    means = {}
    for o in obs:
        if o.benchmark == "osu-latency":
            means.setdefault((o.environment, o.metric), []).append(o.value)
    # per size the ratio of geometric means (Welch on ln values, docs/statistics.md)
    gm = lambda v: math.exp(np.mean(np.log(v)))  # noqa: E731
    ratios = [gm(means[("other", f"lat_{s}")]) / gm(means[("native", f"lat_{s}")])
              for s in LAT_SIZES]
    assert lat.ratio == pytest.approx(math.exp(np.mean(np.log(ratios))), rel=1e-9)
    assert lat.ratio_min == pytest.approx(min(ratios)) and lat.ratio_max == pytest.approx(max(ratios))
    assert lat.x_min == LAT_SIZES[int(np.argmin(ratios))]
    assert lat.low < 1.2 < lat.high and lat.low > 1.0   # the 20 % slowdown, interval above 1
    assert lat.verdict == SLOWER and lat.overhead_pct == pytest.approx((lat.ratio - 1) * 100)
    assert lat.n_points == 24 and sum(lat.counts.values()) == 24
    coll = rows["osu-coll"]
    assert coll.low < 1.0 < coll.high  # read off: within ±5 % or neither
    assert coll.verdict == (EQUIVALENT if 1 / 1.05 <= coll.low and coll.high <= 1.05
                            else INCONCLUSIVE)
    assert lat.trust == () and coll.trust == ()  # n = 3, 1 % noise, no emulation


def test_headline_interval_is_conservative_against_correlated_sizes():
    """Every size of one trial moves together (one slow trial is slow at all sizes): the
    interval of the geometric mean must still cover the true ratio in most campaigns."""
    covered = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        obs = []
        for env, f in (("native", 1.0), ("other", 1.1)):
            for t in range(4):
                trial = rng.normal(0, 0.05)  # shared by all sizes of this trial
                obs += [Observation(env, "osu-latency", "", f"lat_{s}", "us", False,
                                    (1 + s / 100) * f * math.exp(trial + rng.normal(0, 0.005)),
                                    True, False, t) for s in (1, 8, 64, 512)]
        fs = headline(analyse(obs, ENVS, "native"))[0]
        covered += fs.low <= 1.1 <= fs.high
    assert covered >= 36  # ≥ 90 % of 40 at a 95 % level


def test_trust_notes_name_tcg_few_runs_and_shared_cpus():
    from vhpc.analysis.results import Finding

    envs = {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "tcg")}
    obs = [Observation(env, "osu-latency", "", f"lat_{s}", "us", False, (1 + s) * (3 if env == "vm" else 1) + i,
                       True, False, i) for env in envs for s in (1, 8, 64) for i in range(2)]
    a = analyse(obs, envs, "native")
    a.findings.append(Finding("warn", "vm", "vCPUs of two guests share host CPU 0", "pin", kind="shared-cpus"))
    (fs,) = headline(a)
    text = " | ".join(fs.trust)
    assert "TCG" in text and "n = 2 < 3" in text and "contention, not scaling" in text


# ---------------------------------------------------------------- terminal, CSV, JSON


def _terminal(a, width: int = 160, **kw) -> str:
    console = Console(record=True, width=width, color_system=None, file=io.StringIO())
    render_table(a, console=console, html_path="/x/report.html", **kw)
    return console.export_text()


def _headline_row(lines: list[str], bench: str) -> tuple[str, str]:
    """(the headline's "bench · metric · points" line, the first environment's row under it)."""
    i = next(i for i, line in enumerate(lines) if line.startswith(bench + " · "))
    return lines[i], lines[i + 1]


def test_terminal_summary_of_a_sweep_is_short_and_numeric(sweep):
    _, a = sweep
    text = _terminal(a, width=80)
    lines = text.splitlines()
    assert len(lines) <= 30 and max(map(len, lines)) <= 80 and "…" not in text, text
    assert "osu-coll[op=allreduce]" in text  # label not cut
    assert "19 sizes, 4 B – 1 MiB" in text and "24 sizes, 0 B – 4 MiB" in text
    assert "/x/report.html" in text and "every metric: vhpc report ID --all" in text
    head, row = _headline_row(lines, "osu-latency")
    assert "24 sizes" in head and "other" in row
    assert "slower" in row and re.search(r"\+\d+\.\d % \[\+\d+\.\d, \+\d+\.\d\]", row), row
    # no per-size rows in the summary
    assert "lat_1024" not in text and "avg_128 " not in text


def test_terminal_headline_of_two_benchmarks_two_environments_fits_80_columns():
    """Issue 42's "done when": STREAM and RandomAccess, native against a TCG guest, at
    COLUMNS=80: no line over 80, no cut cell, at most 30 lines, an overhead % per benchmark,
    and the output ends with the headline (the findings come before it)."""
    rng = np.random.default_rng(1)
    envs = {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "tcg")}
    obs = []
    for r in range(3):
        for env, f in (("native", 1.0), ("vm", 1.3)):
            for m, v in (("copy_bw", 30.0), ("scale_bw", 29.0), ("add_bw", 33.0), ("triad_bw", 33.0)):
                obs.append(Observation(env, "stream", "", m, "GB/s", True,
                                       v / f * (1 + rng.normal(0, 0.02)), True, False, 2 * r, r))
            obs.append(Observation(env, "randomaccess", "", "gups", "GUP/s", True,
                                   0.05 / f * (1 + rng.normal(0, 0.02)), True, False, 2 * r + 1, r))
    a = analyse(obs, envs, "native")
    text = _terminal(a, width=80, all_hint="vhpc report C --all")
    lines = text.splitlines()
    assert len(lines) <= 30 and max(map(len, lines)) <= 80 and "…" not in text, text
    for bench, metric in (("stream", "copy_bw [GB/s] ↑"), ("randomaccess", "gups [GUP/s] ↑")):
        head, row = _headline_row(lines, bench)
        assert metric in head and "vm (TCG)" in row and re.search(r"\+\d+\.\d %", row), row
        assert "slower" in row
    assert "every metric: vhpc report C --all" in text
    assert text.rstrip().splitlines()[-1].startswith("every metric")
    assert text.index("Findings") < text.index("Overhead relative to native")
    assert "scale_bw" not in text  # the per-metric table is behind --all
    assert "scale_bw [GB/s]" in _terminal(a, width=200, detail=True)


def test_terminal_detail_table_lists_sizes_in_numeric_order(sweep):
    _, a = sweep
    text = _terminal(a, width=240, detail=True)
    sizes = [m for m in re.findall(r"│ lat at (\d+ [KM]?i?B) \[us\]", text)]
    assert sizes == [fmt_size(x) for x in LAT_SIZES]


def test_csv_and_json_list_sizes_in_numeric_order(sweep, tmp_path):
    obs, a = sweep
    out = export_all(ReportData(a, obs, {"id": "c1"}), tmp_path)
    assert set(out) == set(EXPORTERS)
    with out["comparisons-csv"].open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["benchmark"] == "osu-latency"]
    assert [int(r["metric"].split("_")[1]) for r in rows] == LAT_SIZES
    with out["families-csv"].open() as fh:
        fams = list(csv.DictReader(fh))
    assert [(r["benchmark"], r["quantity"], r["primary"]) for r in fams] == [
        ("osu-coll", "avg", "true"), ("osu-coll", "min", "false"), ("osu-coll", "max", "false"),
        ("osu-latency", "lat", "true")]
    lat = fams[3]
    assert lat["x_min"] == "0" and lat["x_max"] == str(1 << 22) and lat["verdict"] == SLOWER
    doc = json.loads(out["json"].read_text())
    lat_sums = [s["metric"] for s in doc["summaries"] if s["benchmark"] == "osu-latency"
                and s["environment"] == "native"]
    assert [int(m.split("_")[1]) for m in lat_sums] == LAT_SIZES
    assert doc["families"][3]["x"] == LAT_SIZES and doc["families"][3]["parameter"] == "message size"


# ---------------------------------------------------------------- the page in Chromium


def page_facts(exe: str, path: Path, tmp_path: Path, height: int = 900) -> dict[str, int]:
    """Load ``path`` in headless Chromium at 1400 px wide and return what the page's script
    measured: pageHeight, pageWidth, headlineBottom, clipped, figuresOk, figuresTotal."""
    proc = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         f"--user-data-dir={tmp_path / 'profile'}", f"--window-size=1400,{height}",
         "--virtual-time-budget=5000", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    body = re.search(r"<body[^>]*>", proc.stdout).group(0)
    facts = {re.sub(r"-(\w)", lambda m: m.group(1).upper(), k): int(v)
             for k, v in re.findall(r'data-([\w-]+)="(\d+)"', body)}
    assert "pageHeight" in facts, "the page script did not run: " + body
    return facts


def headline_texts(html: str) -> list[str]:
    table = re.search(r'<section id="headline">(.*?)</section>', html, re.S).group(1)
    rows = re.findall(r'<tr class="(?:first|repeat)".*?</tr>', table, re.S)  # not the size lines
    return [re.sub(r"<[^>]+>", " ", row) for row in rows]


@pytest.mark.browser
def test_sweep_page_fits_and_answers_on_the_first_screen(sweep, tmp_path):
    exe = require_tool("chromium", "chromium-browser", "google-chrome")
    obs, a = sweep
    path = write_html(a, obs, tmp_path / "r.html", {"id": "c-7", "command": "vhpc compare"})
    html = path.read_text()
    facts = page_facts(exe, path, tmp_path)
    assert facts["pageHeight"] <= 8000, facts
    assert facts["pageWidth"] <= 1400 and facts["clipped"] == 0, facts
    assert facts["headlineBottom"] <= 900, facts
    assert facts["figuresOk"] == facts["figuresTotal"] > 0
    # the headline: one row per benchmark, its verdict and the sizes it covers
    rows = headline_texts(html)
    assert len(rows) == 2
    assert re.search(r"osu-coll\s+op=allreduce", rows[0]) and "inconclusive" in rows[0]
    assert "osu-latency" in rows[1] and "slower" in rows[1] and "0 B – 4 MiB" in rows[1]
    # the headline comes before the campaign's metadata and spec
    assert html.index('id="headline"') < html.index('id="campaign"')
    assert 'id="cold-warm"' not in html  # native only: no cold trials
    # one curve figure per shown family (avg and lat), min/max folded
    curves = re.search(r'<section id="curves">(.*?)</section>', html, re.S).group(1)
    assert curves.count('<svg class="figure"') == 2
    assert re.search(r"<details[^>]*><summary>Secondary metrics \(max, min\)", html)
    # the per-size table of the latency family, folded, sizes ascending
    table = re.search(r'id="fam-osu-latency-lat-points">(.*?)</details>', html, re.S).group(1)
    # per-size rows read "lat at 4 MiB", in numeric order, not as text sorts
    assert re.findall(r"<td>lat at (\d+ [KM]?i?B) \[us\]", table) == [fmt_size(x) for x in LAT_SIZES]
    # distributions: one figure per shown family, folded
    dist = re.search(r'<section id="distributions">(.*?)</section>', html, re.S).group(1)
    assert "<details>" in dist and dist.count('<svg class="figure"') == 2


@pytest.mark.browser
def test_first_screen_screenshot_shows_the_headline(sweep, tmp_path):
    """The 1400×900 screenshot itself: the headline table's verdict colours are on it."""
    exe = require_tool("chromium", "chromium-browser", "google-chrome")
    from PIL import Image

    obs, a = sweep
    path = write_html(a, obs, tmp_path / "r.html", {"id": "c-7"})
    png = tmp_path / "first.png"
    proc = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1400,900",
         f"--screenshot={png}", path.as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and png.exists(), proc.stderr[-2000:]
    img = Image.open(png).convert("RGB")
    assert img.size == (1400, 900)
    pixels = {c for _, c in img.getcolors(1400 * 900)}
    # .v-slower text (#b00020) and .v-inconclusive text (#8a6d00), anti-aliased: near those colours
    near = lambda c, t: all(abs(x - y) <= 40 for x, y in zip(c, t))
    assert any(near(p, (0xb0, 0x00, 0x20)) for p in pixels), "no 'slower' verdict on screen"
    assert any(near(p, (0x8a, 0x6d, 0x00)) for p in pixels), "no 'inconclusive' on screen"


# ---------------------------------------------------------------- the real command


@pytest.mark.browser
def test_compare_sweep_campaign_end_to_end(kernels_built, tmp_path):
    exe = require_tool("chromium", "chromium-browser", "google-chrome")
    require_tool("mpirun")
    require_file(kernels_built / "vhpc-osu")
    out = tmp_path / "res"
    proc = subprocess.run(
        [sys.executable, "-m", "vhpc.cli", "compare", "-b", "osu-latency:max_size=4096,iters=20",
         "-b", "osu-coll:op=allreduce,max_size=4096,iters=20", "-e", "native",
         "-e", "native:name=other", "--repeats", "3", "--out", str(out)],
        capture_output=True, text=True, timeout=600, env={**__import__("os").environ, "COLUMNS": "160"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    summary = proc.stdout[:proc.stdout.index("Report:")]
    assert len(summary.splitlines()) <= 30, summary
    assert "osu-coll[iters=20,max_size=4096,op=allreduce]" in summary  # label not cut
    assert "14 sizes, 0 B – 4 KiB" in summary and "11 sizes, 4 B – 4 KiB" in summary
    with (folder / "comparisons.csv").open() as fh:
        metrics = [r["metric"] for r in csv.DictReader(fh) if r["benchmark"] == "osu-latency"]
    assert [int(m.split("_")[1]) for m in metrics] == [0] + [1 << i for i in range(13)]
    facts = page_facts(exe, folder / "report.html", tmp_path)
    assert facts["pageHeight"] <= 8000 and facts["clipped"] == 0 and facts["headlineBottom"] <= 900
    html = (folder / "report.html").read_text()
    assert 'id="cold-warm"' not in html and len(headline_texts(html)) == 2


def _session_observations() -> list[Observation]:
    """native and a KVM guest, osu-latency over 4 sizes; the guest's trials carry session
    indices 0 (first after a boot) and 1..3."""
    rng = np.random.default_rng(1)
    return [Observation(env, "osu-latency", "", f"lat_{s}", "us", False,
                        (1 + s) * (1.3 if env == "vm" else 1.0) * (1 + rng.normal(0, 0.01)), True,
                        False, t, t, None if env == "native" else t % 4)
            for env in ("native", "vm") for t in range(8) for s in (1, 8, 64, 512)]


@pytest.mark.parametrize("protocol, shown", [("warm", False), ("cold-warm", True)])
def test_cold_vs_warm_only_when_the_protocol_has_cold_trials(tmp_path, protocol, shown):
    envs = {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "kvm")}
    obs = _session_observations()
    a = analyse(obs, envs, "native")
    html = write_html(a, obs, tmp_path / "r.html",
                      {"id": "c", "spec": {"protocol": protocol, "baseline": "native"}}).read_text()
    assert ('id="cold-warm"' in html) is shown
    if shown:  # folded, never a wall of panels above the answer
        section = re.search(r'<section id="cold-warm">(.*?)</section>', html, re.S).group(1)
        assert "<details>" in section
        assert html.index('id="headline"') < html.index('id="cold-warm"')


def test_a_parameter_swept_across_runs_is_one_family():
    """hpccg at ranks 1, 2, 4 and a barrier-like osu-coll at 16 B over ranks 2, 4, 8: one
    family per quantity over ``ranks``, points ascending, the other parameters kept."""
    obs = []
    for env, f in (("native", 1.0), ("other", 1.5)):
        for t in range(3):
            for r in (4, 1, 2):
                obs.append(Observation(env, "hpccg", f"ranks={r}", "mflops", "Mflop/s", True,
                                       900.0 * r / f + t, True, False, t))
                obs.append(Observation(env, "hpccg", f"ranks={r}", "residual", "1", False,
                                       1e-9, True, False, t))
            for r in (8, 2, 4):
                obs.append(Observation(env, "osu-coll", f"op=barrier,ranks={r},sizes=16", "avg_16", "us",
                                       False, 3.0 * r * f + 0.01 * t, True, False, t))
    a = analyse(obs, ENVS, "native")
    fams = families(a)
    got = [(f.label, f.quantity, f.parameter, f.xs, f.primary, f.secondary) for f in fams]
    assert got == [("hpccg", "mflops", "ranks", [1, 2, 4], True, False),
                   ("hpccg", "residual", "ranks", [1, 2, 4], False, True),
                   ("osu-coll[op=barrier,sizes=16]", "avg", "ranks", [2, 4, 8], True, False)]
    assert fams[0].keys[0] == ("hpccg", "ranks=1", "mflops")
    rows = {fs.family.benchmark: fs for fs in headline(a)}
    assert rows["hpccg"].ratio == pytest.approx(1 / 1.5, rel=0.01) and rows["hpccg"].verdict == SLOWER
    console = Console(record=True, width=160, color_system=None)
    render_table(a, console=console)
    text = console.export_text()
    assert "ranks 1 – 4 (3 points)" in text and "ranks 2 – 8 (3 points)" in text


@pytest.mark.browser
def test_mpi_p2p_like_page_with_three_environments_fits(tmp_path):
    """Four MPI sweeps (latency, bw and bibw with avg/max/optime, multi-pair latency) over
    ~23 sizes in three environments: the page stays under 8,000 px, nothing clipped, and the
    headline ends on the first screen (900 px)."""
    exe = require_tool("chromium", "chromium-browser", "google-chrome")
    envs = {"native": EnvInfo("native", "native"), "vm-1node": EnvInfo("vm-1node", "vm", "kvm"),
            "vm-2node": EnvInfo("vm-2node", "vm", "kvm")}
    rng = np.random.default_rng(0)
    obs, tid = [], 0
    sizes = [1 << i for i in range(23)]
    for r in range(3):
        for env, f in (("native", 1.0), ("vm-1node", 1.1), ("vm-2node", 1.3)):
            for bench, qs in (("osu-latency", (("lat", "us", False),)),
                              ("osu-bw", (("bw_avg", "MB/s", True), ("bw_max", "MB/s", True), ("optime", "us", False))),
                              ("osu-bibw", (("bw_avg", "MB/s", True), ("bw_max", "MB/s", True), ("optime", "us", False))),
                              ("osu-multi-lat", (("lat", "us", False), ("max", "us", False)))):
                for q, unit, hib in qs:
                    for s in sizes:
                        v = (s + 1) / (1 + s / 5000) / f if hib else (0.2 + s / 1000) * f
                        obs.append(Observation(env, bench, "", f"{q}_{s}", unit, hib,
                                               v * (1 + rng.normal(0, 0.02)), True, False, tid, r))
                tid += 1
    a = analyse(obs, envs, "native")
    path = write_html(a, obs, tmp_path / "r.html", {"id": "p2p", "spec": {"protocol": "warm"}})
    facts = page_facts(exe, path, tmp_path)
    assert facts["pageHeight"] <= 8000 and facts["clipped"] == 0, facts
    assert facts["headlineBottom"] <= 900, facts
    assert len(headline_texts(path.read_text())) == 8   # 4 benchmarks × 2 environments


def test_terminal_of_scalar_metrics_leaves_secondary_ones_to_the_html():
    obs = [Observation(env, "hpccg", "", m, unit, hib, v * (0.8 if env == "other" and hib else 1.0) + i,
                       True, False, i)
           for env in ("native", "other") for i in range(3)
           for m, unit, hib, v in (("mflops", "Mflop/s", True, 900.0), ("time_s", "s", False, 2.0),
                                   ("iterations", "count", False, 150.0), ("residual", "1", False, 1e-9))]
    a = analyse(obs, ENVS, "native")
    text = _terminal(a, width=80)
    assert "mflops [Mflop/s]" in text and "time_s [s]" not in text  # the headline: primary
    assert "iterations [count]" not in text and "residual [1]" not in text
    assert "every metric: vhpc report ID --all" in text
    every = _terminal(a, width=200, detail=True)  # --all: every metric, secondary ones too
    assert "time_s [s]" in every
    # verification figures are checks, not metrics: never a row (the HTML's checks table)
    assert "iterations [count]" not in every and "residual [1]" not in every


def test_ranks_sharing_a_host_cpu_across_nodes_limit_trust_in_the_headline(sweep, tmp_path):
    """Trials whose ranks on two Slurm nodes may both run on host CPU 0 (a test cluster on one
    host): the headline, families.csv and the terminal say contention, not scaling."""
    from types import SimpleNamespace

    obs, a = sweep
    ranks = [{"rank": 0, "node": "vhpc1", "cpus": [0]}, {"rank": 1, "node": "vhpc2", "cpus": [0]}]
    trials = tuple(SimpleNamespace(environment="other", benchmark="osu-latency", params="", round=r,
                                   status="done", applied={"ranks": ranks}) for r in range(3))
    out = export_all(ReportData(a, obs, {"id": "c"}, trials=trials), tmp_path)
    rows = headline_texts(out["html"].read_text())
    assert "contention, not scaling" in rows[1] and "contention" not in rows[0]  # latency only
    with out["families-csv"].open() as fh:
        trust = {r["benchmark"] + "/" + r["quantity"]: r["trust"] for r in csv.DictReader(fh)}
    assert "contention, not scaling" in trust["osu-latency/lat"] and trust["osu-coll/avg"] == ""
    console = Console(record=True, width=200, color_system=None)
    from vhpc.report.export import shared_points
    render_table(a, console=console, shared=shared_points(trials))
    assert "contention, not scaling" in console.export_text()


@pytest.mark.browser
def test_vcluster_like_page_warm_protocol_tcg_two_repeats(tmp_path):
    """The issue's vcluster campaign in shape: osu-coll[op=allreduce,ranks=3] avg/min/max over
    19 sizes, native against a TCG vcluster whose trials carry session indices, 2 repeats,
    warm protocol: no cold-vs-warm section, and the headline says TCG and n < 3."""
    exe = require_tool("chromium", "chromium-browser", "google-chrome")
    envs = {"native": EnvInfo("native", "native"),
            "vcluster": EnvInfo("vcluster", "vcluster", "tcg")}
    rng = np.random.default_rng(5)
    obs = [Observation(env, "osu-coll", "op=allreduce,ranks=3", f"{q}_{s}", "us", False,
                       (5 + s / 100) * k * (40 if env == "vcluster" else 1) * (1 + rng.normal(0, 0.05)),
                       True, False, t, t, t if env == "vcluster" else None)
           for env in envs for t in range(2) for s in COLL_SIZES
           for q, k in (("avg", 1.0), ("min", 0.8), ("max", 1.2))]
    a = analyse(obs, envs, "native")
    path = write_html(a, obs, tmp_path / "r.html", {"id": "vc", "spec": {"protocol": "warm"}})
    html = path.read_text()
    facts = page_facts(exe, path, tmp_path)
    assert facts["pageHeight"] <= 8000 and facts["clipped"] == 0, facts
    assert facts["headlineBottom"] <= 900, facts
    assert 'id="cold-warm"' not in html and 'id="tcg-banner"' in html
    (row,) = headline_texts(html)
    assert "TCG emulation" in row and "n = 2 &lt; 3" in row and "19 sizes, 4 B – 1 MiB" in row
    text = _terminal(a)
    assert len(text.splitlines()) <= 30 and "osu-coll[op=allreduce,ranks=3]" in text


def test_a_finding_that_counts_more_items_names_them_all_in_the_html(tmp_path):
    obs = sweep_observations()
    # every latency size of "other" noisy: far more than the 6 items a message names
    obs = [Observation(o.environment, o.benchmark, o.params, o.metric, o.unit, o.higher_is_better,
                       o.value * (1 + 0.5 * (o.round % 2)) if o.environment == "other" else o.value,
                       o.valid, o.warmup, o.trial_id, o.round) for o in obs]
    a = analyse(obs, ENVS, "native")
    f = next(f for f in a.findings if f.kind == "high-variation" and f.scope == "other / osu-latency")
    assert "and 18 more" in f.message and len(f.items) == 24
    html = write_html(a, obs, tmp_path / "r.html", {"id": "c"}).read_text()
    block = re.search(r"<summary>all 24</summary><p class=\"caption\">(.*?)</p>", html).group(1)
    named = re.findall(r"lat_(\d+) \(CV", block)
    assert [int(x) for x in named] == LAT_SIZES   # every one, in numeric order


def test_a_scalar_metric_has_one_verdict_in_the_headline_and_its_own_row():
    """Four metrics 30 % slower at n = 3, one Holm family of four primary metrics.  The
    headline row of a scalar metric says what its per-metric row says, both read off the one
    interval shown at the family's Holm level (never "slower" above a table that says
    otherwise for the same metric)."""
    from scipy import stats as sps
    from statsmodels.stats.multitest import multipletests

    native, other = [1.0, 1.1, 0.9], [1.3, 1.4, 1.2]
    p = sps.ttest_ind(np.log(other), np.log(native), equal_var=False).pvalue
    rejected = multipletests([p] * 4, 0.05, "holm")[0][0]
    obs = [Observation(env, f"bench{b}", "", "time", "s", False, v, True, False, i)
           for b in range(4) for env, vs in (("native", native), ("other", other))
           for i, v in enumerate(vs)]
    a = analyse(obs, ENVS, "native")
    rows = headline(a)
    assert len(rows) == 4
    for fs in rows:
        c = a.comparison(fs.family.benchmark, "", "time", "other")
        assert fs.verdict == c.verdict == (SLOWER if rejected else INCONCLUSIVE)
        assert (c.ratio_ci[0] > 1.0) == bool(rejected)  # the interval says the same
        assert fs.low == pytest.approx(c.ratio_ci[0]) and fs.high == pytest.approx(c.ratio_ci[1])


def test_findings_of_one_kind_are_one_item_with_the_advice_once(tmp_path):
    """Three benchmarks noisy in both environments: six "high variation" findings.  The HTML
    lists them as one item naming the six places, each with its own metrics and CVs, and its
    advice once (the demo's page repeated the same advice ten times)."""
    rng = np.random.default_rng(3)
    obs = [Observation(env, f"bench{b}", "", "time", "s", False,
                       float(1.0 + 0.3 * rng.standard_normal() ** 2 + 0.2 * i), True, False, i)
           for b in range(3) for env in ("native", "other") for i in range(4)]
    a = analyse(obs, ENVS, "native")
    noisy = [f for f in a.findings if f.kind == "high-variation"]
    assert len(noisy) == 6
    html = write_html(a, obs, tmp_path / "r.html", {"id": "c"}).read_text()
    findings = html.split('<section id="findings">')[1].split("</section>")[0]
    assert findings.count(noisy[0].advice.split("(")[0]) == 1
    assert re.search(r"high variation \(coefficient of variation &gt; 5 %\)</b> .*\n"
                     r"<details class=\"scopes\"><summary>in 6 places</summary>", findings)
    for f in noisy:  # every place, with its metric and CV
        assert re.search(rf"<b>{re.escape(f.scope)}</b>: time \(CV \d+\.\d %\)", findings), f.scope


def test_the_ratio_range_column_and_sweep_caption_only_where_a_sweep_is(sweep, tmp_path):
    """A campaign of scalar metrics (the demo's) had an empty "ratio range" column in every
    table and a caption about sweeps it did not have; a sweep campaign keeps both."""
    obs = [Observation(env, f"bench{b}", "", "time", "s", False, v * (1 + 0.01 * i), True, False, i)
           for b in range(2) for env, v in (("native", 1.0), ("other", 1.5)) for i in range(3)]
    scalar = write_html(analyse(obs, ENVS, "native"), obs, tmp_path / "s.html", {"id": "s"}).read_text()
    assert "ratio range" not in scalar and "geometric mean of its per-point" not in scalar
    assert "<th>ratio [CI]</th><th>verdict</th>" in scalar.split('<section id="metrics">')[0]
    sobs, a = sweep
    swept = write_html(a, sobs, tmp_path / "w.html", {"id": "w"}).read_text()
    head = swept.split('<section id="metrics">')[0]
    assert "<th>ratio range</th>" in head and "geometric mean of its per-point" in head
    assert re.search(r'<span class="nowrap">[0-9.]+ \([0-9.]+ [KM]?i?B\)</span>', head)


def test_all_metrics_says_a_note_every_row_shares_once(tmp_path):
    """Under TCG every row of "All metrics" shares "TCG emulation, not KVM": like the
    headline, the table says it once above itself, never in each row's trust cell."""
    envs = {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "tcg")}
    obs = [Observation(env, f"bench{b}", "", m, "s", False, v * (1 + 0.001 * i), True, False, i)
           for b in range(2) for m in ("time", "wait") for env, v in (("native", 1.0), ("vm", 3.0))
           for i in range(3)]
    html = write_html(analyse(obs, envs, "native"), obs, tmp_path / "r.html", {"id": "t"}).read_text()
    metrics = html.split('<section id="metrics">')[1].split("</table>")[0]
    assert "<b>Limits trust in every row:</b> TCG emulation, not KVM." in metrics
    cells = re.findall(r'<td class="trust">(.*?)</td>', metrics)
    assert len(cells) == 2 and all("TCG" not in c for c in cells)


def test_headline_keeps_threads_apart_and_leaves_shared_cpu_points_out():
    """Seed 003 Fig. 2 contrasts threads=1 with threads=4: one headline row each, never their
    geometric mean; a ranks sweep whose 4-rank point shared host CPUs between nodes is
    summarised without it, and says so."""
    from vhpc.report import headline_rows

    obs, tid = [], 0
    for r in range(3):
        for env, slow in (("native", 1.0), ("other", None)):
            for threads, f in ((1, 1.1), (4, 2.0)):
                obs.append(Observation(env, "npb-ep", f"class=S,threads={threads}", "time", "s",
                                       False, 10.0 * (slow or f) + 0.01 * r, True, False, tid, r))
                tid += 1
            for ranks, f in ((1, 1.1), (2, 1.1), (4, 3.0)):
                obs.append(Observation(env, "hpccg", f"ranks={ranks}", "mflops", "Mflop/s", True,
                                       900.0 / (slow or f) + r, True, False, tid, r))
                tid += 1
    a = analyse(obs, ENVS, "native")
    rows = headline_rows(a, shared=[("other", "hpccg", "ranks=4")])
    ep = [r for r in rows if r.summary.family.benchmark == "npb-ep"]
    assert [r.summary.family.params for r in ep] == ["class=S,threads=1", "class=S,threads=4"]
    assert [round(r.summary.ratio, 2) for r in ep] == [1.1, 2.0]
    (hp,) = [r for r in rows if r.summary.family.benchmark == "hpccg"]
    assert hp.summary.family.xs == [1, 2] and hp.summary.ratio == pytest.approx(1 / 1.1, rel=0.01)
    assert any("without ranks=4" in t and "contention" in t for t in hp.trust)
    text = _terminal(a, width=80)
    assert "npb-ep[class=S,threads=1]" in text and "npb-ep[class=S,threads=4]" in text


def test_a_sweep_figure_shades_the_points_where_cpus_were_shared():
    """The campaign report's sweep figure shades the contended points too, named in the
    legend; with no contended point nothing is shaded."""
    from vhpc.report import sweeps

    obs = [Observation(env, "hpccg", f"ranks={r}", "mflops", "Mflop/s", True,
                       900.0 / (1.2 if env == "other" else 1.0) + i, True, False, 10 * r + i, i)
           for env in ENVS for r in (1, 2, 3) for i in range(3)]
    a = analyse(obs, ENVS, "native")
    (fam,) = [f for f in families(a) if f.primary]
    svg = sweeps.family_figure(a, fam, "svg", shared_x=[3])
    assert "shaded: CPUs shared between nodes" in svg
    assert "shaded" not in sweeps.family_figure(a, fam, "svg")


def scaling_observations() -> list[Observation]:
    """Seed 004's scaling campaign as run under emulation with 2 runs: HPCCG at ranks 1-3,
    four collectives at ranks 2-3 (16 B), ping-pong over 18 sizes; the guest 20-400 times
    slower and so noisy that Welch on ln values with 1 degree of freedom spans up to 10^40."""
    rng = np.random.default_rng(11)
    out = []

    def add(env, bench, params, metric, unit, hib, mean, spread):
        for i in range(2):
            v = mean * math.exp(rng.normal(0, spread) + (spread if i else -spread))
            out.append(Observation(env, bench, params, metric, unit, hib, v, True, False,
                                   len(out)))

    for env, slow, spread in (("native", 1.0, 0.05), ("vm", 150.0, 1.2)):
        for r in (1, 2, 3):
            add(env, "hpccg", f"ranks={r}", "mflops", "Mflop/s", True, 1000 * r / slow, spread)
        for op in ("allreduce", "alltoall", "barrier", "bcast"):
            for r in (2, 3):
                add(env, "osu-coll", f"op={op},ranks={r},sizes=16", "avg", "us", False,
                    20 * r * slow, spread)
        for size in [0] + [2 ** k for k in range(17)]:
            add(env, "osu-latency", "iters=200,iters_large=50,max_size=65536", f"lat_{size}",
                "us", False, (5 + size / 100) * slow, spread)
    return out


@pytest.mark.browser
def test_the_scaling_report_answers_on_the_first_screen_within_1400_px(tmp_path):
    """The seed-004 scaling report under emulation at n = 2 (intervals that would run to 20
    digits) fits 1,400 px: its numbers are factors, the problem size a line under each
    benchmark, and the headline ends on the first screen."""
    exe = require_tool("chromium", "chromium-browser", "google-chrome")
    envs = {"native": EnvInfo("native", "native", None, {}),
            "vm": EnvInfo("vm", "vcluster", "tcg", {})}
    obs = scaling_observations()
    a = analyse(obs, envs, "native")
    shared = {(e, b, p) for e in envs for b, p in
              [("hpccg", "ranks=3")] + [("osu-coll", f"op={op},ranks=3,sizes=16")
                                        for op in ("allreduce", "alltoall", "barrier", "bcast")]}
    spec = {"benchmarks": [{"name": "hpccg", "params": {"ranks": r}} for r in (1, 2, 3)]}
    path = write_html(a, obs, tmp_path / "r.html", {"id": "c-4", "command": "vhpc paper 004"},
                      shared=shared, facts={"sizes": __import__("vhpc.report.pagefacts").report
                                            .pagefacts.problem_sizes(spec)})
    html = path.read_text()
    head = re.search(r'<section id="headline">(.*?)</section>', html, re.S).group(1)
    assert "×" in head and not re.search(r"\d{7}", head)
    assert "hpccg size: nx=ny=nz=auto" in head
    facts = page_facts(exe, path, tmp_path)
    assert facts["pageWidth"] <= 1400 and facts["clipped"] == 0, facts
    assert facts["headlineBottom"] <= 900, facts


def test_the_scaling_headline_at_80_columns_cuts_no_word_or_number():
    """The same campaign in the terminal: the Holm level under the overhead, so the trust notes
    keep their words ("(contention)" was folded to "(contention" / ")"), and a sweep's points
    on their own line when the label is long ("0 B" never split)."""
    envs = {"native": EnvInfo("native", "native", None, {}),
            "vm": EnvInfo("vm", "vcluster", "tcg", {})}
    a = analyse(scaling_observations(), envs, "native")
    shared = {(e, "osu-coll", f"op={op},ranks=3,sizes=16") for e in envs
              for op in ("allreduce", "alltoall", "barrier", "bcast")}
    console = Console(record=True, width=80, color_system=None)
    render_table(a, console=console, shared=shared)
    text = console.export_text()
    lines = text.splitlines()
    assert max(map(len, lines)) <= 80, text
    assert text.count("(contention)") == 4 and "  native 16.89 us · 18 sizes, 0 B – 64 KiB" \
        in lines, text
    # two runs a side: no interval printed as numbers, the runs needed beside it; both centres
    assert "too few runs for an" in text and not re.search(r"\de\d|\d{6}", text), text
    assert re.search(r"vm \(TCG\)\s+7878 us\s+×197\s+inconclusive", text), text
    # two runs a side are too few to plan from (power.MIN_PILOT): the pilot advice, no "≈N"
    assert "avg [us] ↓ · native 40.08 us" in text and "too few runs to plan: run ≥" in text
    assert "runs each to decide" not in text


def test_every_metric_of_the_scaling_campaign_at_80_columns():
    """``vhpc report ID --all`` of the same campaign at 80 columns: the header whole
    ("overhea" was cut), no verdict folded, a geometric mean's n beneath it where needed."""
    envs = {"native": EnvInfo("native", "native", None, {}),
            "vm": EnvInfo("vm", "vcluster", "tcg", {})}
    a = analyse(scaling_observations(), envs, "native")
    console = Console(record=True, width=80, color_system=None)
    render_table(a, console=console, detail=True)
    lines = console.export_text().splitlines()
    assert max(map(len, lines)) <= 80
    assert lines[1].split() == ["environment", "geo.", "mean", "ratio", "[CI]", "overhead", "p",
                                "(Holm)", "verdict"], lines[:3]
    assert not any(line.rstrip().endswith(("inconclusiv", "slowe", "faste")) for line in lines)
