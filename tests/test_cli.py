"""The vhpc command end to end on this host (native + a real VM, tiny sizes)."""

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

VHPC = [sys.executable, "-m", "vhpc.cli"]


def vhpc(*args, **kw):
    return subprocess.run(VHPC + list(args), capture_output=True, text=True, **kw)


def test_bad_flags_give_one_line_errors(tmp_path):
    r = vhpc("compare", "-b", "nosuch", "-e", "native", "--out", str(tmp_path))
    assert r.returncode == 2
    assert r.stderr.strip().startswith("vhpc: error:") and "unknown benchmark 'nosuch'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = vhpc("compare", "-b", "stream", "-e", "native", "-e", "vm:vcpus=64", "--out", str(tmp_path))
    assert r.returncode == 2 and "use fewer vcpus or pin=none" in r.stderr
    assert not (tmp_path / "vhpc.db").exists()  # refused before a store was created
    r = vhpc("report", "nope", "--out", str(tmp_path))
    assert r.returncode == 2 and "no vhpc store" in r.stderr
    from vhpc.store import Store

    Store(tmp_path / "vhpc.db").close()
    r = vhpc("report", "nope", "--out", str(tmp_path))
    assert r.returncode == 2 and "no campaign 'nope'" in r.stderr
    assert not list(tmp_path.glob("*/report.html"))


def test_commands_that_compute_no_statistic_do_not_import_scipy(tmp_path):
    """``vhpc list`` and a one-line error start without scipy.stats (about 1 s of a 2 s start:
    core.stats imports it on first use)."""
    code = ("import sys; from vhpc import cli\n"
            "for argv in (['list', 'campaigns', '--out', sys.argv[1]],\n"
            "             ['compare', '-b', 'nosuch', '-e', 'native', '--out', sys.argv[1]]):\n"
            "    try: cli.main(argv)\n"
            "    except SystemExit: pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('scipy.stats')))")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "out")], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout


def test_no_report_stores_the_campaign_and_report_writes_it_later(tmp_path, kernels_built):
    """``--no-report`` stores every trial, writes no report (nor draws: matplotlib is never
    imported) and prints the ``vhpc report`` command that writes it from the store."""
    out = tmp_path / "out"
    code = ("import sys; from vhpc import cli\n"
            "rc = cli.main(sys.argv[1:])\n"
            "print('MPL', 'matplotlib' in sys.modules, 'RC', rc)")
    r = subprocess.run([sys.executable, "-c", code, "compare", "-b", "stream:n=20000,ntimes=3",
                        "-e", "native", "--repeats", "2", "--warmup", "0", "--no-report",
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("MPL False RC 0"), r.stdout + r.stderr
    cid = sqlite3.connect(out / "vhpc.db").execute("SELECT id FROM campaigns").fetchone()[0]
    assert f"vhpc report {cid} --out {out}" in " ".join(r.stdout.split())
    assert not list(out.rglob("report.html")) and not list(out.rglob("results.json"))
    rows = _done(out / "vhpc.db")
    assert len(rows) == 2 and all(row[2] == "done" for row in rows)
    later = vhpc("report", cid, "--out", str(out))
    assert later.returncode == 0, later.stderr[-2000:]
    doc = json.loads((out / cid / "results.json").read_text())
    assert len({s["trial_id"] for s in doc["samples"]}) == 2
    assert (out / cid / "report.html").stat().st_size > 0


def test_list_benchmarks_shows_the_quick_suite():
    r = vhpc("list", "benchmarks")
    assert r.returncode == 0
    for name in ("stream", "randomaccess", "pingpong", "noise", "pagefault", "triad_bw", "GUP/s"):
        assert name in r.stdout


@pytest.mark.vm
def test_compare_native_and_vm_end_to_end(tmp_path, kernels_built, no_qemu_leak):
    r = vhpc("compare", "-b", "stream:n=50000,ntimes=3", "-b", "pagefault:mib=4,reps=1",
             "-e", "native", "-e", "vm:memory=512", "--repeats", "2", "--warmup", "1",
             "--out", str(tmp_path), env={**os.environ, "COLUMNS": "200"}, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # the headline names each benchmark's primary metric (the per-metric table above it is
    # printed only when it fits the width, which depends on the digits measured)
    assert "stream[n=50000,ntimes=3] · copy_bw" in r.stdout and "private_us" in r.stdout
    assert "TCG" in r.stdout or "kvm" in r.stdout.lower()
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert (folder / "report.html").stat().st_size > 10_000
    doc = json.loads((folder / "results.json").read_text())
    envs = {s["environment"] for s in doc["samples"]}
    assert envs == {"native", "vm"}
    measured = [s for s in doc["samples"] if not s["warmup"]]
    assert len(measured) == 2 * 2 * (4 + 2)  # rounds × envs × metrics
    for s in doc["samples"]:
        if s["environment"] == "vm":
            assert s["accel"] in ("kvm", "tcg") and s["emulated"] == (s["accel"] == "tcg")
    db = sqlite3.connect(tmp_path / "vhpc.db")
    applied = [json.loads(a) for (a,) in db.execute(
        "SELECT applied_json FROM trials WHERE environment='vm'")]
    assert all([v["allowed"] for v in a["vcpus"]] == [[0], [1]] for a in applied)
    fp = json.loads(db.execute("SELECT fingerprint_json FROM environments WHERE name='vm'").fetchone()[0])
    assert fp["qemu_version"] and fp["guest_kernel"] and fp["accel"] in ("kvm", "tcg")
    r2 = vhpc("report", folder.name, "--out", str(tmp_path), "--json", str(tmp_path / "again.json"))
    assert r2.returncode == 0
    again = json.loads((tmp_path / "again.json").read_text())
    assert again["comparisons"] == doc["comparisons"]


def _done(db_path):
    try:
        db = sqlite3.connect(db_path, timeout=5)
        rows = db.execute("SELECT id, environment, status, started FROM trials ORDER BY seq").fetchall()
        db.close()
        return rows
    except sqlite3.Error:
        return []


def test_plan_on_the_seed_opteron_prints_placement_and_libvirt_xml():
    r = vhpc("plan", "--topology", "pack:4 numa:1 l3:1 core:4 pu:1", "--vcpus", "16",
             "--policy", "span:4", "--numa", "mirror", "--memory", "4096")
    assert r.returncode == 0, r.stderr
    import re
    import xml.etree.ElementTree as ET

    xml = r.stdout[r.stdout.index("<domain>"):r.stdout.index("</domain>") + len("</domain>")]
    dom = ET.fromstring(xml)
    pins = {int(e.get("vcpu")): e.get("cpuset") for e in dom.iter("vcpupin")}
    assert pins == {v: str(v) for v in range(16)}  # socket k holds vCPUs 4k..4k+3
    cells = {int(c.get("id")): (c.get("cpus"), c.get("memory")) for c in dom.iter("cell")}
    assert cells == {0: ("0-3", "1024"), 1: ("4-7", "1024"), 2: ("8-11", "1024"), 3: ("12-15", "1024")}
    memnodes = {int(m.get("cellid")): m.get("nodeset") for m in dom.iter("memnode")}
    assert memnodes == {0: "0", 1: "1", 2: "2", 3: "3"}
    assert re.search(r"memory-backend-ram,id=m3,size=1024M,host-nodes=3,policy=bind", r.stdout)


def test_plan_errors_are_one_line():
    r = vhpc("plan", "--topology", "pack:2 numa:1 l3:1 core:4 pu:1", "--vcpus", "4",
             "--policy", "span:3")
    assert r.returncode == 2 and r.stderr.startswith("vhpc: error:")
    assert len(r.stderr.strip().splitlines()) == 1
    r = vhpc("plan", "--topology", "pack:x", "--vcpus", "1")
    assert r.returncode == 2 and "vhpc: error:" in r.stderr


def test_docs_benchmarks_md_matches_the_code():
    from vhpc.benchmarks import REGISTRY
    from vhpc.benchmarks.catalog import render_markdown

    doc = (Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md").read_text()
    assert doc == render_markdown(list(REGISTRY.values())), \
        "docs/benchmarks.md is stale: run 'vhpc list benchmarks --markdown > docs/benchmarks.md'"


def test_a_missing_guest_kernel_is_a_one_line_error_before_anything_runs(tmp_path):
    r = vhpc("compare", "-b", "noise", "-e", "native", "-e", "vm:kernel=/boot/nope", "--out", str(tmp_path))
    assert r.returncode == 2 and "guest kernel /boot/nope does not exist" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("vhpc: error:")
    # nothing ran and nothing was planned: no campaign, no trial, not even the native one
    db = tmp_path / "vhpc.db"
    if db.exists():
        con = sqlite3.connect(db)
        try:
            assert con.execute("SELECT COUNT(*) FROM campaigns").fetchone() == (0,)
            assert con.execute("SELECT COUNT(*) FROM trials").fetchone() == (0,)
        finally:
            con.close()
