"""Shared fixtures and helpers: what `make test` installs (:func:`require_tool`), built kernels,
QEMU leak checks, daemons started once per run."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CI = os.environ.get("CI") == "true"

# A rank that exits non-zero makes Open MPI's mpirun SIGTERM the others and wait 1 s (twice, 2 s
# in all) before SIGKILL (ompi_info: odls_base_sigkill_timeout).  Many tests check that a bad
# option or a failed verification ends the job with the kernel's exit status; without the grace
# each such mpirun ends in 0.03 s instead of 2.0 s.  Native runs only: the variable is not passed
# into guests, and a passing job never reaches the kill.
os.environ.setdefault("OMPI_MCA_odls_base_sigkill_timeout", "0")

# tools `make test` installs (Makefile APT_PACKAGES) → the Debian package that ships them
TOOL_PACKAGES = {
    "mpirun": "openmpi-bin", "mpicc": "libopenmpi-dev", "mpicc.mpich": "mpich",
    "mpirun.mpich": "mpich", "hpcc": "hpcc", "lstopo": "hwloc", "numactl": "numactl",
    "chromium": "chromium", "qemu-system-x86_64": "qemu-system-x86", "perf": "linux-perf",
    "virt-xml-validate": "libvirt-clients", "xmllint": "libxml2-utils", "virsh": "libvirt-clients",
    "libvirtd": "libvirt-daemon-system", "ssh": "openssh-client",
    "/usr/sbin/sshd": "openssh-server", "slurmctld": "slurm-wlm", "slurmd": "slurm-wlm",
    "srun": "slurm-client", "munged": "munge", "slurmdbd": "slurmdbd",
    "mariadbd": "mariadb-server", "busybox": "busybox-static", "cpio": "cpio",
    "strace": "strace", "lmp": "lammps", "gmx_mpi": "gromacs", "gmx": "gromacs",
    "qemu-img": "qemu-utils", "qemu-io": "qemu-utils", "cloud-localds": "cloud-image-utils",
    "isoinfo": "genisoimage", "debvm-create": "debvm", "mmdebstrap": "mmdebstrap",
    "mke2fs": "e2fsprogs", "debugfs": "e2fsprogs", "ssh-keygen": "openssh-client",
    "sfdisk": "fdisk", "grub-install": "grub2-common", "grub-mkstandalone": "grub-common",
    "mkfs.vfat": "dosfstools", "mcopy": "mtools", "losetup": "mount",
}


def missing(what: str) -> None:
    """Something `make test` provides is absent: fail under CI=true (``make test`` sets it, so a
    missing tool is a broken set-up, not a reason to pass), skip elsewhere."""
    msg = f"{what} — `make test` provides it (make deps venv kernels), so CI=true fails"
    if CI:
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


def require_tool(*names: str) -> str:
    """Path of the first of ``names`` found on PATH (or an absolute path that exists); when
    none is there, :func:`missing` (fails under CI=true, skips elsewhere).  Use it for every
    tool that the Makefile's APT_PACKAGES installs."""
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    pkgs = sorted({TOOL_PACKAGES.get(n, "?") for n in names})
    missing(f"{' / '.join(names)} not installed (apt-get install {' '.join(pkgs)})")
    raise AssertionError("unreachable")


def require_module(name: str):
    """Import ``name`` (a Python package the ``[test]`` venv installs, e.g. libvirt-python) or
    :func:`missing`."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(f"Python module {name} not importable ({exc})")


def require_file(path: Path, how: str = "make kernels") -> Path:
    """``path`` (a built kernel binary, say) or :func:`missing` when it does not exist."""
    if not Path(path).exists():
        missing(f"{path} does not exist ({how})")
    return Path(path)


def pytest_configure(config):
    config.addinivalue_line("markers", "needs(*tools): the test needs these tools on PATH "
                            "(require_tool: fails under CI=true when one is missing, else skips)")


#: modules whose tests must share one pytest-xdist worker: the cgroup tests create and judge
#: groups named vhpc-throttle-<pid>-* (a stale group one of them makes on purpose would be swept
#: or counted as a leak by another running beside it); the guest tests share one boot.
SHARED_WORKER = {"test_throttle": "cgroups", "test_calibrate": "cgroups",
                 "test_freezer": "cgroups",
                 # the session-scoped ``guest`` boots once for all of these
                 "test_vm": "guest", "test_suite_in_vm": "guest",
                 # one test Slurm cluster and one sshd per worker: share test_slurm's, test_ssh's
                 "test_remote_kill": "test_slurm", "test_socket_paths": "test_ssh"}


#: Modules ``make test`` runs alone, after the parallel pass: beside other workers' load, sacct
#: and a killed ssh run's remote cleanup race for a loaded second core; on their own they pass.
#: A test of theirs marked ``parallel`` runs in the parallel pass.  test_libvirt is not here:
#: each private libvirtd has its own mount namespace (backends/libvirtd.py), so two on one host
#: do not share /run/libvirt/qemu/driver.pid, which a system-mode QEMU driver holds alone.
SERIAL_MODULES = {"test_cluster_multinode", "test_hostile"}


#: xdist groups that take longest, about slowest first (seconds summed over a group's tests in
#: one quiet full run here: 99 for guest down to 16 for cgroups), handed out first: with
#: ``--no-loadscope-reorder`` (Makefile) pytest-xdist deals groups in collection order, and
#: dealing the longest first (Graham's LPT rule, "Bounds on multiprocessing timing anomalies",
#: SIAM J. Appl. Math. 17, 1969) keeps a long group from starting last and running alone, as
#: one-test guest modules do in its default order (most tests first).  The groups that mostly
#: wait on Slurm (test_node_lost: slurmctld noticing a killed slurmd; test_slurm) are dealt
#: between the TCG guests' groups, so that waiting groups do not run side by side while the
#: CPUs idle (they did at 100-140 s of a run: 50-65% busy).
SLOW_FIRST = ("guest", "test_vcluster", "test_node_lost", "test_study_figures", "test_slurm",
              "test_vcluster_nodes", "test_vm_numa_binding", "test_libvirt", "test_report_pages",
              "test_store_robust", "test_npb", "test_verdicts", "test_mpi_launch",
              "test_battery6", "test_battery6_images", "test_ssh", "test_tune", "test_cli",
              "paper_reader", "test_install", "test_stat_rates", "test_apps_battery", "cgroups")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the marks added here
def pytest_collection_modifyitems(config, items):
    """Under ``--dist loadgroup`` each test module runs on one worker (its module-scoped guests,
    daemons and sshd/Slurm session fixtures start once), and the modules of
    :data:`SHARED_WORKER` share one; a test's own ``xdist_group`` mark wins.  Tests marked
    ``heavy`` (full simulation grids) are deselected unless ``-m`` names them (``make
    bench``).  Groups of
    :data:`SLOW_FIRST` come first, in that order; the others keep collection order."""
    if "heavy" not in (config.getoption("markexpr", "") or ""):  # make bench runs those
        heavy = [i for i in items if i.get_closest_marker("heavy") is not None]
        if heavy:
            config.hook.pytest_deselected(items=heavy)
            items[:] = [i for i in items if i.get_closest_marker("heavy") is None]
    rank = {}
    for i, item in enumerate(items):
        module = item.module.__name__.rsplit(".", 1)[-1]
        if module in SERIAL_MODULES and item.get_closest_marker("parallel") is None:
            item.add_marker(pytest.mark.serial)
        mark = item.get_closest_marker("xdist_group")
        if mark is None:
            mark = pytest.mark.xdist_group(SHARED_WORKER.get(module, module))
            item.add_marker(mark)
        group = mark.args[0] if mark.args else mark.kwargs.get("name", "")
        slow = SLOW_FIRST.index(group) if group in SLOW_FIRST else len(SLOW_FIRST)
        rank[item.nodeid] = (slow, i)
    items.sort(key=lambda item: rank[item.nodeid])


#: Set on a pytest-xdist worker whose tests did not get their group (pytest_collection_finish).
UNGROUPED: list[str] = []


def pytest_collection_finish(session):
    """Under ``--dist loadgroup`` every test id must carry its group (``...@group``, added by
    pytest-xdist on each worker): without it each test is its own group and a module's session
    fixtures start once per worker (as pytest 9.2 with pytest-xdist 3.8 does: pyproject.toml
    bounds the versions).  Then every test fails at set-up naming both versions (an error
    raised here is lost in pytest-xdist's report of a crashed worker)."""
    if getattr(session.config.option, "loadgroup", False) and session.items:
        loose = [i.nodeid for i in session.items if "@" not in i.nodeid.rsplit("]", 1)[-1]]
        if loose:
            import xdist

            UNGROUPED.append(
                f"pytest {pytest.__version__} with pytest-xdist {xdist.__version__} does not "
                f"group tests under --dist loadgroup ({loose[0]} has no @group): install the "
                "versions pyproject.toml's [test] extra allows")


def pytest_runtest_setup(item):
    if UNGROUPED:
        pytest.fail(UNGROUPED[0], pytrace=False)
    for mark in item.iter_markers("needs"):
        for tool in mark.args:
            require_tool(tool)


@pytest.fixture(scope="session")
def kernels_built() -> Path:
    """Build vhpc's C kernels as ``make kernels`` does (idempotent, the build key recorded, so
    no campaign of another test rebuilds them under a test running them) and return the binary
    directory."""
    from vhpc.benchmarks import build_kernels

    return build_kernels()


def _procs() -> dict[int, tuple[str, str, int]]:
    """{pid: (comm, state, ppid)} of every process on the host."""
    procs = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            comm, rest = stat.read_text().rsplit(")", 1)
        except OSError:
            continue
        fields = rest.split()
        procs[int(stat.parent.name)] = (comm.split("(", 1)[1], fields[0], int(fields[1]))
    return procs


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def alive_naming(text: str) -> list[int]:
    """PIDs of live (not zombie) processes, other than this one, whose command line holds
    ``text`` (NUL-separated argv bytes, as in /proc/PID/cmdline)."""
    procs = _procs()
    return [pid for pid, (_, state, _) in procs.items()
            if state != "Z" and pid != os.getpid() and text.encode() in _cmdline(pid)]


def qemu_pids() -> set[int]:
    """Live (non-zombie) QEMU system-emulator processes this test process answers for: its
    descendants (vhpc starts QEMU as a child, or as a grandchild through the ``vhpc`` CLI), and
    vhpc guests left orphaned (``-name vhpc-guest`` reparented to init: a leak, whoever made
    it).  Guests of other pytest-xdist workers, and libvirt's (children of libvirtd), are not
    counted, so a leak check never blames a test for a guest running beside it."""
    procs = _procs()
    children: dict[int, list[int]] = {}
    for pid, (_, _, ppid) in procs.items():
        children.setdefault(ppid, []).append(pid)
    mine, todo = set(), [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in mine:
                mine.add(child)
                todo.append(child)
    pids = set()
    for pid, (comm, state, ppid) in procs.items():
        if "qemu-system" not in comm or state == "Z":
            continue
        if pid in mine or (ppid == 1 and b"\0vhpc-guest," in _cmdline(pid)):
            pids.add(pid)
    return pids


@pytest.fixture(scope="session")
def kvm_probe_answer() -> str | None:
    """The host's KVM probe answer as vhpc caches it (the text of ``cache_dir()/kvm-probe.json``
    for this boot and QEMU version), probed when the cache has none yet (at most twice: a
    second time-out in a row is kept); None when no kept answer came.  Tests that give vhpc a
    private ``$VHPC_CACHE`` put it there (:func:`private_cache`), so their campaigns do not
    boot the probe guest again (8 s of a spinning CPU where KVM guests hang, as here)."""
    from vhpc.core.paths import cache_dir, read_cache_text
    from vhpc.environments.vm.backends import qemu

    if shutil.which("qemu-system-x86_64") is None:
        return None
    for _ in range(2):  # a cached answer is definitive too
        if qemu.probe_kvm().definitive:
            break
    return read_cache_text(cache_dir() / "kvm-probe.json", 1 << 16)


def private_cache(folder: Path, probe_answer: str | None) -> Path:
    """``folder`` made a private vhpc cache (0700) holding ``probe_answer``
    (:func:`kvm_probe_answer`) as its KVM probe cache, 0600; returns ``folder``."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if probe_answer is not None:
        f = folder / "kvm-probe.json"
        f.write_text(probe_answer)
        f.chmod(0o600)
    return folder


@pytest.fixture
def no_qemu_leak():
    """Fail the test if it leaves a QEMU process behind."""
    before = qemu_pids()
    yield
    left = qemu_pids() - before
    assert not left, f"QEMU processes left behind: {left}"


@pytest.fixture(scope="session")
def guest():
    """One running QEMU guest per test run (per xdist worker), for tests that only need *a*
    running guest: 2 vCPUs pinned to host CPUs 0 and 1, 1 GiB (enough for NPB class S).  A test
    may pause it, kill it (the next run boots a fresh session) or run anything in it, but leaves
    it running.  Its modules share a worker (:data:`SHARED_WORKER`), so it boots once.  Under
    TCG a boot costs seconds; closing it at the end is checked like any other QEMU."""
    from vhpc.spec.parse import env as env_spec

    before = qemu_pids()
    env = env_spec("vm", vcpus=2, memory=1024, pin="auto").build()
    env.start()
    try:
        yield env
    finally:
        env.close()
    left = qemu_pids() - before
    assert not left, f"QEMU left running: {left}"


def _cluster_up(tmp_factory, tools: dict[str, str], *args: str, **env) -> dict[str, str]:
    """Start tests/cluster/up ARGS (its real daemons) and return its KEY=VALUE lines; skip when a
    tool is missing, fail instead under CI=true (``make test`` installs them)."""
    for tool in tools:
        require_tool(tool)
    state = tmp_factory.mktemp("cluster")
    out = subprocess.run([str(ROOT / "tests/cluster/up"), *args], capture_output=True, text=True,
                         env={**os.environ, "VHPC_CLUSTER_DIR": str(state), **env}, timeout=300)
    assert out.returncode == 0, f"tests/cluster/up failed: {out.stderr[-2000:]}"
    return dict(line.split(";")[0].split("=", 1) for line in out.stdout.splitlines() if "=" in line)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """A real OpenSSH server on a loopback port (tests/cluster/up, sshd only): VHPC_SSH_PORT,
    VHPC_SSH_IDENTITY, VHPC_SSH_CONFIG, VHPC_CLUSTER_DIR.  Stopped with tests/cluster/down."""
    info = _cluster_up(tmp_path_factory, {"/usr/sbin/sshd": "openssh-server",
                                          "ssh": "openssh-client"}, VHPC_CLUSTER_SLURM="0")
    yield info
    subprocess.run([str(ROOT / "tests/cluster/down"), info["VHPC_CLUSTER_DIR"]], check=True)


SLURM_TOOLS = {"slurmctld": "slurm-wlm", "slurmd": "slurm-wlm", "munged": "munge",
               "slurmdbd": "slurmdbd", "mariadbd": "mariadb-server", "srun": "slurm-client",
               "taskset": "util-linux"}


def slurm_nodes(tmp_path_factory, nodes: int, **tools: str):
    """Fixture body: a real single-host Slurm cluster of ``nodes`` compute nodes vhpc1..N with
    accounting (tests/cluster/up --nodes N, Slurm only; ``tools``: more commands it needs, by
    Debian package) yields its KEY=VALUE lines (SLURM_CONF, VHPC_CLUSTER_DIR, ...) and is stopped
    with tests/cluster/down unless a test already stopped it.  VHPC_CLUSTER_MUNGE=shared: a
    munged already serving munge's standard socket (another test cluster on this host) is used
    rather than refused."""
    info = _cluster_up(tmp_path_factory, {**SLURM_TOOLS, "sacct": "slurm-client", **tools},
                       "--nodes", str(nodes), VHPC_CLUSTER_SSH="0", VHPC_CLUSTER_MUNGE="shared")
    yield info
    if Path(info["VHPC_CLUSTER_DIR"]).exists():
        subprocess.run([str(ROOT / "tests/cluster/down"), info["VHPC_CLUSTER_DIR"]], check=True)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A real single-host, one-node (vhpc1) Slurm cluster with accounting (:func:`slurm_nodes`)."""
    yield from slurm_nodes(tmp_path_factory, 1)


def custom_file(path: Path, command, extra: str = "", env: str = "native", **custom) -> Path:
    """A campaign file with one custom benchmark ``probe`` (metric ``v``) in ``env``."""
    probe = {"name": "probe", "command": command,
             "metrics": [{"name": "v", "regex": r"v (\d+)", "unit": "1",
                          "higher_is_better": True}], **custom}
    doc = {"custom": [probe], "benchmarks": ["probe"], "environments": [env], "warmup": 0,
           "repeats": 1}
    import yaml

    path.write_text(yaml.safe_dump(doc) + extra)
    return path


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished native campaign of a custom benchmark: (results folder, campaign id)."""
    import sqlite3

    from vhpc import cli

    tmp = tmp_path_factory.mktemp("done")
    f = custom_file(tmp / "c.yaml", ["sh", "-c", "echo v 1"])
    rc = cli.main(["run", str(f), "--out", str(tmp / "out")])
    assert rc == 0
    db = sqlite3.connect(tmp / "out" / "vhpc.db")
    (cid,) = db.execute("SELECT id FROM campaigns").fetchone()
    db.close()
    return tmp / "out", cid


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``vhpc ARGV`` run in this process."""
    from vhpc import cli

    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line(rc: int, err: str, *needles: str) -> str:
    """Assert exit status 2 and one stderr line ``vhpc: error: ...`` holding every needle;
    returns that line."""
    assert rc == 2, (rc, err[-2000:])
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vhpc: error:"), err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def fake_slurm(tmp_path: Path, scripts: dict[str, str]) -> dict[str, str]:
    """Stand-in Slurm commands (``sinfo``...) on PATH; returns the environment to use."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    for name in ("salloc", "srun", "sacct", "squeue", "scancel", "sinfo", "scontrol"):
        f = bin_ / name
        f.write_text("#!/bin/sh\n" + scripts.get(name, "exit 0") + "\n")
        f.chmod(0o755)
    return {"PATH": f"{bin_}:{os.environ['PATH']}"}
