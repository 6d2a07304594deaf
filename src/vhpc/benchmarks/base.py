"""The benchmark interface and the shared machinery for vhpc's own C kernels.

A :class:`Benchmark` declares its parameters (:class:`Param`), metrics
(:class:`vhpc.core.metrics.Metric`), how to build its command line for an environment
(:meth:`Benchmark.command`) and how to parse raw output into samples (:meth:`Benchmark.parse`).
Parsing is pure, so stored raw output can be re-parsed later without re-running.

vhpc's kernels print exactly one line ``VHPC-RESULT key=value ...`` with ``valid=1|0`` and
exit 3 when their verification fails (kernels/README.md).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from vhpc.benchmarks.kernel import Kernel, make_include
from vhpc.benchmarks.mpilaunch import Launch, marker_re, mpi_tool, readback
from vhpc.core.errors import VhpcError
from vhpc.core.paths import cache_dir, cache_lock, untrusted, write_atomic
from vhpc.core.metrics import Metric, Sample
from vhpc.core.registry import Registry
from vhpc.host.doctor import Component


class BenchmarkError(VhpcError, ValueError):
    """Bad benchmark name or parameter; the message says what to change."""


class ParseError(ValueError):
    """Raw output does not contain what the parser needs (the trial is recorded as failed)."""


@dataclass(frozen=True)
class Param:
    """A benchmark parameter: name, default, type (int/float/str), help text, and optional
    choices or an inclusive minimum.  ``default=None`` means "derived from the environment"
    (e.g. threads = the environment's CPU count)."""

    name: str
    default: Any
    type: Callable[[str], Any] = int
    help: str = ""
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None

    def convert(self, bench: str, raw: Any) -> Any:
        """Convert and validate ``raw``; raises BenchmarkError with what is allowed."""
        try:
            value = self.type(raw)
        except (TypeError, ValueError):
            raise BenchmarkError(
                f"{bench}: {self.name}={raw!r} is not a valid {self.type.__name__}") from None
        if self.choices is not None and value not in self.choices:
            raise BenchmarkError(f"{bench}: {self.name}={value!r}: choose one of "
                                 f"{', '.join(map(str, self.choices))}")
        if self.minimum is not None and value < self.minimum:
            raise BenchmarkError(f"{bench}: {self.name}={value} is below the minimum {self.minimum:g}")
        return value


@dataclass(frozen=True)
class RunContext:
    """What a command line may depend on: ``bindir`` (vhpc's kernel binaries), ``ncpus`` (CPUs
    the environment offers: vCPUs in a VM, allowed host CPUs natively), ``cpuset`` (the host
    CPUs a native environment restricts its trials to, for ``mpirun --cpu-set``: Open MPI maps
    ranks onto the whole machine otherwise, ignoring the affinity it was started with; None:
    no restriction), ``remote`` (a :class:`Remote` where the trial runs on another file
    system, else None)."""

    bindir: Path
    ncpus: int
    cpuset: tuple[int, ...] | None = None
    remote: "Remote | None" = None


@dataclass(frozen=True)
class Remote:
    """Where a trial that does not see this host's file system (``ssh``, a user's image) finds
    what vhpc copied there: ``python`` (the interpreter there), ``rankrun`` (path of
    ``rankrun.py`` there) and ``files`` (host path of each input → path of its copy there).
    Environments that see the host's files (native, vhpc's own guests) give none."""

    python: str
    rankrun: str
    files: Mapping[str, str]


#: MPI implementations vhpc builds and launches its kernels with (Debian's packages install
#: both side by side: ``mpicc.openmpi``/``mpirun.openmpi`` and ``mpicc.mpich``/``mpirun.mpich``).
MPI_IMPLS = ("openmpi", "mpich")

#: The ``mpi`` parameter of every MPI benchmark vhpc builds itself.
MPI_PARAM_HELP = "MPI implementation the kernel is built and launched with"


MPI_PARAM = Param("mpi", "openmpi", str, MPI_PARAM_HELP, choices=MPI_IMPLS)


@dataclass(frozen=True)
class Check:
    """A correctness check against the baseline environment (as ReFrame's hpctestlib checks an
    application's energy against a reference): ``metric`` names a figure the run prints (an
    energy, a residual) that the benchmark also reports as a sample; a trial whose value
    differs from the baseline environment's by more than ``rtol`` (relative, |v - ref| / |ref|)
    fails the check and all its samples are stored invalid.  ``what`` names the figure for
    people ("final total energy per atom").  Trials are compared only with baseline trials
    that ran the same problem (:meth:`Benchmark.check_key`).  A benchmark may carry several
    (:attr:`Benchmark.checks`); a trial fails when any of them does.  ``rtol`` None: an
    identity figure (a file-system size, a version number) that differs between environments
    by design: shown beside the baseline's as a check, never compared, never failing a trial
    and never a metric with a verdict."""

    metric: str
    rtol: float | None
    what: str = ""


class Benchmark:
    """Base class.  Subclasses set ``name``, ``summary``, ``provenance`` (seed figure),
    ``params``, ``metrics``, ``verification`` and implement :meth:`command` and :meth:`parse`.
    """

    name: str = ""
    summary: str = ""
    provenance: str = ""
    verification: str = "none"
    params: tuple[Param, ...] = ()
    metrics: tuple[Metric, ...] = ()
    timeout: float = 600.0
    #: correctness check against the baseline environment's value (None: the benchmark has
    #: its own verification or none); see :class:`Check` and vhpc.campaign.checks
    check: Check | None = None
    #: every check when there are several (an application's energy and temperature); ``check``
    #: is then the first of them.  Read both through :meth:`all_checks`.
    checks: tuple[Check, ...] = ()
    #: parameters kept in the stored spec even when left at their defaults: the problem's size
    #: (an application's atoms and steps), so a stored campaign says what was computed
    stored_params: tuple[str, ...] = ()
    #: How it times what it reports, and why: its "timing" line in docs/benchmarks.md
    #: (tests/test_suites.py fails for a built-in benchmark without one).
    timing: str = ""
    #: In the quick suite: what ``vhpc compare`` and ``vhpc calibrate`` run without ``-b``.
    quick: bool = False
    #: What ``vhpc doctor`` checks for it (:class:`vhpc.host.doctor.Component`), beside the
    #: host tools every benchmark shares.
    components: tuple[Component, ...] = ()
    #: vhpc's own C programs it runs (:class:`~vhpc.benchmarks.kernel.Kernel`): what
    #: kernels/Makefile builds, and with which libraries.
    kernels: tuple[Kernel, ...] = ()

    @property
    def binary(self) -> str:
        """The file name of its first kernel in the build folder ("" without one): what a
        campaign builds for it (one make goal builds a Makefile's every kernel)."""
        return self.kernels[0].binary if self.kernels else ""

    def all_checks(self) -> tuple[Check, ...]:
        """The benchmark's checks: :attr:`checks`, else (:attr:`check`,), else ()."""
        return self.checks or ((self.check,) if self.check is not None else ())

    def pairs(self) -> tuple[tuple[str, str, str], ...]:
        """Metric pairs the benchmark declares (:attr:`Metric.inverse_of`,
        :attr:`Metric.same_as`): ``(metric, partner, kind)`` with kind ``"inverse"`` (their
        product is one constant in every trial) or ``"same"`` (their quotient is)."""
        out = []
        for m in self.metrics:
            if m.inverse_of:
                out.append((m.name, m.inverse_of, "inverse"))
            if m.same_as:
                out.append((m.name, m.same_as, "same"))
        return tuple(out)

    def problem(self, params: Mapping[str, Any], ncpus: int) -> dict[str, Any] | None:
        """The problem a trial computes in an environment offering ``ncpus`` CPUs, resolved
        (e.g. ``{"ranks": 2, "atoms": 32000}``): two environments whose problems differ are not
        compared (:func:`vhpc.campaign.likewise.check`).  None (the default): the
        benchmark declares none."""
        return None

    def bounds(self, params: Mapping[str, Any], ncpus: int, memory: int | None) -> None:
        """Refuse parameters an environment of ``ncpus`` CPUs and ``memory`` bytes (None:
        unknown) cannot hold, before anything runs.  Raises BenchmarkError (one line saying
        what to change); nothing by default."""

    def copied_inputs(self, params: Mapping[str, Any], ncpus: int = 1) -> list[str]:
        """Host files and folders a trial in an environment offering ``ncpus`` CPUs stages
        into its working directory, which an environment on another file system (ssh, a
        user's image) copies there before the trial and hands back in
        :attr:`RunContext.remote`.  [] by default."""
        return []

    def host_paths(self, params: Mapping[str, Any]) -> list[str]:
        """Files and folders of the host a trial reads where it runs (inputs staged into the
        working directory, prepared run inputs): a guest sees them through the shared root,
        except under the directories it replaces with its own (``/tmp``, ...), which the
        campaign refuses before anything runs.  Call after :meth:`preflight` where there is
        one.  [] by default."""
        return []

    def check_key(self, params: Mapping[str, Any], stdout: str) -> str:
        """What a trial's check value may be compared with: only baseline trials with the same
        key (e.g. "4000 atoms on 2 ranks": ranks=auto resolves per environment).  Parsed from
        the trial's own output; "" (the default) compares every trial of the same
        parameters."""
        return ""

    def resolve(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Parameters with defaults filled in and overrides converted and validated.

        Returns {name: value}; a None value is derived from the environment at run time.
        Raises BenchmarkError for unknown names or bad values, listing what is allowed.
        """
        known = {p.name: p for p in self.params}
        values = {p.name: p.default for p in self.params}
        for key, raw in (overrides or {}).items():
            if key not in known:
                allowed = ", ".join(known) or "none"
                raise BenchmarkError(f"{self.name}: unknown parameter {key!r} (parameters: {allowed})")
            values[key] = known[key].convert(self.name, raw)
        return values

    def metric(self, name: str) -> Metric:
        """The declared :class:`Metric` named ``name``.  Raises KeyError when the benchmark
        declares none by that name."""
        for m in self.metrics:
            if m.name == name:
                return m
        raise KeyError(name)

    def command(self, params: Mapping[str, Any], ctx: RunContext) -> list[str]:
        """argv for one trial (a list, never a shell string).  Every benchmark defines it: the
        base raises NotImplementedError."""
        raise NotImplementedError

    def environ(self, params: Mapping[str, Any], ctx: RunContext) -> dict[str, str]:
        """Extra environment variables for one trial."""
        return {}

    def launch(self, params: Mapping[str, Any], ctx: RunContext) -> Launch | None:
        """The MPI launch of one trial (None: not an MPI trial)."""
        return None

    def auto_values(self, params: Mapping[str, Any], llc_owner: str | None) -> dict[str, str]:
        """Text for parameters left unset (``None``) that the benchmark derives at run time,
        as a plan (``--dry-run``) shows them for an environment whose caches are
        ``llc_owner``'s (e.g. "the guest's"; None: this host's, read now — the kind's
        :attr:`~vhpc.environments.kind.EnvironmentKind.llc_owner`); parameters not listed show
        ``auto``.  Reads host facts only (sysfs), never runs anything."""
        return {}

    def readback(self, params: Mapping[str, Any], ctx: RunContext,
                 stdout: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(applied, diagnostics) additions for one finished trial: an MPI trial's per-rank
        placement read back from its ``VHPC-RANK`` lines (``applied["ranks"]``, and
        ``applied["mismatches"]`` when ranks shared CPUs they should not have) and its launch
        (``diagnostics["mpi"]``: launcher, oversubscription note).  ({}, {}) otherwise."""
        launch = self.launch(params, ctx)
        if launch is None:
            return {}, {}
        return readback(launch, stdout), {"mpi": launch.diagnostics()}

    def parse(self, params: Mapping[str, Any], stdout: str, stderr: str,
              returncode: int | None) -> list[Sample]:
        """Samples from raw output.  Raises ParseError when the output has no result (the base
        raises NotImplementedError: every benchmark defines it)."""
        raise NotImplementedError


RESULT_RE = marker_re("VHPC-RESULT")


def parse_result_line(stdout: str) -> dict[str, str]:
    """The ``key=value`` pairs of the last ``VHPC-RESULT`` line in ``stdout``.
    Raises ParseError when there is none."""
    found = RESULT_RE.findall(stdout)
    if not found:
        raise ParseError("no VHPC-RESULT line in the output")
    pairs = {}
    for token in found[-1].split():
        key, sep, value = token.partition("=")
        if sep:
            pairs[key] = value
    return pairs


def result_value(bench: str, pairs: Mapping[str, str], key: str) -> float:
    """``pairs[key]`` as a float.  Raises ParseError naming the benchmark and key when the
    result line lacks the key or its value is not a number."""
    if key not in pairs:
        raise ParseError(f"{bench}: result line lacks {key}")
    try:
        return float(pairs[key])
    except ValueError:
        raise ParseError(f"{bench}: {key}={pairs[key]!r} is not a number") from None


def kernel_sources() -> Path:
    """The kernels' sources shipped with vhpc (C, Makefiles: ``vhpc/kernels`` in the installed
    package; in a checkout a link to the top-level ``kernels/``)."""
    return Path(__file__).resolve().parents[1] / "kernels"


def _checkout_build() -> Path | None:
    """``<repo>/kernels/build`` when vhpc runs from a checkout (``make kernels`` builds there)."""
    repo = Path(__file__).resolve().parents[3] / "kernels"
    return repo / "build" if (repo / "Makefile").exists() else None


def kernel_source_files(src: Path | None = None) -> list[Path]:
    """The kernel sources under ``src`` (default :func:`kernel_sources`), sorted: every file
    but those in build output folders (``build*``: they change with every build) and
    dot-folders, dot-files (the builds' ``.build*.lock`` appear with the first build) and
    objects (``.o``, ``.pyc``)."""
    src = src or kernel_sources()
    found = []
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if not d.startswith(("build", "."))]
        found += [Path(root, f) for f in files
                  if not f.endswith((".o", ".pyc")) and not f.startswith(".")]
    return sorted(found)


def source_hash(src: Path | None = None, also: tuple[Path, ...] = ()) -> str:
    """16 hex digits naming one state of the kernel sources: SHA-256 over the relative path
    and bytes of each of :func:`kernel_source_files`, then the bytes of each file in ``also``
    (what travels with them to a machine that builds them itself: the run wrapper).  The one
    hash of the sources: :func:`build_key` starts from it, and a remote kernel folder is
    named by it.  Raises OSError when a file cannot be read."""
    src = src or kernel_sources()
    h = hashlib.sha256()
    for path in kernel_source_files(src):
        h.update(str(path.relative_to(src)).encode() + b"\0" + path.read_bytes())
    for path in also:
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def build_key(mpi: str = "openmpi") -> str:
    """16 hex digits naming one build: SHA-256 of the sources' :func:`source_hash`, the C
    compiler's and the MPI wrapper's ``--version`` first lines and ``CFLAGS``/``MARCH`` from the
    environment, so a new compiler, MPI or source gets a build of its own."""
    h = hashlib.sha256(source_hash().encode())
    for tool in (os.environ.get("CC") or "cc", mpi_tool(mpi, "mpicc")):
        try:
            out = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30)
            h.update(out.stdout.split("\n", 1)[0].encode())
        except (OSError, subprocess.TimeoutExpired):
            h.update(b"missing " + tool.encode())
    h.update(f"{os.environ.get('CFLAGS', '')}|{os.environ.get('MARCH', '')}".encode())
    return h.hexdigest()[:16]


def kernel_dir(mpi: str = "openmpi") -> Path:
    """Directory of vhpc's compiled kernels: ``$VHPC_KERNELS``; else ``<repo>/kernels/build`` in
    a checkout; else the per-user cache ``~/.cache/vhpc/kernels-<build_key>`` (an installed
    vhpc builds there on first use, :func:`ensure_kernels`).  The MPICH build is the same path
    with ``-mpich`` appended."""
    env = os.environ.get("VHPC_KERNELS")
    if env:  # absolute before use: make runs in the sources' folder (make -C), not here
        base = Path(os.path.abspath(os.path.expanduser(env)))
    else:
        base = _checkout_build() or cache_dir() / f"kernels-{build_key()}"
    return base if mpi == "openmpi" else base.with_name(f"{base.name}-{mpi}")


def kernel_build_flags(mpi: str = "openmpi") -> str | None:
    """The compiler flags vhpc's kernels were built with (``build-flags`` that kernels/Makefile
    writes, e.g. ``CFLAGS=-O3 -g`` or ``CFLAGS=-O3 -g -march=native``), None before a build.
    Recorded in the environment fingerprint: ``-march=native`` changes what a guest CPU model
    must offer."""
    try:
        return (kernel_dir(mpi) / "build-flags").read_text().strip()
    except OSError:
        return None


def check_trusted(bindir: Path) -> None:
    """Refuse a kernel folder (``$VHPC_KERNELS`` or a build folder) that belongs to another
    user or that others may write: vhpc executes its binaries, as root when run as root (the
    rule of every cache, :func:`vhpc.core.paths.untrusted`).  A folder that does not exist yet
    is judged by the nearest existing folder above it.  Raises BenchmarkError naming the
    folder and the fix."""
    why = untrusted(bindir, follow=True)
    if why:
        raise BenchmarkError(f"kernel folder {bindir}: {why}: vhpc would run binaries someone else "
                             "can replace; use a folder of your own (chown, chmod go-w) or "
                             "unset VHPC_KERNELS")


def _built_key(bindir: Path) -> str | None:
    """The build key kernels/Makefile recorded in ``bindir/build-key`` (None before)."""
    try:
        return (bindir / "build-key").read_text().strip() or None
    except OSError:
        return None


#: Holds the build until its guard watches, then runs make (``exec``: same pid and group).
_GATE = 'read go || exit 125; exec "$@" </dev/null'


def _make(argv: list[str]) -> subprocess.CompletedProcess:
    """Run the kernel build ``argv`` (make) in a process group that dies with vhpc: a
    ``kill -9`` of vhpc mid-build leaves no make or cc1 behind (the same guard as native
    trials, :class:`vhpc.host.owned.GroupGuard`); an interrupt kills the group too."""
    from vhpc.host import owned

    proc = subprocess.Popen(["/bin/sh", "-c", _GATE, "vhpc-build", *argv],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        guard = owned.GroupGuard(proc.pid)
    except OSError as exc:
        proc.stdin.close()  # type: ignore[union-attr]  # the gate exits unstarted
        proc.communicate()
        raise BenchmarkError(f"cannot build the kernels: no process guard ({exc})") from None
    try:
        proc.stdin.write(b"go\n")  # type: ignore[union-attr]
        proc.stdin.close()  # type: ignore[union-attr]
        proc.stdin = None
        out, err = proc.communicate()
    except BaseException:
        owned.kill_session(proc.pid)
        proc.wait()
        raise
    finally:
        guard.done()
    return subprocess.CompletedProcess(argv, proc.returncode, out.decode("utf-8", "replace"),
                                       err.decode("utf-8", "replace"))


#: The tools a kernel build needs and the Debian packages that provide them.
BUILD_TOOLS = {"make": "make", "cc": "build-essential (gcc)"}

def declared_kernels() -> dict[str, Kernel]:
    """Every C kernel the registered benchmarks run (their :attr:`Benchmark.kernels`), by
    binary, sorted.  Raises ValueError when two benchmarks declare one binary differently."""
    out: dict[str, Kernel] = {}
    for _, bench in BENCHMARKS.items():
        for k in bench.kernels:
            if out.setdefault(k.binary, k) != k:
                raise ValueError(f"kernel {k.binary} is declared twice, differently: "
                                 f"{out[k.binary]} and {k}")
    return dict(sorted(out.items()))


def kernels_include() -> str:
    """``kernels/kernels.mk`` as the registered benchmarks declare their kernels
    (:func:`vhpc.benchmarks.kernel.make_include`)."""
    return make_include(list(declared_kernels().values()))


def lacking(components: tuple[Component, ...]) -> list[Component]:
    """Those of ``components`` this host lacks (:func:`vhpc.host.doctor.check`)."""
    from vhpc.host import doctor

    return [c for c in components if not doctor.check(c)[0]]


def unbuildable(binaries: list[str] | set[str], mpi: str = "openmpi") -> dict[str, str]:
    """Those of ``binaries`` this host cannot build, each with why and the Debian package that
    would add it (``{"vhpc-linpack": "needs LAPACKE + OpenBLAS: apt-get install
    liblapacke-dev libopenblas-dev"}``): a library its :class:`Kernel` declares missing, or
    for an MPI kernel the MPI compiler wrapper of ``mpi``.  Looks only; never raises."""
    out: dict[str, str] = {}
    declared = declared_kernels()
    no_mpicc = shutil.which(mpi_tool(mpi, "mpicc")) is None
    for binary in sorted(binaries):
        kernel = declared.get(binary)
        missing = lacking(kernel.libraries) if kernel else []
        if missing:
            out[binary] = "needs " + " and ".join(c.name for c in missing) + \
                ": apt-get install " + " ".join(c.debian for c in missing)
        elif no_mpicc and kernel is not None and kernel.mpi:
            pkgs = "mpich libmpich-dev" if mpi == "mpich" else "openmpi-bin libopenmpi-dev"
            out[binary] = f"needs {mpi_tool(mpi, 'mpicc')}: apt-get install {pkgs}"
    return out


def make_targets(bindir: Path, binaries: list[str], key: str) -> list[str]:
    """The kernels/Makefile goals that build ``binaries`` into ``bindir``: each binary's path
    (one built by a Makefile of its own, :attr:`Kernel.makefile`, through that folder's goal:
    ``npb`` builds both NPB binaries), so a campaign builds only
    what it runs; [] (every kernel) when ``bindir`` was built for another build key than
    ``key``, whose other binaries would otherwise stay stale under the new key."""
    if _built_key(bindir) not in (None, key):
        return []
    declared = declared_kernels()
    return sorted({declared[b].makefile if b in declared and declared[b].makefile
                   else str(bindir / b) for b in binaries})


def ensure_kernels(binaries: list[str], mpi: str = "openmpi") -> Path:
    """Return the kernel directory for MPI implementation ``mpi``, building the kernels there
    with make (``MPICC=mpicc.<impl>``) when a binary is missing or the folder was built for
    another :func:`build_key` (a source, compiler, MPI or flag changed; recorded in
    ``build-key``): once, under a file lock (a second vhpc waits for the first), with one
    progress line on stderr, in a process group that dies with vhpc.  A ``$VHPC_KERNELS``
    that another user owns or others may write is refused (:func:`check_trusted`).

    The build makes ``binaries`` (:func:`make_targets`; every kernel when the folder was built
    for another key), leaving out those this host cannot build (:func:`unbuildable`: a library
    or the MPI wrapper missing), so that one missing library never blocks the others; the
    build key is recorded once ``binaries`` are all there.

    Raises BenchmarkError naming the missing tool (make, cc), the package a requested kernel
    lacks (LAPACKE, mpicc) or the failed step.
    """
    bindir = kernel_dir(mpi)
    check_trusted(bindir)
    key = build_key(mpi)
    have = all((bindir / b).exists() for b in binaries)
    if have and _built_key(bindir) == key:
        return bindir
    src = kernel_sources()
    if not (src / "Makefile").exists():
        if have:  # prebuilt, nothing to rebuild them from
            return bindir
        raise BenchmarkError(f"kernel binaries missing in {bindir} and no kernel sources in "
                             f"{src}: reinstall vhpc or set VHPC_KERNELS")
    for tool, pkg in BUILD_TOOLS.items():
        if shutil.which(os.environ.get("CC", "cc") if tool == "cc" else tool) is None:
            if have:  # cannot check them against the sources: use them as they are
                return bindir
            raise BenchmarkError(f"building vhpc's kernels needs {tool}: apt-get install {pkg}")
    mpicc = mpi_tool(mpi, "mpicc")
    if not have:
        refused = unbuildable([b for b in binaries if not (bindir / b).exists()], mpi)
        if refused:
            binary, why = next(iter(refused.items()))
            raise BenchmarkError(f"kernel {binary} cannot be built on this host: {why}")
    elif shutil.which(mpicc) is None and any(k.mpi for b, k in declared_kernels().items()
                                             if b in binaries):
        return bindir  # cannot check them against the sources: use them as they are
    # kernels whose library this host lacks are left out of the build (SKIP), so that a
    # build of every kernel never fails on them; make skips MPI kernels itself without mpicc
    skip = sorted(unbuildable({b for b, k in declared_kernels().items() if k.libraries}, mpi))
    bindir.parent.mkdir(parents=True, exist_ok=True)
    # another vhpc building the same kernels: wait for it (a lock opened without following)
    with cache_lock(bindir.parent / f".{bindir.name}.lock"):
        if not all((bindir / b).exists() for b in binaries) or _built_key(bindir) != key:
            first = not all((bindir / b).exists() for b in binaries)
            sys.stderr.write(f"vhpc: building the kernels into {bindir} "
                             f"({'first use' if first else 'sources, compiler or flags changed'})\n")
            sys.stderr.flush()
            out = _make(["make", f"-j{min(os.cpu_count() or 1, 16)}", "-C", str(src),
                         f"BUILD={bindir}", f"MPICC={mpicc}", f"SKIP={' '.join(skip)}",
                         f"VHPC_BUILD_KEY={key}", *make_targets(bindir, binaries, key)])
            if out.returncode != 0:
                text = out.stderr or out.stdout
                if "omp.h" in text or "fopenmp" in text:
                    raise BenchmarkError("building vhpc's kernels needs OpenMP (libgomp): "
                                         "apt-get install build-essential")
                tail = text.strip().splitlines()[-1:]
                raise BenchmarkError(f"building the kernels failed ({' '.join(tail)}): install "
                                     "build-essential, libopenmpi-dev and openmpi-bin")
            missing = [b for b in binaries if not (bindir / b).exists()]
            if not missing:  # recorded only now: a killed or failed build is redone
                write_atomic(bindir / "build-key", key + "\n")
    missing = [b for b in binaries if not (bindir / b).exists()]
    if missing:
        raise BenchmarkError(f"building the kernels did not produce {', '.join(missing)} "
                             f"(see 'make -C {src} BUILD={bindir} MPICC={mpicc}')")
    return bindir


@dataclass(frozen=True)
class Suite:
    """A named group of benchmarks listed together (``vhpc list benchmarks``, ``-b``'s help):
    ``name``, ``summary`` (one line), ``position``, where it stands among the suites (lower
    first), and ``default``: ``vhpc compare`` and ``vhpc calibrate`` run its benchmarks when
    no ``-b`` is given (the quick suite).  Declared once with :func:`suite`; its module
    registers its members with :func:`register`."""

    name: str
    summary: str
    position: int
    default: bool = False


#: Every suite by name, in :attr:`Suite.position` order.
SUITES: Registry[Suite] = Registry("suite", "vhpc.benchmarks", recursive=True,
                                   key=lambda s: (s.position, s.name))

#: Benchmark name → (its suite, its place in the suite), filled by :func:`register`.
_MEMBERS: dict[str, tuple[Suite, int]] = {}


def suite(name: str, summary: str, position: int, default: bool = False) -> Suite:
    """Declare and register the suite ``name`` (see :class:`Suite`) on behalf of the calling
    module.  Raises DuplicateName when another module of vhpc declared that name."""
    caller = sys._getframe(1).f_globals.get("__name__", "")
    return SUITES.register(name, caller)(Suite(name, summary, position, default))


def suite_of(name: str) -> Suite | None:
    """The suite the benchmark ``name`` was registered in (None: registered on its own, as an
    outside package may)."""
    return _MEMBERS.get(name, (None, 0))[0]


def listing_order(bench: "Benchmark") -> tuple:
    """Where ``bench`` stands in listings: by its suite's position, then its place in the
    suite (as its module registered it), then by name; benchmarks in no suite last."""
    found, place = _MEMBERS.get(bench.name, (None, 0))
    if found is None:
        return (float("inf"), "", 0, bench.name)
    return (found.position, found.name, place, bench.name)


#: Every benchmark by name: vhpc's (every module of :mod:`vhpc.benchmarks` is imported on the
#: first lookup, and registers its own with :func:`register`) and those an outside package
#: registers (``BENCHMARKS.register("name")(MyBenchmark())`` in a ``vhpc.parts`` module), in
#: :func:`listing_order`.
BENCHMARKS: Registry[Benchmark] = Registry("benchmark", "vhpc.benchmarks", recursive=True,
                                           key=listing_order)


def register(into: Suite, *benchmarks: Benchmark) -> None:
    """Register ``benchmarks`` in :data:`BENCHMARKS` as members of the suite ``into``, in the
    order given (their order in listings), on behalf of the calling module (a plugin's parts
    stay guests: :meth:`vhpc.core.registry.Registry.register`).  Raises DuplicateName for a
    name vhpc's own parts took twice."""
    caller = sys._getframe(1).f_globals.get("__name__", "")
    for place, bench in enumerate(benchmarks):
        BENCHMARKS.register(bench.name, caller)(bench)
        if bench.name not in _MEMBERS or caller.split(".")[0] == "vhpc":  # vhpc's part stays
            _MEMBERS[bench.name] = (into, place)


@dataclass(frozen=True)
class KernelBenchmark(Benchmark):
    """A benchmark backed by one of vhpc's C kernels.

    kernel: the C program it runs (:class:`~vhpc.benchmarks.kernel.Kernel`: its binary under
    kernels/build, how it is built); flags: param name → command-line flag;
    mpi_ranks: param holding the rank count (None: not MPI); threads_param: param holding the
    OpenMP thread count (None: not OpenMP); metrics: result key → Metric via ``Metric.name``;
    optional: metrics that are only reported for some parameters (e.g. ``file_us``).
    """

    name: str = ""
    summary: str = ""
    provenance: str = ""
    verification: str = "none"
    kernel: Kernel = Kernel("")
    params: tuple[Param, ...] = ()
    metrics: tuple[Metric, ...] = ()
    flags: Mapping[str, str] = field(default_factory=dict)
    mpi_ranks: str | None = None
    threads_param: str | None = None
    timeout: float = 600.0
    optional: frozenset[str] = frozenset()
    timing: str = ""

    @property
    def kernels(self) -> tuple[Kernel, ...]:  # type: ignore[override]
        """Its one kernel (none while :attr:`kernel` names no binary)."""
        return (self.kernel,) if self.kernel.binary else ()

    @property
    def components(self) -> tuple[Component, ...]:  # type: ignore[override]
        """The libraries its kernel declares: ``vhpc doctor`` lists them, a campaign that runs
        it on a host without them is refused."""
        return self.kernel.libraries

    def value(self, params: Mapping[str, Any], key: str, ctx: RunContext) -> Any:
        """Parameter ``key`` of a trial: its value, or ``ctx.ncpus`` (the environment's CPUs) when
        it is unset (None)."""
        v = params.get(key)
        return ctx.ncpus if v is None else v

    def launch(self, params, ctx):
        """The MPI launch when the kernel is an MPI one (:attr:`mpi_ranks`): that parameter's ranks
        of :attr:`threads_param` threads each (1 without one), with the ``mpi`` parameter's
        implementation (default openmpi), within ``ctx.cpuset``.  None for a kernel that is not
        MPI."""
        if not self.mpi_ranks:
            return None
        threads = self.value(params, self.threads_param, ctx) if self.threads_param else 1
        return Launch(self.value(params, self.mpi_ranks, ctx), threads,
                      params.get("mpi", "openmpi"), ctx.ncpus, cpuset=ctx.cpuset)

    def command(self, params, ctx):
        """argv of one trial: the kernel under ``ctx.bindir`` with one ``flag value`` pair per
        :attr:`flags` entry (a parameter whose value is "" gives no option), behind the launcher
        prefix for an MPI kernel."""
        argv = [str(ctx.bindir / self.binary)]
        for pname, flag in self.flags.items():
            value = self.value(params, pname, ctx)
            if value != "":  # an empty string parameter means "option not given"
                argv += [flag, str(value)]
        launch = self.launch(params, ctx)
        return launch.argv() + argv if launch else argv

    def environ(self, params, ctx):
        """The MPI launch's variables for an MPI kernel; for an OpenMP one ``OMP_NUM_THREADS`` (the
        thread parameter, else the environment's CPUs) and ``OMP_PROC_BIND=spread``; otherwise
        none."""
        launch = self.launch(params, ctx)
        if launch is not None:
            return launch.environ()
        if self.threads_param:
            return {"OMP_NUM_THREADS": str(self.value(params, self.threads_param, ctx)),
                    "OMP_PROC_BIND": "spread"}
        return {}

    def parse(self, params, stdout, stderr, returncode):
        """One :class:`Sample` per declared metric, read from the last ``VHPC-RESULT`` line, in the
        metric's declared unit; valid when that line says ``valid=1`` and the exit status is 0.
        Metrics in :attr:`optional` may be absent.  Raises ParseError when there is no result line,
        or it lacks a metric that is not optional, or a value is not a number."""
        pairs = parse_result_line(stdout)
        valid = pairs.get("valid") == "1" and returncode == 0
        samples = []
        for m in self.metrics:
            if m.name not in pairs and m.name in self.optional:
                continue
            value = result_value(self.name, pairs, m.name)
            samples.append(Sample(m.name, value, m.unit, m.higher_is_better, valid))
        return samples
