"""What every page states beside the answer: a one-environment campaign's measured
values in the terminal and the HTML, each benchmark's problem size, this host's load around
the trials (kept in the store), and a finding for a timed region too short to time."""

from __future__ import annotations

import json
import re
import sqlite3

from conftest import run_cli

from vhpc.analysis import analyse
from vhpc.core.metrics import EnvInfo, Observation
from vhpc.report import pagefacts


def test_one_environment_stream_prints_its_bandwidth_and_the_page_says_what_was_measured(
        capsys, tmp_path, monkeypatch):
    """The README's first command: ``vhpc compare -b stream:n=2000000 -e native --repeats 2``
    prints STREAM copy's GB/s in 80 columns; its HTML shows the measured values with the
    problem size and this host's load (stored with each trial), and no comparison sentence."""
    monkeypatch.setenv("COLUMNS", "80")
    out = tmp_path / "out"
    rc, so, se = run_cli(capsys, "compare", "-b", "stream:n=2000000", "-e", "native",
                         "--repeats", "2", "--warmup", "0", "--out", out)
    assert rc == 0, se[-2000:]
    lines = so.splitlines()
    row = lines[lines.index("stream[n=2000000]") + 1]  # the label on its own line, then its rows
    # a half-width larger than the mean (two noisy runs) is flagged beside it
    assert re.search(r"^  copy_bw ↑\s+\d+(\.\d+)? ± \S+( \(interval wider than the mean\))?"
                     r"\s+2\s+GB/s", row), so
    assert "no comparison against" not in so and "This host: load average" in so
    (cid,) = [r[0] for r in sqlite3.connect(out / "vhpc.db").execute("SELECT id FROM campaigns")]
    loads = [json.loads(d) for (d,) in sqlite3.connect(out / "vhpc.db").execute(
        "SELECT diagnostics_json FROM trials")]
    assert all(len(d["loadavg_before"]) == 3 and len(d["loadavg_after"]) == 3 for d in loads)
    html = (out / cid / "report.html").read_text()
    assert "nothing to summarise" not in html and "The headline holds every metric" not in html
    assert "Measured in native" in html and "ratio [CI]" not in html
    # the size: what the label (stream[n=2000000]) does not say, threads as the run chose them
    assert re.search(r"size: [^<]*ntimes=10, threads=\d+ \(auto\)", html), html
    assert 'id="host-load"' in html
    assert re.search(r"copy_bw ↑</td><td>native</td>\s*<td class=\"num\">[\d.]+ ± [\d.]+"
                     r"( \(interval wider than the mean\))?</td>"
                     r"<td class=\"num\">2</td><td>GB/s</td>", html)


def test_problem_sizes_fill_in_the_declared_defaults():
    sizes = pagefacts.problem_sizes({"benchmarks": [{"name": "stream", "params": {"n": 4096}},
                                                    {"name": "no-such", "params": {"k": 1}}]})
    assert sizes["stream[n=4096]"]["n"] == "4096" and sizes["stream[n=4096]"]["threads"] == "auto"
    assert sizes["no-such[k=1]"] == {"k": "1"}


def _trial(env, params, stdout, status="done"):
    from types import SimpleNamespace

    return SimpleNamespace(environment=env, benchmark="hpccg", params=params, status=status,
                           stdout=stdout)


def test_hpccg_shows_the_grid_its_runs_chose_not_nx_0():
    """nx = ny = nz = 0 means "sized from the cache where it runs": the page shows the edge
    each environment's trials printed (a guest with a smaller cache gets a smaller grid), and
    one text per sweep that leaves out what the label and the sweep show."""
    spec = {"benchmarks": [{"name": "hpccg", "params": {"ranks": 1}},
                           {"name": "hpccg", "params": {"ranks": 2}}]}
    line = "VHPC-RESULT mflops=1 nx={e} ny={e} nz={e} n_auto=1 ranks={r} threads=1 valid=1\n"
    trials = [_trial("native", "ranks=1", line.format(e=72, r=1)),
              _trial("vm", "ranks=1", line.format(e=57, r=1)),
              _trial("native", "ranks=2", line.format(e=57, r=2)),
              _trial("vm", "ranks=2", line.format(e=57, r=2)),
              _trial("vm", "ranks=2", "VHPC-RESULT nx=<b>x</b>\n", status="failed")]
    sizes = pagefacts.problem_sizes(spec, trials)
    assert sizes["hpccg[ranks=1]"]["nx"] == "72 native, 57 vm (auto)"
    assert sizes["hpccg[ranks=2]"]["nz"] == "57 (auto)"
    assert sizes["hpccg[ranks=2]"]["max_iter"] == "149" and sizes["hpccg[ranks=2]"]["ranks"] == "2"
    # no trial printed it: auto, never 0
    assert pagefacts.problem_sizes(spec)["hpccg[ranks=1]"]["nx"] == "auto"
    text = pagefacts.size_text([("ranks=1", sizes["hpccg[ranks=1]"]),
                                ("ranks=2", sizes["hpccg[ranks=2]"])], {"ranks"})
    assert text.startswith("nx=ny=nz: 72 native, 57 vm (auto) at ranks=1; 57 (auto) at ranks=2, "
                           "max_iter=149"), text
    assert "nx=0" not in text and "ranks" not in text.split("at ranks")[0]


def test_a_printed_value_that_is_not_plain_is_not_shown():
    spec = {"benchmarks": [{"name": "hpccg", "params": {}}]}
    trials = [_trial("native", "", "VHPC-RESULT nx=<script> ny=1e99999999999999999999999 nz=40\n")]
    sizes = pagefacts.problem_sizes(spec, trials)["hpccg"]
    assert sizes["nx"] == "auto" and sizes["ny"] == "auto" and sizes["nz"] == "40 (auto)"


def test_a_timed_region_under_100_ms_is_a_finding():
    envs = {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "kvm")}
    obs = [Observation(env, bench, "class=S", "time", "s", False, t * (1 + 0.01 * i), True,
                       False, i)
           for env in envs for i in range(3)
           for bench, t in (("npb-ep", 0.002), ("npb-cg", 0.5))]
    (f,) = pagefacts.short_region_findings(analyse(obs, envs, "native"))
    assert f.kind == "short-region" and f.scope == "npb-ep[class=S]" and f.level == "info"
    assert "under 100 ms" in f.message and "2 ms in native" in f.message


def test_a_gromacs_timed_window_under_2_s_is_a_finding():
    """GROMACS's window has its own floor (2 s): 1.2 s is a finding there, while a
    1.2 s NPB region is long enough by the general 100 ms floor."""
    envs = {"native": EnvInfo("native", "native"), "vm": EnvInfo("vm", "vm", "kvm")}
    obs = [Observation(env, bench, "size=6.0,steps=200", metric, "s", False,
                       t * (1 + 0.01 * i), True, False, i)
           for env in envs for i in range(3)
           for bench, metric, t in (("gromacs", "timed_window", 1.2), ("npb-ep", "time", 1.2))]
    (f,) = pagefacts.short_region_findings(analyse(obs, envs, "native"))
    assert f.scope == "gromacs[size=6.0,steps=200]" and "under 2 s" in f.message
    assert f.level == "warn"  # unfolded on the page, unlike the general 100 ms note
    assert "timed_window 1.21 s in native" in f.message  # mean of 1.2, 1.212, 1.224


def test_one_environment_at_80_columns_keeps_labels_and_numbers_whole():
    """Issue 42's "no cell cut": a long label (gromacs[ranks=2,size=6.0,steps=300]) on its own
    line, never split across two; a sweep's smallest … largest point on two lines, each number
    whole."""
    from rich.console import Console

    from vhpc.report.terminal import render_table

    obs = []
    for i in range(3):
        for b, p, m, u, hib, v in (
                ("gromacs", "ranks=2,size=6.0,steps=300", "ns_per_day", "ns/day", True, 12.34),
                ("gromacs", "ranks=2,size=6.0,steps=300", "wall_s", "s", False, 3.21),
                ("osu-latency", "max_size=65536", "lat_8", "us", False, 1.2345),
                ("osu-latency", "max_size=65536", "lat_65536", "us", False, 123456789.5)):
            obs.append(Observation("native", b, p, m, u, hib, v * (1 + 0.01 * i), True, False,
                                   len(obs)))
    a = analyse(obs, {"native": EnvInfo("native", "native")}, "native")
    for width, every in ((80, False), (80, True), (60, True)):
        console = Console(record=True, width=width, color_system=None)
        render_table(a, console=console, detail=every)
        lines = console.export_text().splitlines()
        assert max(map(len, lines)) <= width, "\n".join(lines)
        assert "gromacs[ranks=2,size=6.0,steps=300]" in lines
        assert ("  wall_s ↓" in "\n".join(lines)) == every
        # every number printed whole: 1.247e+08 (64 KiB) never split over two lines
        assert re.search(r"1\.247e\+08 \(64 KiB\)", "\n".join(lines)), "\n".join(lines)
