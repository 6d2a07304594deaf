"""Bad input is refused before a store exists: every command that starts campaigns (run,
compare, study, paper, tune, calibrate) checks its input, environments, executor and kernels
first, and only then creates ``vhpc.db``; an existing store is left byte for byte as it was."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import yaml

from conftest import one_line, require_tool, run_cli

#: A VM the host cannot pin (the host check in ``execute.prepare``).
TOO_BIG = "vm:vcpus=512"


def _campaign_file(path: Path) -> Path:
    """A campaign file that parses but asks the host for a VM it cannot give."""
    path.write_text(yaml.safe_dump({"benchmarks": ["stream"],
                                    "environments": ["native", {"vm": {"vcpus": 512}}]}))
    return path


def _content(db: Path) -> list[str]:
    """Every row and table of the store ``db`` as SQL (its WAL included)."""
    with sqlite3.connect(db) as con:
        return list(con.iterdump())


def _cases(tmp: Path) -> dict[str, tuple[list[str], str]]:
    """Command name → (argv without --out, a word of its one-line error)."""
    return {
        "run": (["run", str(_campaign_file(tmp / "c.yaml"))], "vcpus=512"),
        "compare": (["compare", "-b", "stream", "-e", "native", "-e", TOO_BIG], "vcpus=512"),
        "compare-slurm": (["compare", "-b", "stream", "-e", "native", "--executor", "slurm"],
                          "Slurm"),
        "study": (["study", "socket-span", "--executor", "slurm"], "Slurm"),
        "paper": (["paper", "001", "--executor", "slurm"], "Slurm"),
        "tune": (["tune", "-b", "stream", "--vcpus", "1", "--budget", "1"], "--budget"),
        "calibrate": (["calibrate", "-b", "stream", "-e", TOO_BIG], "vcpus=512"),
    }


@pytest.mark.parametrize("case", ["run", "compare", "compare-slurm", "study", "paper", "tune",
                                  "calibrate"])
def test_bad_input_creates_no_store_and_leaves_an_existing_one_as_it_was(tmp_path, capsys,
                                                                       monkeypatch, case):
    """A missing --out stays missing (no empty vhpc.db, no folder); a results folder holding a
    store keeps it byte for byte, its campaign still listed."""
    if "slurm" in case or case in ("study", "paper"):
        require_tool("sinfo")
        conf = tmp_path / "slurm.conf"  # empty: sinfo refuses at once (a missing one: 60 s)
        conf.write_text("")
        monkeypatch.setenv("SLURM_CONF", str(conf))
    argv, needle = _cases(tmp_path)[case]
    missing = tmp_path / "missing"
    one_line(*run_cli(capsys, *argv, "--out", missing)[::2], needle)
    assert not missing.exists(), sorted(missing.rglob("*"))

    kept = tmp_path / "kept"
    (tmp_path / "ok.yaml").write_text(yaml.safe_dump({
        "custom": [{"name": "p", "command": ["echo", "v 1"],
                    "metrics": [{"name": "v", "regex": r"v (\d+)", "direction": "higher"}]}],
        "benchmarks": ["p"], "environments": ["native"], "warmup": 0, "repeats": 1}))
    assert run_cli(capsys, "run", tmp_path / "ok.yaml", "--out", kept, "--no-report")[0] == 0
    db = kept / "vhpc.db"
    before = _content(db)
    files = sorted(p.name for p in kept.iterdir())
    one_line(*run_cli(capsys, *argv, "--out", kept)[::2], needle)
    assert _content(db) == before
    assert sorted(p.name for p in kept.iterdir()) == files
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM trials WHERE status='done'").fetchone() == (1,)


def test_a_bad_out_is_refused_before_the_preflight(tmp_path, capsys):
    """--out naming a file that is not a store: one line about --out, the file untouched,
    before the environments are checked (the too-big VM is not what the error names)."""
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "vhpc.db").write_text("my notes\n")
    one_line(*run_cli(capsys, "compare", "-b", "stream", "-e", "native", "-e", TOO_BIG,
                      "--out", foreign)[::2], "not a vhpc store")
    assert (foreign / "vhpc.db").read_text() == "my notes\n"


def test_resume_of_a_missing_store_creates_none(tmp_path, capsys):
    """``compare --resume ID`` on a folder without a store: one line, nothing created."""
    one_line(*run_cli(capsys, "compare", "--resume", "c-1", "--out", tmp_path / "o")[::2],
             "no vhpc store")
    assert not (tmp_path / "o").exists()
