"""Every ``vhpc`` command shown in a shell block of docs/ (```sh```, ```bash```) is one vhpc
accepts: its flags parse, its benchmarks and environments validate as a campaign's would, its
campaign file loads, its study exists.  Running each would take hours and hardware (Slurm,
libvirt, remote machines), so the check stops where a run would start; the commands that plan
only (``--dry-run``) run whole where this host has what they need."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from vhpc import cli
from vhpc.campaign.study import STUDIES
from vhpc.spec import parse as specmod
from vhpc.workflows.common import spec_from_flags

ROOT = Path(__file__).resolve().parents[1]
#: Placeholders the docs use, with a value of the right form.
PLACEHOLDERS = {"$VHPC_SSH_PORT": "2222"}
#: The README's synopses' placeholders (whole words), with a value of the right form.
SYNOPSIS = {"N": "2", "P": "spread", "BENCH": "stream", "NAME": "co-run", "PCT": "5%",
            "ID": "20261122-005252-e261", "campaign.yaml": "docs/examples/lammps-mpi.yaml"}


#: Every page whose shell blocks show commands: the README, then docs/.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def doc_commands(prefix: str = "vhpc ") -> list[tuple[str, str]]:
    """(file:line, command) of every line starting ``prefix`` in a shell block of
    :data:`PAGES`: line continuations joined, a trailing comment, anything after ``;`` or
    ``&&``, and a synopsis's optional ``[...]`` parts dropped; a synopsis's alternatives
    (``benchmarks|campaigns``) give one command each."""
    out = []
    for path in PAGES:
        text = path.read_text()
        for m in re.finditer(r"```(?:sh|bash|shell|console)\n(.*?)```", text, re.S):
            first = text.count("\n", 0, m.start(1)) + 1
            for i, line in enumerate(m.group(1).replace("\\\n", " ").splitlines()):
                line = line.strip().removeprefix("$ ")
                if not line.startswith(prefix):
                    continue
                line = re.split(r";|&&|\s#", line)[0].strip()
                line = line.split(" [")[0]  # a synopsis: its optional parts left out
                for k, v in PLACEHOLDERS.items():
                    line = line.replace(k, v)
                if path.name == "README.md":
                    line = " ".join(SYNOPSIS.get(w, w) for w in line.split())
                alternatives = re.search(r"(\S+\|\S+)$", line)
                for word in alternatives.group(1).split("|") if alternatives else [None]:
                    command = line[:alternatives.start(1)] + word if word else line
                    out.append((f"{path.relative_to(ROOT)}:{first + i}", command))
    return out


COMMANDS = doc_commands()


def test_the_docs_show_commands():
    assert len(COMMANDS) > 30
    pages = {w.split(":")[0] for w, _ in COMMANDS}
    assert "docs/applications.md" in pages and "README.md" in pages


MAKE_COMMANDS = doc_commands("make ")


@pytest.mark.parametrize("where,command", MAKE_COMMANDS, ids=[w for w, _ in MAKE_COMMANDS])
def test_a_documented_make_command_is_a_target_of_the_makefile(where, command):
    """``make demo``, ``make test`` ... in the README and docs/: each target exists."""
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    for word in shlex.split(command)[1:]:
        if "=" not in word:  # VAR=value is an assignment, not a target
            assert word in targets, f"{where}: make has no target {word!r}"


def test_the_readme_shows_its_two_commands():
    assert {c for w, c in MAKE_COMMANDS if w.startswith("README.md")} >= {"make demo",
                                                                           "make test"}


@pytest.mark.parametrize("where,command", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_a_documented_command_is_one_vhpc_accepts(where, command, monkeypatch):
    argv = shlex.split(command)[1:]
    args = cli.build_parser().parse_args(argv)  # UsageError (exit 2) if a flag is wrong
    if args.command == "compare" and not args.resume:
        spec = spec_from_flags(args)  # the benchmarks, parameters and environments validate
        assert spec.benchmarks and spec.environments
    elif args.command == "run":
        monkeypatch.chdir(ROOT)
        assert specmod.from_file(args.spec).benchmarks
    elif args.command == "study" and args.name != "list":
        assert args.name in STUDIES, f"{where}: no study {args.name!r}"


def test_the_documented_dry_runs_plan(tmp_path, capsys, monkeypatch):
    """The documented planning commands that need nothing but this host run whole."""
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out"
    plans = [c for _, c in COMMANDS if "--dry-run" in c and c.startswith("vhpc tune")]
    assert plans
    for command in plans:
        assert cli.main(shlex.split(command)[1:] + ["--out", str(out)]) == 0, command
        assert "Traceback" not in capsys.readouterr().err


def test_the_documented_campaign_file_plans(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    argv = ["run", "docs/examples/lammps-mpi.yaml", "--dry-run", "--out", str(tmp_path / "out")]
    assert cli.main(argv) == 0, capsys.readouterr().err


def test_a_usage_error_carries_one_prefix(capsys):
    assert cli.main(["run", "x.yaml", "--repeats", "3"]) == 2
    assert capsys.readouterr().err.strip() == (
        "vhpc: error: unrecognized arguments: --repeats 3 (see vhpc --help)")
    assert cli.main(["compare", "--repeats", "x"]) == 2
    assert capsys.readouterr().err.strip() == (
        "vhpc: error: compare: argument --repeats: 'x' is not a whole number (ASCII digits 0-9) "
        "(see vhpc compare --help)")


def readme_synopses() -> list[tuple[str, str]]:
    """(subcommand, synopsis) of each ``vhpc`` line of the README's command list, with its
    indented continuation lines (``          [--candidates LIST] ...``) joined."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## Commands", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    out: list[list[str]] = []
    for line in block.splitlines():
        if line.startswith("vhpc "):
            out.append([line.split()[1], line.split("#")[0]])
        elif line.strip().startswith("[") and out:
            out[-1][1] += " " + line.split("#")[0].strip()
    return [(sub, synopsis) for sub, synopsis in out]


def test_every_flag_of_the_readmes_synopses_is_one_its_command_takes():
    """The optional parts the documented-commands check drops (``[--target-ci PCT]``): each
    flag they name is an option of that subcommand."""
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if a.choices and "compare" in a.choices)
    synopses = readme_synopses()
    assert {"compare", "report", "diff", "tune"} <= {sub for sub, _ in synopses}
    for sub, synopsis in synopses:
        known = subparsers.choices[sub]._option_string_actions
        for flag in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", synopsis.split(" ", 2)[2]
                               if synopsis.count(" ") > 1 else ""):
            assert flag in known, f"README: vhpc {sub} has no option {flag}"
