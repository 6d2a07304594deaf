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
BENCH = "stream:n=2000000,ntimes=12,threads=1"  # ~2 s under TCG: sampled 6+ times while it runs
# a numactl that binds node 0 whatever it is asked: the planted mismatch
PLANT = "#!/bin/sh\nshift 2\nexec /usr/bin/numactl --cpunodebind=0 --membind=0 \"$@\"\n"
# One Python process in the guest runs both campaigns through vhpc's campaign room (spec,
# store, execute: what `vhpc compare` does before its report) and prints each one's trials:
# starting Python, and rendering a report, cost tens of seconds apiece under TCG.
CAMPAIGNS = """
import json, os, sys
from vhpc.campaign import execute as campaign
from vhpc.spec import parse as spec
from vhpc.store import Store

def run(out, envs, **kw):
    os.makedirs(out)
    s = spec.from_cli([sys.argv[1]], envs, repeats=1, warmup=0, **kw)
    store = Store(out + "/vhpc.db")
    cid = campaign.create(store, s)
    counts = campaign.execute(store, cid)
    print("VHPC-JSON", json.dumps({"counts": counts, "trials": [
        {"env": t.environment, "status": t.status, "error": t.error,
         "stderr": (t.stderr or "")[-500:],
         "applied": t.applied.model_dump() if t.applied else None} for t in store.trials(cid)]}),
        flush=True)

run("/tmp/good", ["native:name=n1,nodes=1", "native:name=m1,membind=1"], baseline="n1")
os.environ["PATH"] = "/tmp/plant:" + os.environ["PATH"]
run("/tmp/planted", ["native:name=n1,nodes=1"], strict_placement=True)
"""


def _in_guest(vm, timeout: float = 900.0) -> list[dict]:
    """Both campaigns' results, as printed by CAMPAIGNS in the guest: [good, planted]."""
    env = {"PYTHONPATH": str(REPO / "src"), "VHPC_CACHE": "/tmp/vhpc-cache"}
    script = (f"mkdir -p /tmp/plant && printf %s {shlex.quote(PLANT)} > /tmp/plant/numactl && "
              f"chmod +x /tmp/plant/numactl && exec {shlex.quote(sys.executable)} -c "
              f"{shlex.quote(CAMPAIGNS)} {shlex.quote(BENCH)}")
    r = vm.run(["sh", "-c", script], env, timeout=timeout)
    assert r.ok and r.error is None, (r.error, r.stdout[-2000:], r.stderr[-2000:])
    found = [json.loads(ln.split(" ", 1)[1]) for ln in r.stdout.splitlines()
             if ln.startswith("VHPC-JSON ")]
    assert len(found) == 2, (r.stdout[-2000:], r.stderr[-2000:])
    return found


def test_native_binding_to_node_1_inside_a_two_node_guest(kernels_built):
    vm = env_spec("vm", vcpus=2, memory=1024, numa=2).build()
    pid = None
    try:
        r0 = vm.run(["sh", "-c", "cat /sys/devices/system/node/node1/cpulist"], timeout=60)
        pid = vm.guest.pid
        assert r0.ok and r0.stdout.strip() == "1", r0
        good, planted = _in_guest(vm)
        if not all(t["applied"] and t["applied"]["page_locality"] for t in good["trials"]):
            # seen in two full runs here (3 and 4 workers beside it): a trial came back from
            # the loaded TCG guest without page locality (cause not found: the wrapper samples
            # numa_maps while the run lasts); once more, and the second must hold all below
            print("no page locality, running the campaigns once more:",
                  [(t["env"], t["applied"] and t["applied"].get("unverified")) for t in
                   good["trials"]])
            good, planted = _in_guest(vm)
        trials = good["trials"]
        assert good["counts"] == {"done": 2, "failed": 0}, good
        by_env = {t["env"]: t for t in trials}
        assert set(by_env) == {"n1", "m1"}
        for name, t in by_env.items():
            a = t["applied"]
            assert t["status"] == "done" and a["mismatches"] == [], t
            assert a["page_locality"] and a["page_locality"]["nodes"] == [1], a
            assert a["page_locality"]["on_nodes_mib"] >= 0.95 * a["page_locality"]["total_mib"]
            assert a["page_locality"]["total_mib"] >= 40  # the three 15 MiB arrays
            assert any(p["comm"] == "vhpc-stream" for p in a["processes"])
        assert all(p["cpus"] == "1" for p in by_env["n1"]["applied"]["processes"])
        assert planted["counts"] == {"done": 0, "failed": 1}, planted
        (t,) = planted["trials"]
        assert t["status"] == "failed" and "placement mismatch" in t["error"], t
        mism = " ".join(t["applied"]["mismatches"])
        assert "planned node(s) 1" in mism and "planned 1" in mism, mism
    finally:
        vm.close()
    assert pid not in qemu_pids()  # this guest's QEMU is gone (others may run other guests)
