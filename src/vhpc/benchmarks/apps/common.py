"""What vhpc's application benchmarks (LAMMPS, GROMACS) share: finding the application's
binary, inputs prepared once per content in vhpc's cache, and the per-rank launch.

Launch: the same :class:`~vhpc.benchmarks.mpilaunch.Launch` (launch line, binding, OpenMP
variables) as vhpc's own MPI kernels, with every rank started through ``rankrun.py``
(``python3 -S rankrun.py --stage INPUT NAME ... -- APP ARGS``): it stages the inputs into a fresh
working directory of that rank (``/tmp`` is writable in guests too; the inputs come from the
host's file system, which guests share read-only), runs the application there, prints the
files named with ``--show`` on rank 0 and one ``VHPC-RANK`` line per rank, the record vhpc's
kernels print, so :func:`~vhpc.benchmarks.mpilaunch.readback`, the vcluster's per-guest rank
log and the Slurm executor's ``srun --mpi=pmix`` job step treat an application like a kernel.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Mapping

from vhpc.benchmarks.base import BenchmarkError, ParseError, suite
from vhpc.benchmarks.mpilaunch import Launch
from vhpc.core.paths import cache_dir, cache_lock, check_trusted, trusted_folder, write_atomic

#: The per-rank wrapper (standard library only).
#: The applications' suite: each application module registers its own benchmark into it.
APPS = suite("applications", "real applications from Debian (LAMMPS, GROMACS) with inputs vhpc "
             "writes", 60)

RANKRUN = Path(__file__).resolve().with_name("rankrun.py")

FILE_RE = re.compile(r"^VHPC-FILE-BEGIN name=(\S+)\n(.*?)^VHPC-FILE-END name=\1$", re.M | re.S)


def require(binary: str, package: str, bench: str) -> str:
    """Absolute path of ``binary`` on PATH.  Raises BenchmarkError (one line naming the Debian
    package) when it is missing."""
    path = shutil.which(binary)
    if path is None:
        raise BenchmarkError(f"{bench}: {binary} not found: apt-get install {package}")
    return path


def rank_command(launch: Launch | None, stage: list[str | tuple[str, str]], show: list[str],
                 argv: list[str], env: Mapping[str, str] | None = None,
                 runner: list[str] | None = None) -> list[str]:
    """argv of one application trial: the launcher prefix (none when ``launch`` is None: one
    process), then ``rankrun.py`` with the files to stage (an absolute path, copied under its
    own name, or (path, name)), to print (``show``) and the variables to set in each rank
    (``env``: remote ranks get them too, which a launcher's own environment does not reach),
    then the application.  ``runner``: the interpreter and rankrun.py where the ranks run
    (default: this Python and this rankrun.py, for environments seeing this file system)."""
    cmd = [*(launch.argv() if launch else []),
           *(runner or [sys.executable, "-S", str(RANKRUN)])]
    for item in stage:
        src, name = (item, os.path.basename(item.rstrip("/"))) if isinstance(item, str) \
            else item
        cmd += ["--stage", src, name]
    for name in show:
        cmd += ["--show", name]
    for key, value in (env or {}).items():
        cmd += ["--env", f"{key}={value}"]
    return cmd + ["--", *argv]


def app_argv0(binary: str, package: str, bench: str, remote) -> str:
    """The application's argv[0]: this host's ``binary`` (:func:`require`) where the trial
    sees this host's files, else (``remote``, a :class:`~vhpc.benchmarks.base.Remote`: ssh,
    a user's image) the bare name, found on the PATH where the ranks run.  Raises
    BenchmarkError when this host lacks it."""
    return binary if remote is not None else require(binary, package, bench)


def remote_stage(stage: list[str], remote) -> list[str | tuple[str, str]]:
    """``stage`` (host paths) as :func:`rank_command` takes them: unchanged on this host's
    file system, else each path's copy where the ranks run (``remote.files``), under its own
    name."""
    if remote is None:
        return list(stage)
    return [(remote.files[p], os.path.basename(p.rstrip("/"))) for p in stage]


def runner(remote) -> list[str] | None:
    """:func:`rank_command`'s ``runner``: None on this host's file system, else the Python
    and ``rankrun.py`` copied where the ranks run."""
    return None if remote is None else [remote.python, "-S", remote.rankrun]


#: How each application says its version where it is installed: (benchmark, binary, argument,
#: a fixed string of the line, the version's regular expression on that line).  ``lmp -h``:
#: "Large-scale Atomic/Molecular Massively Parallel Simulator - 29 Sep 2021 - Update 2";
#: ``gmx_mpi --version``: "GROMACS version:    2022.5-Debian_2022.5_2".
VERSION_PROBES = (
    ("lammps", "lmp", "-h", "Massively Parallel Simulator",
     r"Massively Parallel Simulator - (.+)$"),
    ("gromacs", "gmx_mpi", "--version", "GROMACS version", r"^GROMACS version:\s+(\S+)"),
)


def version_script() -> str:
    """A POSIX sh script printing the version line of each application of
    :data:`VERSION_PROBES` installed where it runs (nothing for one that is not); exit
    status 0."""
    return "".join(f"command -v {binary} >/dev/null && {binary} {arg} 2>/dev/null | "
                   f"grep -m1 '{line}'; "
                   for _, binary, arg, line, _ in VERSION_PROBES) + "true"


def app_versions(text: str) -> dict[str, str]:
    """``{"lammps": "29 Sep 2021 - Update 2", "gromacs": "2022.5-Debian_2022.5_2"}`` from
    :func:`version_script`'s output; an application not installed is absent."""
    found = {}
    for name, _, _, _, pattern in VERSION_PROBES:
        m = re.search(pattern, text, re.M)
        if m:
            found[name] = m.group(1).strip()
    return found


@functools.lru_cache(maxsize=1)
def host_app_versions() -> dict[str, str]:
    """:func:`app_versions` of this host (and of environments that run its binaries: vhpc's
    own guests share its root), found once per process."""
    res = subprocess.run(["sh", "-c", version_script()], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=120)
    return app_versions(res.stdout)


def shown_file(stdout: str, name: str) -> str | None:
    """The text of file ``name`` as rank 0 printed it after the run (``VHPC-FILE-BEGIN`` ...
    ``VHPC-FILE-END``), None when the output has no such block."""
    for m in FILE_RE.finditer(stdout):
        if m.group(1) == name:
            return m.group(2)
    return None


def apps_dir() -> Path:
    """Where prepared application inputs live: ``apps`` in vhpc's cache (``$VHPC_CACHE``)."""
    return cache_dir() / "apps"


def _manifest(folder: Path) -> str:
    """``SHA256  NAME`` lines (sorted) of every file directly in ``folder`` but the manifest."""
    lines = []
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name != ".done":
            lines.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}")
    return "\n".join(lines) + "\n"


def _intact(folder: Path) -> bool:
    """True when ``folder`` was finished (its ``.done`` manifest exists) and every file still
    has the checksum recorded there (none changed, none missing, none added)."""
    try:
        return (folder / ".done").read_text() == _manifest(folder)
    except OSError:
        return False


def prepared(kind: str, files: Mapping[str, str],
             build: Callable[[Path], None] | None = None, salt: str = "") -> Path:
    """A folder in vhpc's cache holding ``files`` (name → text) and whatever ``build(folder)``
    adds (e.g. a GROMACS run input made by grompp), named after the SHA-256 of the files, the
    ``salt`` (e.g. the application's version) and ``kind``: made once, under a file lock (a
    second vhpc waits), reused by every later trial, and readable in guests (they share the
    host's root file system).  Its ``.done`` records every file's SHA-256; a folder whose files
    no longer match (a damaged or edited ``topol.tpr``, a file missing) is made again, with a
    warning on vhpc's log.  Raises BenchmarkError when ``build`` fails (its message)."""
    h = hashlib.sha256(f"{kind}\0{salt}".encode())
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    root = trusted_folder(apps_dir(), "the application cache")
    folder = root / f"{kind}-{h.hexdigest()[:16]}"
    if _ready(folder):
        return folder
    with cache_lock(root / f".{folder.name}.lock"):
        if _ready(folder):
            return folder
        if (folder / ".done").exists():
            logging.getLogger("vhpc").warning(
                "%s: a prepared input no longer matches its checksum: preparing it again",
                folder)
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        for name, text in files.items():
            write_atomic(folder / name, text)
        if build is not None:
            build(folder)
        write_atomic(folder / ".done", _manifest(folder))
    return folder


def _ready(folder: Path) -> bool:
    """True when the prepared ``folder`` is complete and intact (its ``.done`` manifest matches
    every file's SHA-256: :func:`_intact`) and trusted, with every file in it (this user's or
    root's, written by no one else, no symbolic link): the application runs its inputs, as root
    when vhpc runs as root.  Raises UntrustedError."""
    if not os.path.lexists(folder):
        return False
    check_trusted(folder, "the prepared application input")
    for item in folder.rglob("*"):
        check_trusted(item, "the prepared application input")
    return (folder / ".done").is_file() and _intact(folder)


def run_tool(argv: list[str], cwd: Path, what: str, stdin: str = "") -> str:
    """Run a preparation tool (``gmx solvate``, ``gmx grompp``) in ``cwd``; its stdout.
    Raises BenchmarkError naming ``what`` failed with the tool's last error lines."""
    try:
        out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, input=stdin,
                             timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BenchmarkError(f"{what} failed: {exc}") from None
    if out.returncode != 0:
        lines = [ln.strip() for ln in (out.stderr + out.stdout).splitlines() if ln.strip()]
        fatal = [ln for i, ln in enumerate(lines) if i and lines[i - 1].startswith("Fatal error")]
        tail = "; ".join(fatal or lines[-2:])
        raise BenchmarkError(f"{what} failed (exit status {out.returncode}): {tail}")
    return out.stdout


def number(text: str, what: str) -> float:
    """``float(text)``; raises ParseError naming ``what`` when it is not a number."""
    try:
        return float(text)
    except ValueError:
        raise ParseError(f"{what}: {text!r} is not a number") from None
