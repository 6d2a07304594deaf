"""The vm environment on this host: a real QEMU guest (TCG here, KVM where usable).

Boots are slow under TCG (~5 s), so the run's one shared guest (conftest.guest) serves most
tests.
"""

import os
import time

import pytest

from vhpc.environments.vm import guestimage
from vhpc.environments.vm.backends import qemu
from vhpc.core.errors import HostError
from vhpc.spec.parse import env as env_spec


pytestmark = pytest.mark.vm


def _pins(pin, vcpus, host_cpus):
    """vCPU -> host CPUs of the ``pin`` option on a host with ``host_cpus`` (None: float)."""
    policy = env_spec("vm", vcpus=vcpus, pin=pin).options.resolved_policy(tuple(host_cpus))
    return None if policy.name == "float" else {v[0]: set(c) for v, c, _ in policy.vcpu_map}


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


@pytest.fixture
def vm(guest):
    """The run's shared guest (conftest.guest: 2 vCPUs pinned to CPUs 0 and 1)."""
    return guest


def test_guest_runs_host_binaries_with_its_own_cpus(vm):
    r = vm.run(["sh", "-c", "nproc; uname -r; test -w /tmp && echo tmp-writable"], timeout=60)
    assert r.ok, r
    lines = r.stdout.split()
    assert lines[0] == "2"
    assert lines[1] == guestimage.find_kernel().release
    assert "tmp-writable" in lines


def test_guest_init_is_told_to_prefetch_the_hosts_loader_and_libc(vm):
    files = guestimage.prefetch_files()
    names = sorted(os.path.basename(f).split(".so")[0] for f in files)
    assert names == ["ld-linux-x86-64", "libc"] and all(os.path.isfile(f) for f in files)
    r = vm.run(["cat", "/proc/cmdline"], timeout=60)
    assert r.ok and f"vhpc.prefetch={':'.join(files)}" in r.stdout.split(), r


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


def _runtime_ns(pid: int, tids) -> int:
    """CPU time the kernel has accounted to these threads of ``pid`` (schedstat, ns)."""
    return sum(int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0]) for t in tids)


def _growth(read, window: float = 0.5) -> int:
    """How much ``read()`` grows over ``window`` seconds."""
    before = read()
    time.sleep(window)
    return read() - before


def _advances(read, tries: int = 100) -> bool:
    """True once ``read()`` grows between two looks (a liveness wait, not a timing bound)."""
    last = read()
    for _ in range(tries):
        time.sleep(0.1)
        now = read()
        if now > last:
            return True
        last = now
    return False


def test_paused_guest_vcpus_are_not_scheduled(vm):
    # a busy loop in the guest keeps a vCPU thread on a host CPU; paused, the vCPU threads
    # sleep (a wake-up of a few µs for a kick, against tens of ms per window when running);
    # resumed, they run again
    r = vm.run(["sh", "-c", "while :; do :; done </dev/null >/dev/null 2>&1 & echo $!"], timeout=60)
    assert r.ok, r
    spinner = r.stdout.strip()
    tids = [v.thread for v in r.applied.vcpus]
    runtime = lambda: _runtime_ns(vm.guest.pid, tids)
    try:
        assert _advances(runtime), "the guest's busy loop does not run on a vCPU thread"
        running = _growth(runtime)
        vm.pause()
        try:
            assert vm.guest.qmp.cmd("query-status")["status"] == "paused"
            paused = _growth(runtime)
            assert paused * 100 < running, (paused, running)  # CPU time, not wall time
            assert all(open(f"/proc/{vm.guest.pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()[0]
                       in "SD" for t in tids)  # blocked, not runnable
        finally:
            vm.resume()
        assert vm.guest.qmp.cmd("query-status")["status"] == "running"
        assert _advances(runtime), "the vCPUs did not run again after resume"
    finally:
        assert vm.run(["kill", spinner], timeout=60).ok


def test_trial_timeout_kills_the_command_not_the_guest(vm):
    r = vm.run(["sleep", "30"], timeout=1)
    assert r.timed_out and r.returncode is None and r.error is None
    assert vm.run(["true"], timeout=60).ok


# STREAM and pingpong run and parse in the guest with every other program: test_suite_in_vm.py


def test_hung_guest_is_killed_and_reported_with_console(vm, monkeypatch):
    import vhpc.environments.vm.environment as vmmod

    monkeypatch.setattr(vmmod, "HANG_GRACE", 2.0)
    old_pid = vm.guest.pid
    start_perf = vm._start_guest_perf

    def hang_now():  # called as the trial starts, after the pre-trial counters were read
        vm.guest.qmp.cmd("stop")  # the guest stops answering: as a hung guest would
        return start_perf()

    monkeypatch.setattr(vm, "_start_guest_perf", hang_now)
    vm.guest.resume = lambda: None  # keep it stopped for this trial
    r = vm.run(["true"], timeout=1)
    monkeypatch.setattr(vm, "_start_guest_perf", start_perf)
    assert r.error and "guest failed during the trial" in r.error
    assert r.returncode is None
    assert vm.guest is None
    with pytest.raises(ProcessLookupError):
        os.kill(old_pid, 0)
    # the next trial boots a fresh session; that guest hangs before its first answer (QMP
    # stop, as a stalled TCG boot would), so it is killed and booted once more
    first_wait = vmmod.FIRST_ANSWER_WAIT
    monkeypatch.setattr(vmmod, "FIRST_ANSWER_WAIT", 2.0)
    boot, hung = vm.backend.boot, []

    def boot_that_hangs_once(request):
        if hung:  # the boot after the hang waits as long as vhpc does: a TCG guest on a
            vmmod.FIRST_ANSWER_WAIT = first_wait  # loaded host can take more than 2 s to answer
        guest = boot(request)
        if not hung:
            hung.append(guest.pid)
            guest.qmp.cmd("stop")
        return guest

    monkeypatch.setattr(vm.backend, "boot", boot_that_hangs_once)
    r = vm.run(["true"], timeout=60)
    assert r.ok and r.session_index == 0
    assert len(vm.boot_hangs) == 1 and "did not answer in time" in vm.boot_hangs[0]
    assert vm.guest.pid != hung[0] and not os.path.exists(f"/proc/{hung[0]}/cmdline")


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


def _qemu_faults(pid: int) -> tuple[int, int]:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[7]), int(fields[9])  # proc(5): minflt, majflt


def _guest_pgfault(vm) -> int:
    r = vm.run(["cat", "/proc/vmstat"], timeout=60)
    assert r.ok, r
    return int(next(ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("pgfault ")))


def test_vm_trial_diagnostics_are_measured_or_explained(vm, kernels_built):
    # the counters are deltas over the trial: bounded by the same counters read independently
    # (guest /proc/vmstat through the guest, QEMU's /proc/PID/stat on the host) around it
    g0, (q0, qmaj0) = _guest_pgfault(vm), _qemu_faults(vm.guest.pid)
    r = vm.run([str(kernels_built / "vhpc-pagefault"), "-m", "4", "-r", "1"], timeout=120)
    g1, (q1, qmaj1) = _guest_pgfault(vm), _qemu_faults(vm.guest.pid)
    assert r.ok, r
    d = r.diagnostics
    # 4 MiB touched page by page: at least 1024 faults of the process, all seen by the guest
    # kernel, which counted no more faults over the trial than over the window around it
    assert 1024 <= d.rusage.minflt <= d.guest_vmstat["pgfault"] <= g1 - g0
    assert set(d.qemu_faults) == {"minflt", "majflt"}
    assert 0 <= d.qemu_faults["minflt"] <= q1 - q0 and 0 <= d.qemu_faults["majflt"] <= qmaj1 - qmaj0
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


def test_corunner_vm_loads_the_host_while_trials_run_and_pauses_with_them(kernels_built, no_qemu_leak):
    env = env_spec("vm", vcpus=1, memory=512, pin="0", corunner="high",
                   corunner_policy="map:0=1").build()
    with env:
        r = env.run(["true"], timeout=60)
        assert r.ok, r
        co = r.applied.corunner
        assert co.load == "high" and co.vcpus[0].allowed == [1]
        tids = [v.thread for v in co.vcpus]
        runtime = lambda: _runtime_ns(co.hypervisor_pid, tids)
        assert _advances(runtime)  # the co-runner guest computes on its own pCPU
        last_cpu = int(open(f"/proc/{co.hypervisor_pid}/task/{tids[0]}/stat").read().rsplit(")", 1)[1].split()[36])
        assert last_cpu == 1
        running = _growth(runtime)
        env.pause()
        assert env.corunner.qmp.cmd("query-status")["status"] == "paused"
        paused = _growth(runtime)
        assert paused * 100 < running, (paused, running)  # paused with the trial's guest
        env.resume()
        assert env.corunner.qmp.cmd("query-status")["status"] == "running"
        assert _advances(runtime)
        pids = (env.guest.pid, env.corunner.pid)
    for pid in pids:  # closing the environment stops both VMs
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
