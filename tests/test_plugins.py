"""A part from outside vhpc, installed through the ``vhpc.parts`` entry points (docs/plugins.md):
the example of the docs, as a package on PYTHONPATH with its ``.dist-info``, shows in ``vhpc
doctor`` and ``vhpc compare --help`` and runs in a campaign; a broken one is one line, exit 2."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "plugins.md"


def _install(site: Path, module: str) -> None:
    """The package ``vhpc-toyparts`` as pip would leave it: its module and a ``.dist-info``
    whose entry_points.txt names the module in the ``vhpc.parts`` group."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "vhpc_toyparts.py").write_text(module)
    info = site / "vhpc_toyparts-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vhpc-toyparts\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[vhpc.parts]\ntoy = vhpc_toyparts\n")


def _vhpc(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(site)]),
           "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "vhpc.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _example() -> str:
    return re.search(r"```python\n(.*?)```", DOC.read_text(), re.S).group(1)


def test_the_documented_outside_part_shows_in_doctor_help_and_runs(tmp_path):
    site = tmp_path / "site"
    _install(site, _example())
    doctor = _vhpc(site, "doctor", cwd=tmp_path)
    assert doctor.returncode == 0, doctor.stderr
    assert re.search(r"toy shell\s+│\s+toybox\s+│\s+present", doctor.stdout), doctor.stdout
    help_ = _vhpc(site, "compare", "--help", cwd=tmp_path)
    assert "toybox (native, from an outside package)" in " ".join(help_.stdout.split())
    run = _vhpc(site, "compare", "-b", "toy-echo", "-e", "native", "-e", "toybox", "--repeats",
                "2", "--warmup", "0", "--no-report", "--out", str(tmp_path / "out"),
                cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    with sqlite3.connect(tmp_path / "out" / "vhpc.db") as db:
        rows = db.execute("SELECT t.environment, t.status, s.metric FROM trials t "
                          "JOIN samples s ON s.trial_id = t.id").fetchall()
    assert sorted(set(rows)) == [("native", "done", "value"), ("toybox", "done", "value")]
    assert len(rows) == 4


def test_an_outside_part_that_fails_to_import_is_one_line_exit_2(tmp_path):
    site = tmp_path / "site"
    _install(site, "raise RuntimeError('half installed')\n")
    r = _vhpc(site, "compare", "-b", "stream", "--dry-run", "--out", str(tmp_path / "o"),
              cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [
        "vhpc: error: the vhpc.parts entry point toy (vhpc_toyparts) failed to load: "
        "RuntimeError: half installed; fix or uninstall the package that provides it"], r.stderr


def test_compare_help_names_every_registered_kind_and_executor(capsys, monkeypatch):
    """Generated from the registries: the four kinds and both executors, each with its summary;
    and a part registered now shows without any table edited."""
    import pytest

    from vhpc import cli
    from vhpc.environments.kind import KINDS
    from vhpc.executors.base import EXECUTORS
    from vhpc.executors.local import LocalExecutor

    assert {"native", "vm", "vcluster", "ssh"} <= set(KINDS) and {"local", "slurm"} <= set(EXECUTORS)

    @EXECUTORS.register("toyq")
    class ToyQueue(LocalExecutor):
        name = "toyq"
        summary = "a queue registered by this test"

    monkeypatch.setenv("COLUMNS", "1000")  # argparse wraps at any "=" otherwise
    try:
        with pytest.raises(SystemExit):
            cli.main(["compare", "--help"])
    finally:
        EXECUTORS.unregister("toyq")
    text = " ".join(capsys.readouterr().out.split())
    for name, part in KINDS.items():
        assert part.summary and f"{name} ({part.summary})" in text, name
    assert "local: each trial in this process, on this host" in text
    assert "--executor local|slurm|toyq[:k=v,...]" in text
    assert "toyq: a queue registered by this test" in text
    # the Slurm executor's own options, as its options model declares them (written by hand:
    # a new option must show up in the help without anyone editing a table)
    assert "slurm[:partition=,nodes=,time=,account=,ranks_per_node=,wait=]: each trial a job " \
        "step" in text


def test_vhpc_host_asks_each_kind_what_it_says_of_the_host():
    from vhpc.environments.kind import KINDS

    said = {name: kind().host_lines(probe=False) for name, kind in KINDS.items()}
    vm = dict((label, text) for label, text, _ in said["vm"])
    assert vm["accelerator"] == "not probed" and "guest kernel" in vm
    assert said["native"] == []


def test_a_kinds_global_flag_sets_its_variable_for_one_command(capsys, monkeypatch):
    """A kind declares its ``vhpc`` options (the vm kind's --allow-uri and
    --allow-system-image among them); the value reaches the kind through its variable while the
    command runs, and the variable is gone after it."""
    from conftest import one_line, run_cli

    from vhpc import cli
    from vhpc.core.errors import HostError
    from vhpc.environments.kind import KINDS, GlobalFlag
    from vhpc.environments.native import NativeKind

    help_ = " ".join(cli.build_parser().format_help().split())
    assert "[--allow-uri URI] [--allow-system-image]" in help_

    @KINDS.register("toyflag")
    class ToyFlag(NativeKind):
        name = "toyflag"
        global_flags = (GlobalFlag("--toy-allow", "VHPC_TOY_ALLOW", "a toy's allowance", "X"),)

        def plan(self, options, host):
            raise HostError(f"toy allowance {os.environ.get('VHPC_TOY_ALLOW')!r}")

    monkeypatch.setenv("VHPC_TOY_ALLOW", "a")
    try:
        rc, _, err = run_cli(capsys, "--toy-allow", "b", "--toy-allow", "c", "compare",
                             "--dry-run", "-b", "stream", "-e", "toyflag")
    finally:
        KINDS.unregister("toyflag")
    one_line(rc, err, "toy allowance 'a,b,c'")
    assert os.environ["VHPC_TOY_ALLOW"] == "a"


def test_paper_help_names_the_registered_executors(capsys, monkeypatch):
    """``vhpc paper --executor``'s metavar is read off the registry, as ``vhpc compare``'s."""
    import pytest

    from vhpc import cli
    from vhpc.executors.base import EXECUTORS
    from vhpc.executors.local import LocalExecutor

    @EXECUTORS.register("toyq")
    class ToyQueue(LocalExecutor):
        name = "toyq"

    monkeypatch.setenv("COLUMNS", "1000")
    try:
        with pytest.raises(SystemExit):
            cli.main(["paper", "--help"])
    finally:
        EXECUTORS.unregister("toyq")
    assert "[--executor local|slurm|toyq[:k=v,...]]" in capsys.readouterr().out
