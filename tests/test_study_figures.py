"""Every study declares its seed figure; the figure's data (x, y, interval per point)
is filled from an analysis, drawn, written to results.json; the report header is tables (raw
JSON only in a collapsed block); vcluster per-guest / per-rank tables; the whole-seed page.
The studies run for real at tiny sizes (guests boot under TCG here); the partition study's
four guests are left to tests/test_partition_study.py."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vhpc.analysis import analyse
from vhpc.analysis.figdata import figure_data
from vhpc.campaign import studies
from vhpc.core.metrics import EnvInfo, Observation
from vhpc.report import paper, studyfig
from vhpc.report.header import spec_section, vcluster_section
from vhpc.report.html import write_html

from conftest import require_tool


def _obs(spec: dict, seed: int = 1, n: int = 3) -> list[Observation]:
    """spec: (env, bench, params, metric, unit, hib) → mean; n samples each, 1 % noise."""
    rng = np.random.default_rng(seed)
    out, tid = [], 0
    for (env, bench, params, metric, unit, hib), mean in spec.items():
        for i in range(n):
            out.append(Observation(env, bench, params, metric, unit, hib,
                                   float(mean * (1 + rng.normal(0, 0.01))), valid=True,
                                   warmup=False, trial_id=tid, session_index=None if env == "native" else i))
            tid += 1
    return out


def _envs(names, tcg=()):
    return {n: EnvInfo(n, "native" if n.startswith("native") else "vm",
                       None if n.startswith("native") else ("tcg" if n in tcg else "kvm"), {})
            for n in names}


def test_every_study_declares_a_seed_figure():
    for name, s in studies.STUDIES.items():
        assert s.figure is not None, name
        assert re.fullmatch(r"00[0-4]", s.figure.seed), name
        assert s.figure.number.startswith(("Fig.", "Sec.")), name
        assert s.figure.caption in s.figure.describe()
    assert [s.name for s in studies.of_seed("001")] == ["mpi-p2p", "linpack"]
    assert [s.name for s in studies.of_seed("0")][:2] == ["socket-span", "cold-warm"]
    assert {"pagefault-latency", "class-b-c"} <= set(studies.STUDIES.names())


def test_socket_span_x_is_sockets_series_native_vs_vm():
    spec = {}
    for k in (1, 2):
        spec[(f"native-{k}s", "stream", "", "triad_bw", "MB/s", True)] = 1000.0 * k
        spec[(f"vm-span{k}", "stream", "", "triad_bw", "MB/s", True)] = 900.0 * k
    a = analyse(_obs(spec), _envs([k[0] for k in spec]), "native-1s")
    fd = figure_data(studies.STUDIES.get("socket-span").figure, a)
    (panel,) = fd.panels
    assert panel.numeric_x and panel.xlabel == "sockets spanned"
    got = {s.label: [p.x for p in s.points] for s in panel.series}
    assert got == {"native": [1, 2], "vm": [1, 2]}
    pt = panel.series[1].points[1]
    assert pt.low < pt.y < pt.high and pt.n == 3
    svg = studyfig.draw(fd)  # text is drawn as paths: the drawing, not its words, is checked
    assert svg is not None and svg.lstrip().startswith("<?xml") and svg.rstrip().endswith("</svg>")
    assert svg.count('<g id="LineCollection_') == 4  # two per series (1 series drew 2)
    d = fd.to_dict()
    assert d["seed"] == "000" and d["figure"] == "Fig. 2"
    assert d["panels"][0]["x"]["label"] == "sockets spanned"
    assert set(d["panels"][0]["series"][0]["points"][0]) == {"x", "y", "low", "high", "n", "emulated"}


def test_a_title_wider_than_the_figure_widens_the_drawing_instead_of_being_clipped():
    """One panel is 5.2 in (374.4 pt) wide; an emulated study's suptitle (Seed 000 Fig. 2: ...
    — TCG emulation, not hardware virtualization) is wider.  The saved drawing takes the
    whole title in (figures.render's tight bounding box; constrained layout alone clipped it
    on both sides)."""
    spec = {}
    for k in (1, 2):
        spec[(f"native-{k}s", "stream", "", "triad_bw", "MB/s", True)] = 1000.0 * k
        spec[(f"vm-span{k}", "stream", "", "triad_bw", "MB/s", True)] = 900.0 * k
    names = [k[0] for k in spec]
    a = analyse(_obs(spec), _envs(names, tcg={"vm-span1", "vm-span2"}), "native-1s")
    fd = figure_data(studies.STUDIES.get("socket-span").figure, a)
    assert fd.emulated and len(fd.panels) == 1
    svg = studyfig.draw(fd)
    width = float(re.search(r'<svg[^>]* width="([\d.]+)pt"', svg)[1])
    assert width > 5.2 * 72 + 100, width


def test_mpi_p2p_message_size_axis_log_and_linpack_relative():
    spec = {}
    for env, f in (("native", 1.0), ("vm", 1.2)):
        for size in (1, 8, 64):
            spec[(env, "osu-latency", "max_size=64", f"lat_{size}", "us", False)] = f * (1 + size / 64)
            spec[(env, "osu-bw", "max_size=64", f"bw_avg_{size}", "MB/s", True)] = 10.0 * size / f
        # pairs=1 is osu-multi-lat's default: a stored parameter string without it
        for params, pairs in (("max_size=8", 1), ("pairs=2", 2)):
            spec[(env, "osu-multi-lat", params, "max_8", "us", False)] = f * pairs
        for m, v in (("factor_s", 1.0), ("solve_s", 0.1), ("total_s", 1.1), ("mflops", 500.0)):
            spec[(env, "linpack", "n=200", m, "s" if m != "mflops" else "Mflop/s", m == "mflops")] = v * (f if m != "mflops" else 1 / f)
    a = analyse(_obs(spec), _envs(["native", "vm"], tcg=("vm",)), "native")
    fd = figure_data(studies.STUDIES.get("mpi-p2p").figure, a)
    lat = next(p for p in fd.panels if p.title.startswith("latency vs message size"))
    assert lat.xlog and lat.ylog and lat.numeric_x
    assert [p.x for p in lat.series[0].points] == [1, 8, 64]
    # seed 001 Fig. 4: latency against the number of communicating processes (pairs)
    procs = next(p for p in fd.panels if p.title.startswith("Fig. 4"))
    assert procs.numeric_x and "pairs" in procs.xlabel
    got = {s.label: [(p.x, p.y) for p in s.points] for s in procs.series}
    assert got == {"native": [(1, pytest.approx(1.0, rel=0.05)), (2, pytest.approx(2.0, rel=0.05))],
                   "vm": [(1, pytest.approx(1.2, rel=0.05)), (2, pytest.approx(2.4, rel=0.05))]}
    assert fd.emulated and any(p.emulated for s in lat.series for p in s.points)
    assert studyfig.draw(fd, "png")[:4] == b"\x89PNG"
    lp = figure_data(studies.STUDIES.get("linpack").figure, a)
    times, rate = lp.panels  # time ratios (~1.2) and the Mflops ratio (~0.83): never one axis
    assert times.relative and [p.x for p in times.series[0].points] == ["factor_s", "solve_s", "total_s"]
    assert abs(times.series[0].points[0].y - 1.2) < 0.05
    assert rate.relative and [p.x for p in rate.series[0].points] == ["vm"]
    assert abs(rate.series[0].points[0].y - 1 / 1.2) < 0.05


def test_pagefault_memory_types_and_cold_warm_groups():
    spec = {}
    for env, f in (("native", 1.0), ("vm", 2.0)):
        for m, v in (("private_us", 0.5), ("shared_us", 0.7)):
            spec[(env, "pagefault", "", m, "us", False)] = v * f
        spec[(env, "stream", "", "triad_bw", "MB/s", True)] = 1000.0 / f
    a = analyse(_obs(spec, n=4), _envs(["native", "vm"]), "native")
    fd = figure_data(studies.STUDIES.get("pagefault-latency").figure, a)
    xs = [p.x for p in fd.panels[0].series[0].points]
    assert xs == ["malloc (private anonymous)", "shared anonymous mmap"]
    cw = figure_data(studies.STUDIES.get("cold-warm").figure, a)
    vm = next(s for p in cw.panels for s in p.series if s.label == "vm")
    assert [p.x for p in vm.points] == ["cold", "warm"]
    # native has no VM sessions: its trials stand beside the VM's cold and warm ones
    native = next(s for p in cw.panels for s in p.series if s.label == "native")
    assert [(p.x, p.n) for p in native.points] == [("all trials (no VM boot)", 4)]
    assert studyfig.draw(cw).lstrip().startswith("<")


def test_scaling_figure_is_drawn_as_seed_004_drew_it():
    fig = studies.STUDIES.get("scaling").figure
    pingpong, coll, hpccg, ratio = fig.panels  # seed 004 Fig. 1, Fig. 2-5, Fig. 6, VM / native
    assert pingpong.bench == "osu-latency" and pingpong.x == "metric"
    assert pingpong.xlog and pingpong.ylog  # latency vs size, log-log
    assert (coll.bench, coll.x, coll.split, coll.x_nodes) == ("osu-coll", "param:ranks", "param:op", True)
    assert dict(coll.titles)["op=barrier"] == "Fig. 2: Barrier (no message)"  # not "at 16 B"
    assert (hpccg.bench, hpccg.per_node, hpccg.x_nodes) == ("hpccg", True, True)
    assert "per node" in hpccg.ylabel and not hpccg.relative
    assert ratio.relative and ratio.bench == "hpccg" and ratio.x_nodes
    for p in fig.panels:  # no unfilled placeholder in any label
        assert "ranks_per_node" not in p.xlabel + p.ylabel


def test_spec_header_tables_raw_json_only_in_details():
    spec = studies.build("partition", _topo(), [], repeats=2).model_dump(mode="json")
    html = str(spec_section(spec))
    before, _, inside = html.partition("<details")
    assert "{" not in before and "&#34;environments&#34;" in inside
    assert "vm-per-socket" in before and "vms=2" in before and "repeats" in before


def _topo():
    from vhpc import topology

    return topology.from_synthetic("pack:2 numa:1 l3:1 core:2 pu:1")


class _T:
    def __init__(self, env, applied, bench="npb-cg", rnd=1):
        self.environment, self.applied, self.benchmark, self.round = env, applied, bench, rnd


def test_vcluster_guest_and_rank_tables():
    from vhpc.core.records import AppliedPlacement

    vms = [{"vcpus": [{"vcpu": 0, "allowed": [2], "last_cpu": 2, "last_node": 1}],
            "memory": {"node_mib": {1: 512.0}}},
           {"vcpus": [{"vcpu": 0, "allowed": [3], "last_cpu": 3, "last_node": 1}],
            "memory": {"node_mib": {1: 510.0}}}]
    ranks = [{"rank": 0, "vm": 0, "guest": "g0", "vcpu": 0, "host_cpu": 2},
             {"rank": 1, "vm": 1, "guest": "g1", "vcpu": 0, "host_cpu": 3}]
    html = str(vcluster_section([_T("vc", AppliedPlacement(vms=vms, ranks=ranks))]))
    assert "vc-guests" in html and "vc-ranks" in html
    assert "node 1: 512" in html and "<td>vm1 (g1)</td><td>0</td><td>3</td><td>1</td>" in html
    assert vcluster_section([_T("vm", AppliedPlacement(cpus=[0]))]) is None
    # a damaged stored rank (a guest index that is no number, an entry that is no mapping) is
    # left out; the others are still drawn
    damaged = ranks + [{"rank": 2, "vm": "zero", "vcpu": 0}, "rank 3"]
    assert str(vcluster_section([_T("vc", AppliedPlacement(vms=vms, ranks=damaged))])) == html


# -- browser: a study report and a whole-seed page -------------------------------------------

def _render(path: Path, tmp_path: Path) -> tuple[str, list[str]]:
    exe = require_tool("chromium", "chromium-browser", "google-chrome")  # fails under CI=true
    proc = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=5000", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = re.search(r'<body[^>]*data-figures-ok="(\d+)"[^>]*data-figures-total="(\d+)"', proc.stdout)
    assert m, proc.stdout[:500]
    assert int(m.group(1)) == int(m.group(2)) > 0
    errors = [line for line in proc.stderr.splitlines()
              if "Uncaught" in line or (":CONSOLE" in line and path.name in line)]
    return proc.stdout, errors


def check_page(path: Path, tmp_path: Path, lines: bool = True) -> str:
    """Every figure loads, no console error, the agree/disagree lines (when findings are
    stored) are present."""
    dom, errors = _render(path, tmp_path)
    assert not errors, errors
    if lines:
        assert re.search(r'class="finding-line o-(agrees|disagrees|cannot-tell) k-paper"', dom), \
            "no paper-found / this-host line"
    return dom


def _p2p_analysis():
    spec = {}
    for env, f in (("native", 1.0), ("vm", 1.3)):
        for size in (1, 8, 64):
            spec[(env, "osu-latency", "", f"lat_{size}", "us", False)] = f * (1 + size / 64)
        spec[(env, "linpack", "", "total_s", "s", False)] = f
        spec[(env, "linpack", "", "mflops", "Mflop/s", True)] = 100 / f
    return analyse(_obs(spec), _envs(["native", "vm"], tcg=("vm",)), "native")


@pytest.mark.browser
def test_study_report_and_seed_page_render_in_chromium(tmp_path):
    a = _p2p_analysis()
    has_findings = True  # seed 001 states findings for both studies (campaign/findings.yaml)
    assert paper.stated("mpi-p2p") and paper.stated("linpack")
    block, fd, _, _ = paper.study_block("mpi-p2p", a, prefix="a-")
    spec = studies.build("mpi-p2p", _topo(), [], repeats=2).model_dump(mode="json")
    report = write_html(a, [], tmp_path / "report.html",
                        {"id": "c-1", "command": "vhpc study mpi-p2p", "spec": spec}, study=block)
    check_page(report, tmp_path, lines=has_findings)
    text = report.read_text()
    head = text.split('<section id="study">')[0]
    assert '"benchmarks"' not in head.split("<details")[0]
    entries = []
    for name in ("mpi-p2p", "linpack"):
        b, _, _, _ = paper.study_block(name, a, prefix=f"{name}-")
        entries.append({"name": name, "number": "Fig.", "cid": "c-1", "block": b, "status": "finished"})
    page = paper.write_seed_page("001", entries, tmp_path / "paper-001" / "index.html")
    dom = check_page(page, tmp_path, lines=has_findings)
    assert dom.index('id="sec-mpi-p2p"') < dom.index('id="sec-linpack"')


# -- real studies at --repeats 1 (cold-warm 2) on this host (guests boot: TCG here) ------------

#: per study: tiny ``-b`` items, and per x-axis label of the seed figure the x values each
#: series must hold ("ENVS": the study's environment names on this host)
SMALL = {
    "noise": (["noise:duration=0.2"], {"environment": "ENVS"}),
    "linpack": (["linpack:n=100"], {"phase": ["factor_s", "solve_s", "total_s"],
                                    "environment": ["vm"]}),
    "mpi-p2p": (["osu-latency:max_size=8,iters=20,iters_large=5",
                 "osu-multi-lat:max_size=8,iters=20,iters_large=5"],
                {"message size [bytes]": [0, 1, 2, 4, 8],
                 "communicating pairs (2 processes each)": [1]}),
    "oversubscription": (["npb-is:class=S,copies=2,threads=1"], {"NPB kernel": ["npb-is"]}),
    "cold-warm": (["pagefault:mib=4,reps=1"], {"trial": None}),
}
# the partition study (four guests, minutes under TCG) is checked without booting them in
# tests/test_partition_study.py




def _study(name: str, tmp_path: Path) -> dict:
    """Run ``vhpc study NAME`` with the tiny benchmarks, one round (two for cold-warm: its
    warm point is a VM's second trial); its results.json.  A round costs each VM trial
    seconds of TCG emulation, and one round or two are both too few for a verdict."""
    repeats = "2" if name == "cold-warm" else "1"
    argv = [sys.executable, "-m", "vhpc.cli", "study", name, "--repeats", repeats, "--warmup", "0",
            "--timeout", "300", "--out", str(tmp_path)]
    for b in SMALL[name][0]:
        argv += ["-b", b]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1200)
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    (doc,) = [json.loads(p.read_text()) for p in tmp_path.glob("*/results.json")]
    assert (next(tmp_path.glob("*/figure.png"))).stat().st_size > 0
    return doc


@pytest.mark.parametrize("name", list(SMALL))
def test_study_writes_figure_data_and_finding_lines(name, tmp_path, kernels_built, no_qemu_leak):
    require_tool("qemu-system-x86_64")
    doc = _study(name, tmp_path)
    fig, spec = doc["study"]["figure"], studies.STUDIES.get(name).figure
    assert fig["seed"] == spec.seed and fig["figure"] == spec.number
    xlabels = {p.xlabel for p in spec.panels}
    assert all(p["x"]["label"] in xlabels for p in fig["panels"])
    envs = list(doc["environments"])
    for label, want in SMALL[name][1].items():
        drawn = [p for p in fig["panels"] if p["x"]["label"] == label]
        assert drawn and all(p["series"] for p in drawn), label
        for p in drawn:
            for s in p["series"]:
                xs = [pt["x"] for pt in s["points"]]
                if want == "ENVS":  # one bar per environment of this host's study
                    assert sorted(xs) == sorted(envs) and xs[0] == doc["baseline"], xs
                elif want is None:  # cold/warm: the VM's first trial after boot and later ones
                    assert xs in (["cold", "warm"], ["all trials (no VM boot)"]), xs
                else:
                    assert xs == want, (label, s["label"], xs)
                assert all(pt["n"] >= 1 and (pt["low"] is None or pt["low"] <= pt["y"] <= pt["high"])
                           for pt in s["points"])
    if name == "cold-warm":  # per VM boot a cold trial then warm ones, a fresh boot per round
        db = sqlite3.connect(tmp_path / "vhpc.db")
        rows = list(db.execute("SELECT environment, session_index, json_extract(applied_json, "
                               "'$.session') FROM trials ORDER BY id"))
        db.close()
        assert [r[1:] for r in rows if r[0] == "vm"] == [(0, 1), (1, 1), (2, 1), (0, 2), (1, 2), (2, 2)]
        assert all(r[1:] == (None, None) for r in rows if r[0] == "native")
    # one "paper found / this host" line per stated finding, in the file's order; 1 or 2 runs
    # are too few for a verdict on any host
    lines = doc["study"]["paper_findings"]
    assert [l["statement"] for l in lines] == [f.quote for f in paper.stated(name)]
    assert lines, f"no finding stored for {name}"
    for l in lines:
        assert l["line"].startswith("paper found: ") and " / this host: " in l["line"]
        assert l["outcome"] == "cannot tell", l["line"]
        assert re.search(r"too few runs|not measured|placement", l["reason"]), l["reason"]


def test_log_x_panel_leaves_size_zero_out_of_the_drawing_not_the_data():
    from matplotlib.figure import Figure

    spec = {}
    for env in ("native", "vm"):
        for size in (0, 1, 8):
            spec[(env, "osu-latency", "", f"lat_{size}", "us", False)] = 1.0 + size
    fd = figure_data(studies.STUDIES.get("mpi-p2p").figure, analyse(_obs(spec), _envs(["native", "vm"]), "native"))
    (panel,) = [p for p in fd.panels if p.xlog and p.series]
    assert [p.x for p in panel.series[0].points] == [0, 1, 8]  # results.json keeps size 0
    ax = Figure().subplots()
    studyfig._draw_panel(ax, panel, [])
    drawn = [x for line in ax.lines for x in line.get_xdata()]
    assert drawn and min(drawn) == 1 and ax.get_xscale() == "log"


def test_one_point_gets_its_own_tick_and_log_axes_plain_labels():
    """A panel with one x (one communicating pair) shows that x as its only tick, not
    matplotlib's 0.96 ... 1.04 around it; message sizes read 1, 2, 4, 8 and a log latency axis
    0.5, 1, 2 (plain numbers, not 2^2 or 2 × 10^0)."""
    from matplotlib.figure import Figure

    spec = {}
    for env, scale in (("native", 1.0), ("vm", 4.0)):
        for size in (1, 2, 4, 8):
            spec[(env, "osu-latency", "", f"lat_{size}", "us", False)] = 0.6 * scale
        spec[(env, "osu-multi-lat", "pairs=1", "max_8", "us", False)] = 0.6 * scale
    fd = figure_data(studies.STUDIES.get("mpi-p2p").figure,
                     analyse(_obs(spec), _envs(["native", "vm"]), "native"))
    (pairs,) = [p for p in fd.panels if p.series and not p.xlog]
    assert {pt.x for s in pairs.series for pt in s.points} == {1}
    ax = Figure().subplots()
    studyfig._draw_panel(ax, pairs, [])
    assert list(ax.get_xticks()) == [1] and ax.get_xlim() == (0, 2)
    (sizes,) = [p for p in fd.panels if p.series and p.xlog]
    ax = Figure().subplots()
    studyfig._draw_panel(ax, sizes, [])
    fmt = ax.xaxis.get_major_formatter()
    assert [fmt(x, 0) for x in ax.get_xticks()] == ["1", "2", "4", "8"]
    assert ax.get_yscale() == "log"
    fmt = ax.yaxis.get_major_formatter()
    labels = [fmt(y, 0) for y in ax.get_yticks()]
    assert labels and all(re.fullmatch(r"[0-9.]+", t) for t in labels), labels
    assert "1" in labels and "2" in labels
    # a log axis whose limit reads 0 (bars drawn from 0, then made log) keeps matplotlib's ticks
    from vhpc.report.figures import log_ticks

    before = list(ax.get_yticks())
    log_ticks(ax, 0.0, 10.0)
    assert list(ax.get_yticks()) == before


def test_a_unit_in_a_panel_label_is_the_unit_its_metrics_declare():
    """"STREAM triad [MB/s]" over GB/s values misleads: every "[unit]" a study panel names must
    be the unit of each metric of the study's default benchmarks that the panel draws."""
    import fnmatch

    from vhpc import benchmarks

    topo = topology_2x2()
    wrong = []
    for name, st in studies.STUDIES.items():
        if st.figure is None or not st.figure.panels:
            continue
        try:
            default, _ = st.template(topo, False, {"executor": "slurm:nodes=2"})
        except studies.StudyError:
            continue
        for panel in st.figure.panels:
            m = re.search(r"\[([^\]]+?)(?: per node)?\]", panel.ylabel)
            if not m:
                continue
            assert ("per node" in panel.ylabel) == panel.per_node, panel  # y divided by nodes
            for b in {b.name for b in default if fnmatch.fnmatchcase(b.name, panel.bench)}:
                for metric in benchmarks.get(b).metrics:
                    same = {metric.unit, metric.unit.replace("us", "µs"),
                            metric.unit.replace("flop/s", "flops")}  # spellings of one unit
                    if re.fullmatch(panel.y, re.sub(r"<[^>]+>", "8", metric.name)) and \
                            m.group(1) not in same:
                        wrong.append((name, panel.ylabel, b, metric.name, metric.unit))
    assert wrong == [], wrong


def topology_2x2():
    from vhpc import topology

    return topology.from_synthetic("pack:2 numa:2 l3:1 core:2 pu:1")


def test_bars_hatch_tcg_points_only_and_cut_runaway_intervals():
    """x = environment, one series per metric (noise, pingpong): native's bar is not hatched,
    the TCG guest's is; an interval 13 times the bar (2 runs) does not flatten the bars."""
    from matplotlib.figure import Figure

    obs = [Observation(env, "noise", "", "detour_pct", "%", False, v, valid=True, warmup=False,
                       trial_id=i, session_index=None)
           for i, (env, v) in enumerate((("native", 1.0), ("native", 1.02), ("vm", 1.0), ("vm", 50.0)))]
    fd = figure_data(studies.STUDIES.get("noise").figure,
                     analyse(obs, _envs(["native", "vm"], tcg=("vm",)), "native"))
    (panel,) = fd.panels
    ax = Figure().subplots()
    studyfig._draw_panel(ax, panel, [])
    native_bar, vm_bar = ax.patches[:2]
    assert native_bar.get_hatch() is None and vm_bar.get_hatch() == "//"
    # vm: mean 25.5, t(0.975, 1) = 12.71, sd = 34.65: the interval reaches 25.5 + 311 = 337
    vm = panel.series[0].points[1]
    assert vm.high == pytest.approx(25.5 + 12.706 * 34.648 / 2 ** 0.5, rel=1e-3)
    assert 25.5 < ax.get_ylim()[1] < 337


def test_paper_dry_run_names_the_accelerator_the_probe_finds(tmp_path):
    """A host with /dev/kvm whose guests fall back to TCG (this one: nested kvm_pvm) must not
    be announced as "kvm"."""
    require_tool("qemu-system-x86_64")
    from vhpc.environments.vm import guestimage
    from vhpc.environments.vm.backends import qemu

    probe = qemu.probe_kvm(guestimage.find_kernel())
    proc = subprocess.run([sys.executable, "-m", "vhpc.cli", "paper", "001", "--repeats", "2",
                           "--dry-run", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = " ".join(proc.stdout.split())
    kind = "hardware virtualization" if probe.accel == "kvm" else "emulation"
    assert f"accelerator {probe.accel} ({kind})" in out
    assert "nothing was run" in out and not list(tmp_path.glob("*/results.json"))


def test_categories_in_their_natural_order_and_one_colour_per_environment():
    """Co-runner intensity reads low < medium < high, not alphabetically; an environment keeps
    its colour in every panel of a figure, the baseline's first, so a colour
    names one environment across panels."""
    from vhpc.analysis.figdata import FigureData, PanelData, Point, Series
    from vhpc.report import studyfig

    assert studyfig.natural_order(["high", "low", "medium"]) == ["low", "medium", "high"]
    assert studyfig.natural_order(["b", "zeta"]) == ["b", "zeta"]  # not all ordinal: as given

    def panel(labels):
        return PanelData("p", "x", "y", False, False, False, False, "",
                         [Series(l, [Point("low", 1.0, None, None, 3)]) for l in labels])

    fd = FigureData("003", "Fig. 5", "t", "native", [panel(["vm-same", "native"]),
                                                     panel(["native", "vm-other", "vm-same"])])
    colors = studyfig.series_colors(fd)
    assert colors["native"] == studyfig.COLORS[0]
    assert len(set(colors.values())) == 3


def test_a_sudden_drop_along_the_node_axis_is_a_line_with_its_cause():
    """Seed 004's native HPCCG fell from 660 to 170 Mflop/s per node at 2 nodes: a line says
    so with what vhpc knows (the host's load around the trials); a drop at a point whose ranks
    shared host CPUs is left to that line and the shading, not said twice."""
    from types import SimpleNamespace

    from vhpc.analysis.figdata import FigureData, PanelData, Point, Series
    from vhpc.report import paper

    pd = PanelData("HPCCG", "nodes", "Mflop/s per node", False, False, False, True, "Mflop/s",
                   [Series("native", [Point(1, 660.0, None, None, 3), Point(2, 170.0, None, None, 3),
                                      Point(3, 40.0, None, None, 3)])])
    pd.higher = {"mflops": True}
    ranks = [{"rank": 0, "node": "n1", "cpus": [0]}, {"rank": 1, "node": "n2", "cpus": [1]},
             {"rank": 2, "node": "n3", "cpus": [0]}]
    trials = [SimpleNamespace(environment="native", benchmark="hpccg", params="ranks=3", round=r,
                              status="done", applied={"ranks": ranks},
                              diagnostics=SimpleNamespace(loadavg_before=(7.5, 6.0, 5.0)))
              for r in range(2)]
    (line,) = paper.drop_lines(FigureData("004", "Fig. 6", "t", "native", [pd]), trials)
    assert "drops from 660 at 1 to 170 at 2" in line.statement and line.kind == "host"
    assert "load average reached 7.5" in line.reason
