"""Sixth hostile battery: plugins are guests (a name clash, SystemExit,
KeyboardInterrupt, metadata that is not UTF-8, a malformed entry point value, a slow import);
``tune --dry-run --resume`` of a plain campaign; FIFOs where a store or a campaign file should
be; ``--dry-run`` runs the image checks; commas in QEMU option values; and the minor items
(``--out " "``, a report on a running campaign, the KVM probe's assertion abort)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import ROOT, one_line, run_cli

# ------------------------------------------------------------ 4-8, 15, slow: plugins are guests

SLURM_CLASH = """\
from vhpc.executors.base import EXECUTORS
from vhpc.executors.local import LocalExecutor


@EXECUTORS.register("slurm")
class Mine(LocalExecutor):
    summary = "a plugin's own slurm"
"""
LIBVIRT_CLASH = """\
from vhpc.environments.vm.backends.base import BACKENDS, HypervisorBackend


@BACKENDS.register("libvirt")
class Mine(HypervisorBackend):
    summary = "a plugin's own libvirt"
"""
LABEL = "the vhpc.parts entry point toy (vhpc_toyparts)"


def _plugin(site: Path, module: str, entry_points: bytes = b"[vhpc.parts]\ntoy = vhpc_toyparts\n"
            ) -> Path:
    """The package ``vhpc-toyparts`` as pip leaves it (tests/test_plugins.py), with the module
    text and the raw entry_points.txt given."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "vhpc_toyparts.py").write_text(module)
    info = site / "vhpc_toyparts-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vhpc-toyparts\nVersion: 0.1\n")
    (info / "entry_points.txt").write_bytes(entry_points)
    return site


def _vhpc(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(site)]),
           "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "vhpc.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module, what", [(SLURM_CLASH, "executor 'slurm'"),
                                          (LIBVIRT_CLASH, "hypervisor backend 'libvirt'")])
def test_a_plugin_never_replaces_a_builtin_part(tmp_path, module, what):
    """Items 4 and 5: one line naming the plugin and the part, vhpc's part stays, and the
    commands (doctor, compare's dry run, --help) work."""
    site = _plugin(tmp_path / "site", module)
    line = f"vhpc: {LABEL} registers {what}, a name vhpc uses: vhpc's part stays, this one is skipped"
    for args in (["doctor"], ["compare", "-b", "stream", "-e", "native", "--dry-run"],
                 ["--help"]):
        r = _vhpc(site, *args, cwd=tmp_path)
        assert r.returncode == 0, (args, r.stderr[-2000:])
        assert r.stderr.strip().splitlines() == [line], (args, r.stderr)
    help_ = " ".join(_vhpc(site, "compare", "--help", cwd=tmp_path).stdout.split())
    assert "a plugin's own" not in help_ and "slurm[:partition=" in help_


def test_a_plugin_clash_keeps_the_builtin_whatever_the_import_order(monkeypatch):
    """Item 4: the plugin registers first (its registry's package not loaded yet), vhpc's own
    part registers after it and takes its name back; the reverse order skips the plugin's."""
    from vhpc.core import registry

    early = registry.Registry("executor")
    monkeypatch.setattr(registry, "_loading", LABEL)
    guest = type("Guest", (), {})
    early.register("slurm")(guest)  # as from the plugin's module: the caller is not vhpc
    assert early.get("slurm") is guest
    monkeypatch.setattr(registry, "_loading", None)
    monkeypatch.setattr(registry, "_clashes", [])
    own = type("Own", (), {})
    ns = {"__name__": "vhpc.executors.fake", "early": early, "own": own}
    exec("early.register('slurm')(own)", ns)  # vhpc's module, loaded after the plugin
    assert early.get("slurm") is own
    assert registry.plugin_clashes() == [
        f"{LABEL} registers executor 'slurm', a name vhpc uses: vhpc's part stays, this one is "
        "skipped"]
    monkeypatch.setattr(registry, "_loading", LABEL)
    early.register("slurm")(guest)  # and a plugin after it is skipped
    assert early.get("slurm") is own and len(registry.plugin_clashes()) == 2


@pytest.mark.parametrize("module, entry_points, why", [
    ("import sys\nsys.exit(0)\n", None, f"{LABEL} failed to load: SystemExit: 0"),
    ("raise KeyboardInterrupt\n", None, f"{LABEL} failed to load: KeyboardInterrupt"),
    ("", b"[vhpc.parts]\ntoy = not a module!!\n",
     "the vhpc.parts entry point toy (not a module!!) is not a module name (module or "
     "module:attribute)"),
    ("", b"[vhpc.parts]\ntoy = vhpc_toyparts\xff\xfe\n",
     "vhpc_toyparts-0.1.dist-info cannot be read (UnicodeDecodeError"),
], ids=["sys-exit-0", "keyboard-interrupt", "malformed-value", "not-utf-8"])
def test_a_plugin_that_fails_to_load_is_one_line_naming_it(tmp_path, module, entry_points, why):
    """Items 6, 7, 8 and 15: a command that measures stops with one line and exit 2 (never 0:
    CI would count ``sys.exit(0)`` a success); the others say the plugin is skipped and work."""
    site = _plugin(tmp_path / "site", module,
                   *([entry_points] if entry_points is not None else []))
    r = _vhpc(site, "compare", "-b", "stream", "-e", "native", "--dry-run", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vhpc: error: ") and why in lines[0], lines
    for args in (["doctor"], ["--help"]):
        r = _vhpc(site, *args, cwd=tmp_path)
        assert r.returncode == 0 and r.stdout, (args, r.stderr[-3000:])
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and why in lines[0] and "goes on without it" in lines[0], lines


def test_a_plugin_that_fails_leaves_no_part_behind(tmp_path):
    """A plugin registering a kind, then raising: the kind is not offered."""
    site = _plugin(tmp_path / "site", "from vhpc.environments.kind import KINDS\n"
                   "from vhpc.environments.native import NativeKind\n"
                   "@KINDS.register('halfbox')\nclass Half(NativeKind):\n    name = 'halfbox'\n"
                   "raise RuntimeError('half installed')\n")
    r = _vhpc(site, "compare", "--help", cwd=tmp_path)
    assert r.returncode == 0 and "halfbox" not in r.stdout, r.stdout


def test_a_slow_plugin_is_named_after_about_a_second(tmp_path):
    site = _plugin(tmp_path / "site", "import time\ntime.sleep(2)\n")
    r = _vhpc(site, "--help", cwd=tmp_path)
    assert r.returncode == 0
    assert r.stderr.strip().splitlines() == [
        f"vhpc: {LABEL} has been importing for over 1 s: every vhpc command waits for it"]


# ------------------------------------------------------------ 9. tune --dry-run --resume


def test_tune_dry_run_resume_of_a_plain_campaign_is_one_line(capsys, finished):
    out, cid = finished
    rc, _, err = run_cli(capsys, "tune", "--dry-run", "--resume", cid, "--out", out)
    one_line(rc, err, f"campaign {cid} is not a vhpc tune race",
             f"vhpc compare --resume {cid}")
    rc, _, err = run_cli(capsys, "tune", "--dry-run", "--resume", "20000101-000000-0000",
                         "--out", out)
    one_line(rc, err, "20000101-000000-0000")


# ------------------------------------------------------------ 10-11. nothing blocks on a FIFO


@contextmanager
def bounded(seconds: int, what: str):
    """Fail (TimeoutError) instead of hanging when the block runs past ``seconds``."""
    def hung(*_):
        raise TimeoutError(f"{what} still blocked after {seconds} s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("argv", [["list", "campaigns"], ["report", "20261207-211403-fe4c"],
                                  ["compare", "-b", "stream", "-e", "native"],
                                  ["tune", "--resume", "20261207-211403-fe4c"]])
def test_a_fifo_in_the_stores_place_is_one_line(capsys, tmp_path, argv):
    """Item 10: open() of a FIFO without a writer blocked for ever."""
    os.mkfifo(tmp_path / "vhpc.db")
    with bounded(30, " ".join(argv)):
        rc, _, err = run_cli(capsys, *argv, "--out", tmp_path)
    one_line(rc, err, f"{tmp_path / 'vhpc.db'} is a FIFO", "pick another --out")
    assert (tmp_path / "vhpc.db").is_fifo()


def test_a_fifo_as_campaign_file_or_race_definition_is_one_line(capsys, tmp_path, finished):
    """Item 11, and the race definition (tune.json) read by ``tune --resume``."""
    os.mkfifo(tmp_path / "c.yaml")
    with bounded(30, "vhpc run FIFO --dry-run"):
        rc, _, err = run_cli(capsys, "run", tmp_path / "c.yaml", "--dry-run")
    one_line(rc, err, "c.yaml: is a FIFO no one writes to")
    out, cid = finished
    os.mkfifo(out / cid / "tune.json")
    try:
        with bounded(30, "vhpc tune --resume with a FIFO tune.json"):
            rc, _, err = run_cli(capsys, "tune", "--resume", cid, "--out", out)
    finally:
        os.unlink(out / cid / "tune.json")
    one_line(rc, err, "tune.json (is a FIFO, not a regular file)")


def test_a_campaign_file_through_a_slow_pipe_still_reads(tmp_path):
    """``vhpc run <(...)`` (docs/campaign-files.md): a writer that starts late is waited for."""
    script = ("vhpc run <(sleep 1; printf 'benchmarks: [stream]\\nenvironments: [native]\\n') "
              "--dry-run")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run(["bash", "-c", script.replace("vhpc run", f"{sys.executable} -m vhpc.cli run")],
                       env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0 and "trials (1 benchmark(s)" in r.stdout, r.stderr[-2000:]


# ------------------------------------------------------------ 12. --dry-run checks the image


@pytest.fixture()
def bad_images(tmp_path):
    """Images the real run refuses before its first boot: a FIFO, a link to /etc/shadow (a
    link only: nothing reads it), and a qcow2 backed by another file."""
    from conftest import require_tool

    qemu_img = require_tool("qemu-img")
    os.mkfifo(tmp_path / "fifo.qcow2")
    (tmp_path / "shadow.qcow2").symlink_to("/etc/shadow")
    subprocess.run([qemu_img, "create", "-q", "-f", "qcow2", str(tmp_path / "base.qcow2"),
                    "16M"], check=True)
    subprocess.run([qemu_img, "create", "-q", "-f", "qcow2", "-b", "base.qcow2", "-F", "qcow2",
                    str(tmp_path / "backed.qcow2")], check=True)
    return {"fifo": (tmp_path / "fifo.qcow2", "no such readable file"),
            "shadow": (tmp_path / "shadow.qcow2", "resolves to /etc/shadow"),
            "backed": (tmp_path / "backed.qcow2", "is an overlay of base.qcow2")}


@pytest.mark.parametrize("case", ["fifo", "shadow", "backed"])
@pytest.mark.parametrize("kind", ["vm", "vcluster"])
def test_dry_run_refuses_the_images_a_real_run_refuses(capsys, bad_images, case, kind,
                                                       no_qemu_leak):
    path, needle = bad_images[case]
    item = f"{kind}:image={path}" + (",vms=2" if kind == "vcluster" else "")
    with bounded(60, f"--dry-run with {case}"):
        rc, out, err = run_cli(capsys, "compare", "-b", "stream", "-e", "native", "-e", item,
                               "--dry-run")
    one_line(rc, err, f"image={path}", needle)
    assert "trials" not in out  # refused before the plan is printed as if it would run


# ------------------------------------------------------------ 13. commas in QEMU option values


def _options(argv: list[str], *flags: str) -> list[str]:
    """The ``flag value`` pairs of ``argv`` for these flags, in order."""
    return [w for i, a in enumerate(argv[:-1]) if a in flags for w in (a, argv[i + 1])]


def _qemu_parses(argv: list[str]) -> None:
    """Run QEMU with ``argv`` on an empty machine until it has parsed them and opened their
    files (it then waits; killed after 3 s): QEMU's own verdict on the quoting."""
    from conftest import require_tool

    qemu = require_tool("qemu-system-x86_64")
    proc = subprocess.Popen([qemu, "-machine", "none", "-nodefaults", "-display", "none",
                             *argv], stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=3)
    except subprocess.TimeoutExpired:  # still running: every option parsed and opened
        proc.kill()
        proc.communicate()
        return
    raise AssertionError(f"QEMU refused {argv} ({proc.returncode}): {err}")


def test_image_and_vcluster_paths_reach_qemu_with_their_commas_doubled(tmp_path):
    """Item 13: an image guest's ``-drive file=`` and ``-qmp unix:``, a vcluster's ``-netdev
    stream addr.path=`` and ivshmem ``mem-path=``, in a folder with a comma (TMPDIR)."""
    from conftest import require_tool

    from vhpc.environments.vcluster.network import IVSHMEM_MIB, ClusterNet
    from vhpc.environments.vm import userimage
    from vhpc.environments.vm.backends.qemu import GuestConfig

    work = tmp_path / "a,b"
    work.mkdir()
    for name, fmt in (("overlay.qcow2", "qcow2"), ("seed.img", "raw")):
        subprocess.run([require_tool("qemu-img"), "create", "-q", "-f", fmt, str(work / name),
                        "1M"], check=True)
    argv = userimage.image_argv(GuestConfig(), userimage.ImageBoot(work / "overlay.qcow2", "h"),
                                work, work / "seed.img", 2222)
    _qemu_parses([w.replace("if=virtio", "if=none") for w in _options(argv, "-drive", "-qmp")])
    (work / "shm").touch()
    os.truncate(work / "shm", IVSHMEM_MIB << 20)
    hub = ClusterNet(vms=2, workdir=work, shm_path=work / "shm").qemu_args(0)
    _qemu_parses(_options(hub, "-netdev", "-object"))


def test_a_comma_in_tmpdir_runs_a_vm_campaign(tmp_path, kernels_built, no_qemu_leak):
    """Item 13: the guest's -chardev path=, -qmp unix: and shares under TMPDIR="…,…"."""
    from conftest import require_tool

    require_tool("qemu-system-x86_64")
    # short: under a long folder (pytest's tmp_path) the sockets move elsewhere (108 bytes)
    tmp = Path(tempfile.mkdtemp(prefix="vhpc,"))
    try:
        r = subprocess.run([sys.executable, "-m", "vhpc.cli", "compare", "-b",
                            "noise:duration=0.1", "-e", "vm", "--repeats", "2", "--warmup", "0",
                            "--no-report", "--out", str(tmp_path / "out")],
                           env={**os.environ, "TMPDIR": str(tmp)}, capture_output=True,
                           text=True, timeout=300)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert r.returncode == 0 and "failed" not in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


# ------------------------------------------------------------ minor: --out " "


@pytest.mark.parametrize("argv", [["compare", "-b", "stream", "-e", "native", "--dry-run"],
                                  ["list", "campaigns"], ["tune", "-b", "stream", "--dry-run"],
                                  ["image", "build"]])
@pytest.mark.parametrize("out, needle", [(" ", "names no file or folder"),
                                         ("", "names no file or folder"),
                                         (" vhpc-results", "begins or ends with a blank"),
                                         ("a\nb", "holds a control character")])
def test_an_out_of_blanks_or_control_characters_is_one_line(capsys, tmp_path, monkeypatch,
                                                            argv, out, needle):
    monkeypatch.chdir(tmp_path)
    rc, _, err = run_cli(capsys, *argv, "--out", out)
    one_line(rc, err, "argument --out", needle)
    assert list(tmp_path.iterdir()) == []  # nothing named " " made


# ------------------------------------------------------------ minor: a running campaign's report


@pytest.mark.parametrize("running", [True, False])
def test_a_report_of_an_unfinished_campaign_says_so(capsys, tmp_path, finished, running):
    import sqlite3

    from vhpc.store import Store

    src, cid = finished
    out = tmp_path / "out"
    shutil.copytree(src, out)
    with sqlite3.connect(out / "vhpc.db") as db:  # one more round, planned and not yet run
        db.execute("INSERT INTO trials (campaign_id, seq, round, environment, benchmark, params, "
                   "status, warmup) SELECT campaign_id, seq + 1, round + 1, environment, "
                   "benchmark, params, 'pending', warmup FROM trials WHERE campaign_id = ?",
                   (cid,))
        db.execute("UPDATE campaigns SET status = 'running', finished = NULL WHERE id = ?",
                   (cid,))
    if running:  # this process runs it, as a live vhpc compare would
        with Store(out / "vhpc.db", existing=True).own(cid):
            rc, text, _ = run_cli(capsys, "report", cid, "--out", out)
    else:
        rc, text, _ = run_cli(capsys, "report", cid, "--out", out)
    assert rc == 0
    said = " ".join(text.split())
    state = "running" if running else "interrupted"
    assert (f"the campaign is unfinished ({state}): 1 of 2 measured trials done, 1 to run; "
            "every figure here is from the trials so far") in said, said
    assert ("report it again when it has finished" if running else
            f"vhpc compare --resume {cid}") in said
    html = (out / cid / "report.html").read_text()
    assert "the campaign is unfinished" in html
    rc, text, _ = run_cli(capsys, "report", cid, "--out", src)  # the finished one says nothing
    assert rc == 0 and "unfinished" not in text


# ------------------------------------------------------------ minor: the KVM probe's abort


def test_qemus_assertion_abort_is_a_definitive_cached_answer(tmp_path, monkeypatch):
    """Under the nested kvm_pvm backend QEMU aborts in kvm_buf_set_msrs: that is its answer
    about this KVM, cached, so no later campaign or --dry-run starts the probe's QEMU again.
    A QEMU killed from outside (SIGKILL) stays a transient answer."""
    from vhpc.environments.vm.backends import qemu

    monkeypatch.setenv("VHPC_CACHE", str(tmp_path / "cache"))
    kvm = tmp_path / "kvm"
    kvm.touch()
    monkeypatch.setattr(qemu, "KVM_DEVICE", str(kvm))
    started = tmp_path / "started"
    line = ("qemu-system-x86_64: ../../target/i386/kvm/kvm.c:3183: kvm_buf_set_msrs: "
            "Assertion `ret == cpu->kvm_msr_buf->nmsrs' failed.")
    script = {"abort": f"echo x >> {started}; echo \"$1\" >&2; kill -ABRT $$",
              "kill": f"echo x >> {started}; kill -KILL $$"}
    monkeypatch.setattr(qemu, "build_argv",
                        lambda cfg, tmp, probe: ["sh", "-c", script[how], "qemu", line])
    how = "kill"
    first = qemu.probe_kvm()
    assert first.accel == "tcg" and not first.definitive and "not cached" in first.reason
    how = "abort"
    got = qemu.probe_kvm()
    assert got.accel == "tcg" and got.definitive and "kvm_buf_set_msrs" in got.reason
    again = qemu.probe_kvm()
    assert again.reason.endswith("(cached probe)") and "kvm_buf_set_msrs" in again.reason
    assert started.read_text().count("x") == 2  # the cached answer started no QEMU
