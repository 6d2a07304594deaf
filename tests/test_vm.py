"""The vm environment on this host: a real QEMU guest (TCG here, KVM where usable).

Boots are slow under TCG (~5 s), so one module-scoped session serves most tests.
"""

import os
import time

import pytest

from vhpc.benchmarks import get
from vhpc.benchmarks.base import RunContext
from vhpc.campaign.execute import outcome
from vhpc.environments.vm import guestimage
from vhpc.environments.vm.backends import qemu
from vhpc.core.errors import HostError
from vhpc.spec.parse import env as env_spec

from conftest import qemu_pids

pytestmark = pytest.mark.vm


def _pins(pin, vcpus, host_cpus):
    """vCPU -> host CPUs of the ``pin`` option on a host with ``host_cpus`` (None: float)."""
    policy = env_spec("vm", vcpus=vcpus, pin=pin).options.resolved_policy(tuple(host_cpus))
    return None if policy.kind == "float" else {v[0]: set(c) for v, c, _ in policy.vcpu_map}


def test_pinning_option_resolution():
    assert _pins("auto", 2, [0, 1]) == {0: {0}, 1: {1}}
    assert _pins("1,0", 2, [0, 1]) == {0: {1}, 1: {0}}
    assert _pins("none", 4, [0, 1]) is None
    with pytest.raises(HostError, match="use fewer vcpus or pin=none"):
        _pins("auto", 3, [0, 1])
    with pytest.raises(HostError, match="lists 1 host CPUs for 2 vCPUs"):
        _pins("0", 2, [0, 1])
    with pytest.raises(HostError, match=r"this host has no CPU 7"):
        _pins("0,7", 2, [0, 1])


def test_vmlinux_is_unpacked_elf_and_initramfs_holds_modules():
    kernel = guestimage.find_kernel()
    vmlinux = guestimage.unpack_vmlinux(kernel)
    assert vmlinux.read_bytes()[:4] == b"\x7fELF"
    mods = guestimage._module_closure(kernel, guestimage.GUEST_MODULES)
    names = [m.name.split(".ko")[0] for m in mods]
    assert names.index("virtio") < names.index("virtio_pci")
    assert names.index("9pnet") < names.index("9pnet_virtio") < names.index("9p")
    assert guestimage.build_initramfs(kernel).stat().st_size > 100_000


def test_kvm_probe_decides_and_explains():
    probe = qemu.probe_kvm()
    assert probe.accel in ("kvm", "tcg") and probe.reason
    if not os.path.exists("/dev/kvm"):
        assert probe.accel == "tcg" and "/dev/kvm" in probe.reason


@pytest.fixture(scope="module")
def vm():
    before = qemu_pids()
    env = env_spec("vm", vcpus=2, memory=512, pin="auto").build()
    env.start()
    yield env
    env.close()
    left = qemu_pids() - before
    assert not left, f"QEMU left running: {left}"


def test_guest_runs_host_binaries_with_its_own_cpus(vm):
    r = vm.run(["sh", "-c", "nproc; uname -r; test -w /tmp && echo tmp-writable"], timeout=60)
    assert r.ok, r
    lines = r.stdout.split()
    assert lines[0] == "2"
    assert lines[1] == guestimage.find_kernel().release
    assert "tmp-writable" in lines


def test_vcpu_pinning_is_applied_and_read_back(vm):
    r = vm.run(["true"], timeout=60)
    vcpus = r.applied.vcpus
    assert [v.allowed for v in vcpus] == [[0], [1]]
    for v in vcpus:  # the kernel reports where the vCPU thread really ran
        assert v.last_cpu in v.allowed
    for v in vcpus:
        with open(f"/proc/{vm.guest.pid}/task/{v.thread}/status") as f:
            allowed = [l for l in f if l.startswith("Cpus_allowed_list")][0].split()[1]
        assert allowed == str(v.vcpu)


def test_session_index_counts_trials_in_a_boot(vm):
    a = vm.run(["true"], timeout=60).session_index
    b = vm.run(["true"], timeout=60).session_index
    assert b == a + 1


def test_paused_guest_uses_no_cpu(vm):
    vm.pause()
    try:
        ticks = lambda: sum(int(x) for x in open(f"/proc/{vm.guest.pid}/stat").read().rsplit(")", 1)[1].split()[11:13])
        t0 = ticks()
        time.sleep(1.0)
        used = ticks() - t0
        status = vm.guest.qmp.cmd("query-status")
        assert status["status"] == "paused"
        assert used < 30  # clock ticks (1/100 s): under 0.3 s of CPU in 1 s; a running TCG guest idles higher
    finally:
        vm.resume()
    assert vm.guest.qmp.cmd("query-status")["status"] == "running"


def test_trial_timeout_kills_the_command_not_the_guest(vm):
    r = vm.run(["sleep", "30"], timeout=1)
    assert r.timed_out and r.returncode is None and r.error is None
    assert vm.run(["true"], timeout=60).ok


def test_two_benchmarks_run_in_the_guest_and_parse(vm, kernels_built):
    ctx = RunContext(kernels_built, vm.vcpus)
    for name, overrides in (("stream", {"n": 100000, "ntimes": 3}), ("pingpong", {"iters": 50})):
        bench = get(name)
        params = bench.resolve(overrides)
        r = vm.run(bench.command(params, ctx), bench.environ(params, ctx), timeout=300)
        status, samples, error = outcome(bench, params, r)
        assert status == "done", (error, r.stderr[-500:])
        assert all(s.valid and s.value > 0 for s in samples)


def test_hung_guest_is_killed_and_reported_with_console(vm, monkeypatch):
    import vhpc.environments.vm.environment as vmmod

    monkeypatch.setattr(vmmod, "HANG_GRACE", 2.0)
    old_pid = vm.guest.pid
    vm.guest.qmp.cmd("stop")  # the guest stops answering: as a hung guest would
    vm.guest.resume = lambda: None  # keep it stopped for this trial
    r = vm.run(["true"], timeout=1)
    assert r.error and "guest failed during the trial" in r.error
    assert r.returncode is None
    assert vm.guest is None
    with pytest.raises(ProcessLookupError):
        os.kill(old_pid, 0)
    r = vm.run(["true"], timeout=60)  # the next trial boots a fresh session
    assert r.ok and r.session_index == 0


@pytest.mark.parametrize("policy,numa,vcpus", [("spread", 2, 2), ("float", 4, 4)])
def test_guest_numa_nodes_match_the_plan_and_memory_is_read_back(policy, numa, vcpus, no_qemu_leak):
    with env_spec("vm", vcpus=vcpus, memory=512, policy=policy, numa=numa).build() as env:
        r = env.run(["numactl", "-H"], timeout=120)
        assert r.ok, r
        assert f"available: {numa} nodes (0-{numa - 1})" in r.stdout
        for i in range(numa):
            assert f"node {i} cpus: {i}\n" in r.stdout
        applied = r.applied
        assert [g.cpus for g in applied.guest_numa] == [str(i) for i in range(numa)]
        assert applied.mismatches == []
        mem = applied.memory
        assert sum(mem.node_mib.values()) > 50  # the guest's RAM is resident somewhere
        policies = {m.policy for m in mem.mappings}
        if policy == "spread":  # guest RAM backends are bound to host node 0
            assert "bind:0" in policies


def test_cold_warm_campaign_records_session_indices(tmp_path, kernels_built, no_qemu_leak):
    from vhpc.campaign import execute as campaign
    from vhpc.spec import parse as spec
    from vhpc.store import Store

    s = spec.from_cli(["pagefault:mib=2,reps=1"], ["native", "vm:memory=512"], repeats=2,
                      warmup=0, protocol="cold-warm", session_trials=2)
    store = Store(tmp_path / "vhpc.db")
    cid = campaign.create(store, s)
    campaign.execute(store, cid)
    rows = [(t.environment, t.session_index, t.applied.session if t.environment == "vm" else None)
            for t in store.trials(cid)]
    vm_rows = [r for r in rows if r[0] == "vm"]
    assert [r[1] for r in vm_rows] == [0, 1, 0, 1]          # cold, warm per boot
    assert [r[2] for r in vm_rows] == [1, 1, 2, 2]          # a fresh boot per block
    assert all(r[1] is None for r in rows if r[0] == "native")


def test_vm_trial_diagnostics_are_measured_or_explained(vm, kernels_built):
    r = vm.run([str(kernels_built / "vhpc-pagefault"), "-m", "4", "-r", "1"], timeout=120)
    assert r.ok, r
    d = r.diagnostics
    assert d.guest_vmstat["pgfault"] >= 1024       # the guest kernel saw the faults
    assert d.rusage.minflt >= 1024 and d.rusage.sys_s >= 0
    assert d.qemu_faults["minflt"] >= 0
    assert sum(d.memory_node_mib_after.values()) > 0
    if vm.accel == "tcg":
        assert "TCG guest has no PMU" in d.perf.unavailable


def test_emulator_threads_leave_the_vcpu_pcpus_when_a_cpu_is_free(no_qemu_leak):
    with env_spec("vm", vcpus=1, memory=256, pin="1").build() as env:
        r = env.run(["true"], timeout=60)
        assert r.ok
        assert r.applied.vcpus[0].allowed == [1]
        assert r.applied.emulator_cpus == [0]
        vcpu_tid = r.applied.vcpus[0].thread
        others = [int(t) for t in os.listdir(f"/proc/{env.guest.pid}/task") if int(t) != vcpu_tid]
        assert others and all(os.sched_getaffinity(t) == {0} for t in others)


def _cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_corunner_vm_loads_the_host_while_trials_run_and_pauses_with_them(kernels_built, no_qemu_leak):
    env = env_spec("vm", vcpus=1, memory=512, pin="0", corunner="high",
                   corunner_policy="map:0=1").build()
    with env:
        r = env.run(["true"], timeout=60)
        assert r.ok, r
        co = r.applied.corunner
        assert co.load == "high" and co.vcpus[0].allowed == [1]
        t0 = _cpu_seconds(co.qemu_pid)
        time.sleep(1.0)
        busy = _cpu_seconds(co.qemu_pid) - t0
        assert busy > 0.5  # the co-runner guest is computing on its own pCPU
        env.pause()
        assert env.corunner.qmp.cmd("query-status")["status"] == "paused"
        env.resume()
        pids = (env.guest.pid, env.corunner.pid)
    for pid in pids:  # closing the environment stops both VMs
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
