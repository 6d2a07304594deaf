"""LAMMPS and GROMACS where the ranks do not see this host's files (a user's image, an ssh
host): their prepared inputs are copied as custom ``inputs:`` are, the ranks start the
application found there through the copied rankrun.py, the version each run printed keeps
runs of different versions apart in the check, and a campaign whose environments have
different versions (or one lacks the application) is refused before anything is stored,
naming them, unless ``allow_app_versions: true``.  A real image boot running LAMMPS is in
tests/test_userimage_boot.py."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import require_tool
from vhpc.benchmarks import get
from vhpc.benchmarks.apps.common import app_versions, host_app_versions, version_script
from vhpc.benchmarks.base import BenchmarkError, Remote, RunContext
from vhpc.campaign.likewise import check_app_versions
from vhpc.spec.parse import bench, campaign, env


def _remote(paths: list[str]) -> Remote:
    return Remote(python="/usr/bin/python3", rankrun="/home/vhpc/.vhpc/rankrun.py",
                  files={p: f"/home/vhpc/.vhpc/in/{i}-{Path(p).name}"
                         for i, p in enumerate(paths)})


def test_lammps_inputs_are_copied_and_the_guests_lmp_runs_them(tmp_path, monkeypatch):
    monkeypatch.setenv("VHPC_CACHE", str(tmp_path / "cache"))
    b = get("lammps")
    p = b.resolve({"problem": "eam", "atoms": 500, "ranks": 1, "steps": 10})
    copied = b.copied_inputs(p, 2)
    assert [Path(c).name for c in copied] == ["in.lmp", "Cu_u3.eam"]
    text = Path(copied[0]).read_text()
    assert re.search(r"^run\s+10$", text, re.M)  # the problem asked for: 10 steps
    remote = _remote(copied)
    argv = b.command(p, RunContext(Path("/x"), 2, None, remote))
    i = argv.index("/usr/bin/python3")
    assert argv[i:i + 3] == ["/usr/bin/python3", "-S", "/home/vhpc/.vhpc/rankrun.py"]
    stages = [(argv[k + 1], argv[k + 2]) for k, a in enumerate(argv) if a == "--stage"]
    assert stages == [(remote.files[copied[0]], "in.lmp"), (remote.files[copied[1]],
                                                           "Cu_u3.eam")]
    assert argv[argv.index("--") + 1] == "lmp"  # the guest's own, on its PATH
    assert not any(str(tmp_path) in a for a in argv)  # no host path reaches the guest


def test_a_run_of_another_lammps_version_is_checked_apart():
    b = get("lammps")
    p = b.resolve({"atoms": 4000, "ranks": 1})
    tail = "Loop time of 1.5 on 1 procs for 100 steps with 4000 atoms\n"
    a = b.check_key(p, "LAMMPS (29 Sep 2021 - Update 2)\n" + tail)
    c = b.check_key(p, "LAMMPS (2 Aug 2023)\n" + tail)
    assert a == "4000 atoms on 1 ranks, LAMMPS 29 Sep 2021 - Update 2"
    assert c == "4000 atoms on 1 ranks, LAMMPS 2 Aug 2023" and a != c


def test_a_run_of_another_gromacs_version_is_checked_apart():
    b = get("gromacs")
    p = b.resolve({})

    def out(version: str) -> str:
        log = (f"GROMACS version:    {version}\nThere are:     3000 Atoms\n"
               "Using 2 MPI processes\n")
        return f"VHPC-FILE-BEGIN name=md.log\n{log}VHPC-FILE-END name=md.log\n"

    assert b.check_key(p, out("2022.5-Debian_2022.5_2")) == (
        "3000 atoms on 2 ranks, GROMACS 2022.5-Debian_2022.5_2")
    assert b.check_key(p, out("2023.3")) != b.check_key(p, out("2022.5-Debian_2022.5_2"))


def test_the_guests_application_versions_are_read_from_their_own_lines():
    text = ("Large-scale Atomic/Molecular Massively Parallel Simulator - 29 Sep 2021 - Update 2\n"
            "GROMACS version:    2022.5-Debian_2022.5_2\n")
    assert app_versions(text) == {"lammps": "29 Sep 2021 - Update 2",
                                  "gromacs": "2022.5-Debian_2022.5_2"}
    assert app_versions("") == {}


class _Env:
    """An environment whose applications' versions are given."""

    def __init__(self, versions):
        self.versions = versions

    def app_versions(self):
        return self.versions


def _spec(*benches: str, **protocol):
    return campaign([bench(b) for b in benches], [env("native"), env("vm")], **protocol)


def test_different_application_versions_are_refused_naming_them():
    envs = {"native": _Env({"lammps": "29 Sep 2021 - Update 2"}),
            "vm": _Env({"lammps": "2 Aug 2023"})}
    with pytest.raises(BenchmarkError, match=r"^lammps: native has 29 Sep 2021 - Update 2, vm "
                                             r"has 2 Aug 2023: .*allow_app_versions: true"):
        check_app_versions(_spec("lammps"), envs)
    allowed = check_app_versions(_spec("lammps", allow_app_versions=True), envs)
    assert allowed == {"lammps": {"native": "29 Sep 2021 - Update 2", "vm": "2 Aug 2023"}}
    missing = {"native": _Env({"lammps": "2 Aug 2023"}), "vm": _Env({})}
    with pytest.raises(BenchmarkError, match="vm has none installed"):
        check_app_versions(_spec("lammps"), missing)
    same = {"native": _Env({"lammps": "2 Aug 2023", "gromacs": "2022.5"}),
            "vm": _Env({"lammps": "2 Aug 2023", "gromacs": "2023.3"})}
    assert check_app_versions(_spec("lammps"), same)["lammps"]["vm"] == "2 Aug 2023"
    assert check_app_versions(_spec("stream"), same) == {}  # not an application: not asked
    unknown = {"native": _Env({"lammps": "2 Aug 2023"}), "vm": _Env(None)}
    assert check_app_versions(_spec("lammps"), unknown) == {"lammps": {"native": "2 Aug 2023"}}


def test_this_hosts_lammps_version_is_the_one_lmp_prints():
    require_tool("lmp")
    banner = subprocess.run([shutil.which("lmp"), "-h"], capture_output=True, text=True).stdout
    line = next(ln for ln in banner.splitlines() if "Massively Parallel Simulator" in ln)
    assert host_app_versions()["lammps"] == line.split(" - ", 1)[1].strip()
    assert subprocess.run(["sh", "-c", version_script()]).returncode == 0


def test_an_environment_whose_guests_answer_only_on_the_nodes_is_checked_when_attached(
        tmp_path, capsys):
    """A spanning environment under an executor that does not run here (a vcluster:image= on
    Slurm nodes) cannot say its LAMMPS version before the allocation: the check runs again
    once its guest hosts are attached, before its first trial, and refuses another version in
    one line (exit 2); the native trial already run stays stored."""
    require_tool("lmp")
    from conftest import one_line, run_cli
    from vhpc.environments.kind import KINDS
    from vhpc.environments.native import NativeKind
    from vhpc.executors.base import EXECUTORS
    from vhpc.executors.local import LocalExecutor
    from vhpc.store import Store

    @KINDS.register("toyspan")
    class ToySpan(NativeKind):
        name = "toyspan"

        def build(self, name, options, plan, host):
            env = super().build(name, options, plan, host)
            env.spans_nodes, env.attached = True, False
            env.app_versions = lambda: {"lammps": "1 Jan 1999"} if env.attached else None
            return env

    @EXECUTORS.register("toyremote")
    class ToyRemote(LocalExecutor):
        name, runs_here = "toyremote", False

        def prepare(self, env, env_spec):
            env.attached = True
            return None

    try:
        rc, _, err = run_cli(capsys, "compare", "-b", "lammps:atoms=500,steps=20,ranks=1",
                             "-e", "native", "-e", "toyspan", "--executor", "toyremote",
                             "--repeats", "1", "--warmup", "0", "--order", "fixed",
                             "--out", tmp_path, "--no-report")
    finally:
        KINDS.unregister("toyspan")
        EXECUTORS.unregister("toyremote")
    line = one_line(rc, err, "lammps: native has", "toyspan has 1 Jan 1999",
                    "allow_app_versions: true")
    assert "native has none" not in line
    store = Store(tmp_path / "vhpc.db")
    trials = store.trials(store.campaigns()[0]["id"])
    assert {(t.environment, t.status) for t in trials} == {("native", "done"),
                                                          ("toyspan", "pending")}
