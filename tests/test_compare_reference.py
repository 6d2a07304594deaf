"""bench/compare_reference.py without reference codes: its command-line errors, the direction
of its ratios, its parsers, the CPU-load sampler and the block it writes into a document."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "compare_reference.py"


@pytest.fixture(scope="module")
def cr():
    spec = importlib.util.spec_from_file_location("compare_reference", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["compare_reference"] = mod  # dataclasses look their module up there
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop("compare_reference", None)


@pytest.mark.parametrize("args", [["/nonexistent-refdir"], [".", "--repeats", "x"],
                                  [".", "--quiet", "2"], [".", "--cpu", "9999"]])
def test_bad_input_is_one_line_and_exit_2(args):
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_ratio_below_one_means_vhpc_slower(cr):
    rate = cr.Case("r", "MB/s", True, (0,), [], [], None, None)
    latency = cr.Case("l", "us", False, (0,), [], [], None, None)
    assert cr.ratio(rate, 100.0, 90.0) == pytest.approx(0.9)  # vhpc 90 MB/s vs 100
    assert cr.ratio(latency, 1.0, 1.25) == pytest.approx(0.8)  # vhpc 1.25 us vs 1.0


def test_vhpc_result_parser_reads_value_and_valid_flag(cr):
    parse = cr.vhpc_result("lat_8")
    assert parse("noise\nVHPC-RESULT test=latency lat_8=0.125 valid=1\n") == (0.125, True)
    assert parse("VHPC-RESULT lat_8=3 valid=0\n") == (3.0, False)
    with pytest.raises(RuntimeError, match="no lat_8= in vhpc's result line"):
        parse("VHPC-RESULT other=1 valid=1\n")


def test_busy_share_of_every_cpu_is_a_fraction(cr):
    times = cr.cpu_times()
    assert times and all(0 <= busy <= total for busy, total in times.values())
    share = cr.busy(tuple(times), window=0.05)
    assert 0.0 <= share <= 1.0


def test_wait_quiet_gives_up_after_the_bound(cr):
    # a limit nothing can be below (busy share < 0 is impossible): the wait runs out, False
    assert cr.wait_quiet((0,), -1.0, 0.0) is False


def test_write_block_replaces_only_its_clocks_block(cr, tmp_path):
    doc = tmp_path / "f.md"
    wall, cpu = cr.markers("wall"), cr.markers("cpu")
    doc.write_text(f"head\n{wall[0]}\nold\n{wall[1]}\nmid\n{cpu[0]}\nkeep\n{cpu[1]}\ntail\n")
    cr.write_block(doc, "new table\n", "wall")
    assert doc.read_text() == (f"head\n{wall[0]}\nnew table\n{wall[1]}\nmid\n{cpu[0]}\nkeep\n"
                               f"{cpu[1]}\ntail\n")
    plain = tmp_path / "g.md"
    plain.write_text("no markers\n")
    with pytest.raises(SystemExit):
        cr.write_block(plain, "x\n", "wall")


def test_the_threaded_team_runs_as_a_campaign_runs_the_benchmark(cr):
    one, two = cr.team(1, 1, "npb-cg"), cr.team(2, 1, "npb-cg")
    assert one.prefix[:3] == ("taskset", "-c", "1") and dict(one.env)["OMP_NUM_THREADS"] == "1"
    # a campaign on 2 CPUs: 2 threads spread, nothing pinned by the launch line
    assert dict(two.env) == {"OMP_NUM_THREADS": "2", "OMP_PROC_BIND": "spread"}
    assert "taskset" not in two.prefix and two.cpus == (0, 1) and two.layout == "2 threads"


def test_median_interval_covers_the_true_median_at_least_at_its_rate(cr):
    # 9 interleaved pairs whose ratios scatter 5% around a true median of 0.95, seeded: the 95%
    # percentile-bootstrap interval of the median is conservative at 9 pairs (about 98%)
    rng = np.random.default_rng(62)
    trials = 200
    hits = sum(lo <= 0.95 <= hi for lo, hi in
               (cr.median_interval(list(0.95 * np.exp(rng.normal(0, 0.05, 9))))
                for _ in range(trials)))
    assert hits / trials >= 0.93
    assert all(np.isnan(cr.median_interval([1.0])))  # one pair: no interval


def test_table_rows_say_threads_band_and_whether_the_median_is_in_it(cr):
    case = cr.Case("NPB CG A", "Mop/s", True, (0, 1), [], [], None, None, threads=2,
                   layout="2 threads", pairs=[(100.0, 95.0), (100.0, 85.0), (100.0, 96.0)],
                   verified=[3, 3])
    row = next(line for line in cr.table([case], "cmd").splitlines()
               if line.startswith("| NPB CG A"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "2 threads" and cells[4] == "0.950"  # median of 0.95, 0.85, 0.96
    assert cells[8] == "0.90-1.10" and cells[9] == "yes"


def test_write_to_a_file_without_the_blocks_markers_is_refused_before_anything_runs(tmp_path):
    doc = tmp_path / "f.md"
    doc.write_text("<!-- compare_reference:begin -->\n<!-- compare_reference:end -->\n")
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--write", str(doc),
                           "--block", "mpi"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "compare_reference:mpi:begin" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
