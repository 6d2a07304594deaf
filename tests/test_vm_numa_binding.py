"""Multi-node binding proven where it can run: vhpc itself, inside a guest with 2 virtual NUMA
nodes, binds native trials to node 1 and reads them back (CPUs, numa_maps pages), and a planted
mismatch (numactl binding node 0 while the plan says 1) is reported and fails under
--strict-placement.  The guest sees the host root read-only, so the checkout this test runs
from, its Python and the built kernels are there; results go to the guest's own /tmp."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from conftest import qemu_pids
from vhpc.spec.parse import env as env_spec

pytestmark = pytest.mark.vm

REPO = Path(__file__).resolve().parents[1]
BENCH = "stream:n=2000000,ntimes=20,threads=1"  # seconds under TCG: sampled many times while it runs
DUMP = ("import json,sys; from vhpc.store import Store; s=Store(sys.argv[1]); "
        "c=s.campaigns()[0]['id']; print('VHPC-JSON', json.dumps([{'env': t.environment, "
        "'status': t.status, 'error': t.error, 'stderr': (t.stderr or '')[-500:], "
        "'applied': t.applied.model_dump() if t.applied else None} for t in s.trials(c)]))")
# a numactl that binds node 0 whatever it is asked: the planted mismatch
PLANT = "#!/bin/sh\nshift 2\nexec /usr/bin/numactl --cpunodebind=0 --membind=0 \"$@\"\n"


def _mpl_cache() -> str:
    """The host's matplotlib cache (font list built here if missing).  The guest gets a copy
    in its own /tmp: under TCG, rebuilding the font list costs each vhpc process seconds."""
    import matplotlib
    import matplotlib.font_manager  # noqa: F401 - builds the font list

    return matplotlib.get_cachedir()


def _in_guest(vm, script: str, timeout: float = 900.0):
    env = {"PYTHONPATH": str(REPO / "src"), "VHPC_CACHE": "/tmp/vhpc-cache", "COLUMNS": "200",
           "MPLCONFIGDIR": "/tmp/mpl"}
    script = f"[ -d /tmp/mpl ] || cp -r {shlex.quote(_mpl_cache())} /tmp/mpl; {script}"
    r = vm.run(["sh", "-c", script], env, timeout=timeout)
    assert r.returncode is not None and r.error is None, (r.error, r.stderr[-2000:])
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("VHPC-JSON ")), None)
    assert line, (r.stdout[-2000:], r.stderr[-2000:])
    return r, json.loads(line.split(" ", 1)[1])


def _vhpc(out: str, *args: str) -> str:
    py = shlex.quote(sys.executable)
    return (f"{py} -m vhpc.cli compare -b {BENCH} {' '.join(args)} --repeats 1 --warmup 0 "
            f"--out {out}; echo rc=$?; {py} -c {shlex.quote(DUMP)} {out}/vhpc.db")


def test_native_binding_to_node_1_inside_a_two_node_guest(kernels_built):
    vm = env_spec("vm", vcpus=2, memory=1024, numa=2).build()
    pid = None
    try:
        r0 = vm.run(["sh", "-c", "cat /sys/devices/system/node/node1/cpulist"], timeout=60)
        pid = vm.guest.pid
        assert r0.ok and r0.stdout.strip() == "1", r0
        _, trials = _in_guest(vm, _vhpc("/tmp/good", "-e native:name=n1,nodes=1",
                                        "-e native:name=m1,membind=1", "--baseline n1"))
        by_env = {t["env"]: t for t in trials}
        assert set(by_env) == {"n1", "m1"}
        for name, t in by_env.items():
            a = t["applied"]
            assert t["status"] == "done" and a["mismatches"] == [], t
            assert a["page_locality"] and a["page_locality"]["nodes"] == [1], t
            assert a["page_locality"]["on_nodes_mib"] >= 0.95 * a["page_locality"]["total_mib"]
            assert a["page_locality"]["total_mib"] >= 40  # the three 15 MiB arrays
            assert any(p["comm"] == "vhpc-stream" for p in a["processes"])
        assert all(p["cpus"] == "1" for p in by_env["n1"]["applied"]["processes"])
        r, planted = _in_guest(vm, "mkdir -p /tmp/plant && printf %s "
                               f"{shlex.quote(PLANT)} > /tmp/plant/numactl && chmod +x "
                               "/tmp/plant/numactl && export PATH=/tmp/plant:$PATH && "
                               + _vhpc("/tmp/planted", "-e native:name=n1,nodes=1",
                                       "--strict-placement"))
        assert "rc=1" in r.stdout  # a campaign with failed trials
        (t,) = planted
        assert t["status"] == "failed" and "placement mismatch" in t["error"], t
        mism = " ".join(t["applied"]["mismatches"])
        assert "planned node(s) 1" in mism and "planned 1" in mism, mism
    finally:
        vm.close()
    assert pid not in qemu_pids()  # this guest's QEMU is gone (others may run other guests)
