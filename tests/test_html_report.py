"""The report room: terminal table, self-contained HTML (checked in headless Chromium), CSV
and JSON exports."""

import csv
import json
import re
import shutil
import subprocess

import pytest
from rich.console import Console

from vhpc import analysis
from vhpc.model import EnvInfo, Observation
from vhpc.report import export, html, terminal

ENVS = {"native": EnvInfo("native", "native", None, {"cpu_model": "X", "host_kernel": "6.1"}),
        "vm": EnvInfo("vm", "vm", "tcg", {"cpu_model": "X", "qemu_version": "7.2"})}


def observations():
    out, tid = [], 0
    for env, scale in (("native", 1.0), ("vm", 0.5)):
        for i, v in enumerate([10.0, 10.4, 9.8, 10.1, 10.2]):
            for metric, higher, val in (("triad_bw", True, v * scale), ("latency_us", False, v / scale)):
                out.append(Observation(env, "stream", "n=1000", metric, "GB/s" if higher else "us",
                                       higher, val, True, False, tid, i,
                                       session_index=i if env == "vm" else None))
            tid += 1
    out.append(Observation("vm", "stream", "n=1000", "triad_bw", "GB/s", True, 99.0, False, False, tid))
    return out


@pytest.fixture
def result():
    return analysis.analyse(observations(), ENVS, "native")


def test_terminal_table_marks_tcg_and_verdicts(result):
    con = Console(record=True, width=200)
    terminal.render_table(result, con, title="t")
    text = con.export_text()
    assert "TCG" in text and "triad_bw" in text and "latency_us" in text
    assert text.count("slower") >= 2  # half the bandwidth, double the latency


def test_html_is_self_contained_with_figures_and_fingerprints(result, tmp_path):
    path = html.write_html(result, observations(), tmp_path / "r.html", {"id": "c1", "command": "vhpc x"})
    text = path.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?https?://""", text)
    assert "<svg" in text and "qemu_version" in text and "TCG emulation" in text


def test_csv_and_json_round_trip(result, tmp_path):
    obs = observations()
    s_path, c_path = export.write_csv(result, obs, tmp_path / "s.csv", tmp_path / "c.csv")
    rows = list(csv.DictReader(s_path.open()))
    assert len(rows) == len(obs)
    vm_rows = [r for r in rows if r["environment"] == "vm"]
    assert all(r["accel"] == "tcg" and r["emulated"] in ("True", "true", "1") for r in vm_rows)
    assert sorted(float(r["value"]) for r in rows if r["metric"] == "triad_bw") == \
        sorted(o.value for o in obs if o.metric == "triad_bw")
    comps = list(csv.DictReader(c_path.open()))
    assert {c["metric"] for c in comps} == {"triad_bw", "latency_us"}
    doc = json.loads(export.write_json(result, obs, tmp_path / "r.json").read_text())
    assert len(doc["samples"]) == len(obs) and len(doc["comparisons"]) == 2


@pytest.mark.browser
def test_report_renders_in_headless_chromium(result, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        pytest.skip("chromium is not installed (make test installs it)")
    path = html.write_html(result, observations(), tmp_path / "r.html", {"id": "c1"})
    out = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=5000", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    ok = re.search(r'data-figures-ok="(\d+)"', out.stdout)
    total = re.search(r'data-figures-total="(\d+)"', out.stdout)
    assert ok and total, "the report's load script did not run"
    assert int(total.group(1)) > 0 and ok.group(1) == total.group(1)
    console_errors = [line for line in out.stderr.splitlines()
                      if "CONSOLE" in line and ("Uncaught" in line or "Error" in line)]
    assert not console_errors, console_errors
