"""Bring-your-own benchmarks: any command whose output holds the numbers, read with regexes.

A :class:`CommandBenchmark` runs a fixed argv (no parameters) and extracts each metric with a
regular expression that has exactly one capture group (the number).  Build one in code, or
from a campaign-file entry with :func:`from_mapping`::

    name: mybench
    command: ["sh", "-c", "echo 'rate: 12.5 MB/s'; echo PASSED"]   # or one string (shlex)
    metrics:
      - {name: rate, regex: 'rate: ([0-9.eE+-]+)', unit: MB/s, higher_is_better: true}
      - {name: time, regex: 'took ([0-9.]+) s', unit: s, direction: lower}
      - {name: gbps, regex: '([0-9.]+) Gbit/s', unit: Gbit/s, direction: higher,
         same_as: rate}   # optional: inverse_of: METRIC (a time and its rate) or
                          # same_as: METRIC (one rate in two units): one verdict for both
    success: PASSED        # optional: samples are invalid when this regex is not found
    env: {OMP_NUM_THREADS: "2"}   # optional
    timeout: 300                   # optional, seconds: the trial is killed and stored failed
                                   # after min(timeout, the campaign's --timeout)
    mpi: {ranks: 2, threads: 1, implementation: openmpi}   # optional: an MPI application
    inputs: [/abs/path/in.lj, /abs/path/potentials/,      # optional: staged per trial
             {src: /abs/path/run-7.dat, as: data.in}]     # (renamed in the rank's folder)
    check: {metric: energy, rtol: 1.0e-4}                  # optional: against the baseline's

``mpi:`` launches the command exactly as vhpc's own MPI kernels (:class:`Launch`: ``mpirun
-np R --map-by slot:PE=T --bind-to core``, MPICH ``-bind-to core:T``; OpenMP variables per
rank), so it runs natively, in a VM, across the guests of a ``vcluster`` and as an ``srun
--mpi=pmix`` job step under ``--executor slurm``; ``ranks`` defaults to the environment's CPUs.
With ``mpi:`` or ``inputs:`` every rank (or the single process) runs under ``rankrun.py``
(:mod:`vhpc.benchmarks.apps.common`): a fresh working directory per rank under ``/tmp`` with
the ``inputs`` copied in (files, or folders with their contents; guests and Slurm nodes read
them from the host's file system), ``env:`` set for the rank itself (remote ranks too), and one
``VHPC-RANK`` line per rank for the placement read-back; where trials run on another file
system (``ssh``, ``vm:image=``) the inputs and ``rankrun.py`` are copied there first and the
ranks run that copy with the ``python3`` there.  An input is a regular file or a folder
(every symbolic link inside it leading to one), copied under its own name or the plain file
name given as ``as:``.  ``check:`` names a metric (or gives
``name``/``regex``/``unit`` for a figure that is only checked) whose value must agree with the
baseline environment's within the relative tolerance ``rtol``; a trial that fails it is stored
invalid (:mod:`vhpc.campaign.checks`).  Without ``rtol`` the figure is an identity figure (a
file-system size, a version) that may differ between environments: shown as a check beside
the baseline's, never compared and never given a verdict.  A metric's direction is
``higher_is_better: true|false`` or ``direction: higher|lower``; ``signed: true`` says its
values can be ≤ 0 (an energy balance, a difference), so it is compared by the difference of
means, not on the log scale (docs/statistics.md).  ``inverse_of`` (opposite direction, the
product is one constant in every trial) and ``same_as`` (the same direction, the quotient is)
declare that two metrics measure one effect, so the analysis gives them one verdict
(:attr:`vhpc.core.metrics.Metric.inverse_of`); nothing is inferred from the data.

Regexes are Python ``re`` patterns searched with MULTILINE in stdout followed by stderr; when a
pattern matches several times the **last** match counts (final results are usually printed
last).  Without ``mpi:``/``inputs:`` the command runs in the environment as given (on the
host, or inside the guest, which sees the host's root filesystem read-only and a writable
/tmp), so use absolute paths; with them, in the rank's working directory.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any, Iterable, Mapping

import regex

from vhpc.benchmarks.base import MPI_IMPLS, Benchmark, BenchmarkError, Check, ParseError
from vhpc.benchmarks.mpilaunch import Launch
from vhpc.core.metrics import Metric, Sample
from vhpc.core.paths import input_problem

#: Longest ``timeout:`` a custom benchmark may ask for (seconds; a week).
MAX_TIMEOUT = 7 * 24 * 3600

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
#: An environment variable name (POSIX: letters, digits and underscores, no leading digit).
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


#: Seconds one user regex may search one trial's output: a pattern that backtracks
#: catastrophically (``((?:a+)+)b``) fails that trial's parse instead of hanging vhpc.
REGEX_TIMEOUT = 10.0


class UserRegex:
    """A user's regex (third-party ``regex`` engine) whose searches are bounded in time by
    :data:`REGEX_TIMEOUT`: past it, :class:`ParseError` naming the pattern."""

    def __init__(self, rx: Any):
        self.rx = rx
        self.pattern: str = rx.pattern
        self.groups: int = rx.groups

    def _bounded(self, how: str, text: str) -> Any:
        try:
            return getattr(self.rx, how)(text, timeout=REGEX_TIMEOUT)
        except TimeoutError:
            raise ParseError(f"regex {self.pattern!r} took over {REGEX_TIMEOUT:g} s on the "
                             "output (catastrophic backtracking): simplify it, e.g. no nested "
                             "repeats like (a+)+") from None

    def search(self, text: str) -> Any:
        """The first match in ``text`` or None (bounded in time)."""
        return self._bounded("search", text)

    def findall(self, text: str) -> list:
        """Every match in ``text`` (bounded in time)."""
        return self._bounded("findall", text)


def _compile(what: str, pattern: Any, groups: int | None) -> UserRegex:
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"{what}: give a regular expression as a non-empty string")
    try:
        rx = UserRegex(regex.compile(pattern, regex.M | regex.V0))
    except (regex.error, ValueError, OverflowError) as exc:
        raise ValueError(f"{what}: invalid regular expression {pattern!r} ({exc})") from None
    if groups is not None and rx.groups != groups:
        raise ValueError(f"{what}: regex {pattern!r} has {rx.groups} capture groups; it needs "
                         "exactly one around the number, e.g. 'time: ([0-9.eE+-]+)' (use (?:...) "
                         "for other groups)")
    return rx


def _check_pairs(where: str, metrics: list[Metric]) -> None:
    """ValueError (one line) unless every declared partner is another metric of the list, of
    the opposite direction for ``inverse_of`` and the same for ``same_as``, and a metric
    declares one partner at most."""
    hib = {m.name: m.higher_is_better for m in metrics}
    for m in metrics:
        if m.inverse_of and m.same_as:
            raise ValueError(f"{where}: metric {m.name!r}: give inverse_of or same_as, not both")
        for key, other, same in (("inverse_of", m.inverse_of, False),
                                 ("same_as", m.same_as, True)):
            if not other:
                continue
            if not isinstance(other, str) or other == m.name or other not in hib:
                raise ValueError(f"{where}: metric {m.name!r}: {key}: {other!r} must name "
                                 f"another of its metrics ({', '.join(sorted(hib))})")
            if (hib[other] == m.higher_is_better) != same:
                raise ValueError(f"{where}: metric {m.name!r}: {key} {other!r} needs "
                                 f"{'the same' if same else 'the opposite'} direction; use "
                                 f"{'inverse_of' if same else 'same_as'} instead")


class CommandBenchmark(Benchmark):
    """A user-supplied command whose metrics are regex captures of its output.

    name: benchmark name (letters, digits, ``_ . + -``); argv: the command (list of strings,
    run without a shell); metrics: ``(name, regex, unit, higher_is_better)`` tuples, each regex
    with exactly one capture group around a number, optionally with a fifth item, a mapping
    ``{"inverse_of": METRIC}`` or ``{"same_as": METRIC}`` (a declared pair, see
    :class:`~vhpc.core.metrics.Metric`); success: optional regex that must occur in
    the output for the samples to be valid; env: extra environment variables; timeout: seconds a
    trial may run (None: the campaign's), see :meth:`trial_timeout`.

    :meth:`parse` searches stdout + stderr; a metric whose regex does not match (or whose
    capture is not a number) raises ParseError naming the metric.  Samples are invalid when
    the exit status is not 0 or the success pattern is missing.  Raises ValueError (one line,
    says what to change) for a bad definition.
    """

    verification: str = "exit status 0 and the success pattern (if given)"

    def __init__(self, name: str, argv: Iterable[str],
                 metrics: Iterable[tuple[str, str, str, bool]], success: str | None = None,
                 env: Mapping[str, str] | None = None, timeout: float | None = None,
                 mpi: Mapping[str, Any] | None = None, inputs: Iterable[str] | None = None,
                 check: Mapping[str, Any] | None = None):
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise ValueError(f"custom benchmark name {name!r}: use letters, digits and _ . + - "
                             "(starting with a letter or digit)")
        where = f"custom benchmark {name!r}"
        argv = list(argv) if not isinstance(argv, str) else None  # type: ignore[assignment]
        if not argv or not all(isinstance(a, str) and a for a in argv):
            raise ValueError(f"{where}: command must be a non-empty list of non-empty strings")
        if any("\x00" in a for a in argv):
            raise ValueError(f"{where}: command holds a NUL byte, which no program argument can "
                             "carry: remove it")
        self.name = name
        self.argv = argv
        self.summary = f"user command: {shlex.join(argv)}"
        self.provenance = "user-defined"
        self.params = ()
        self.patterns: dict[str, UserRegex] = {}
        metric_objs = []
        for i, item in enumerate(metrics):
            try:
                mname, pattern, unit, higher, *rest = item
                pair = dict(rest[0]) if rest else {}
                if len(rest) > 1 or set(pair) - set(PAIR_KEYS):
                    raise ValueError
            except (TypeError, ValueError):
                raise ValueError(f"{where}: metrics[{i}] must be (name, regex, unit, "
                                 "higher_is_better[, {inverse_of|same_as: METRIC}])") from None
            if not isinstance(mname, str) or not NAME_RE.match(mname):
                raise ValueError(f"{where}: metric name {mname!r}: use letters, digits and "
                                 "_ . + -")
            if mname in self.patterns:
                raise ValueError(f"{where}: metric {mname!r} is defined twice")
            if not isinstance(higher, bool):
                raise ValueError(f"{where}: metric {mname!r}: higher_is_better must be true or "
                                 "false")
            if not isinstance(unit, str):
                raise ValueError(f"{where}: metric {mname!r}: unit must be a string such as "
                                 "'s' or 'MB/s' ('' for none)")
            self.patterns[mname] = _compile(f"{where}: metric {mname!r}", pattern, 1)
            metric_objs.append(Metric(mname, unit, higher, f"regex {pattern}",
                                      inverse_of=pair.get("inverse_of", ""),
                                      same_as=pair.get("same_as", "")))
        if not metric_objs:
            raise ValueError(f"{where}: give at least one metric (name, regex, unit, "
                             "higher_is_better)")
        _check_pairs(where, metric_objs)
        self.metrics = tuple(metric_objs)
        self.success = None if success is None else _compile(f"{where}: success", success, None)
        env = dict(env or {})
        for k, v in env.items():
            if not isinstance(k, str) or not ENV_NAME_RE.fullmatch(k):
                raise ValueError(f"{where}: env: {k!r} is not a variable name (letters, digits "
                                 "and _, not starting with a digit)")
            if not isinstance(v, str):
                raise ValueError(f"{where}: env {k}: give the value as a string")
            if "\x00" in v:
                raise ValueError(f"{where}: env {k!r} holds a NUL byte, which no environment "
                                 "variable can carry: remove it")
        self.env = env
        self.own_timeout = timeout is not None
        timeout = 600.0 if timeout is None else timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (
                0 < timeout <= MAX_TIMEOUT):
            raise ValueError(f"{where}: timeout must be a number of seconds in (0, "
                             f"{MAX_TIMEOUT}], got {timeout!r}")
        self.timeout = float(timeout)
        self.mpi = _mpi_block(where, mpi)
        self.inputs = _inputs(where, inputs)
        self.check = self._check(where, check)
        if self.mpi is not None or self.inputs:
            self.verification += "; every rank's placement read back"

    def _check(self, where: str, check: Mapping[str, Any] | None) -> Check | None:
        """The ``check:`` block as a :class:`Check`; a ``regex`` adds the figure as a metric
        (lower is better, never compared for overhead in earnest)."""
        if check is None:
            return None
        block(check, where, "check", CHECK_KEYS, "{metric, rtol} or {name, regex, rtol}")
        rtol = check.get("rtol")  # none: an identity figure, shown and never compared
        if rtol is not None and (isinstance(rtol, bool) or not isinstance(rtol, (int, float))
                                 or not 0 <= rtol < 1e6):
            raise ValueError(f"{where}: check: rtol must be a relative tolerance >= 0 such as "
                             f"1.0e-4, got {rtol!r}")
        if "regex" in check:
            mname = check.get("name") or "check"
            if not isinstance(mname, str) or not NAME_RE.match(mname) or mname in self.patterns:
                raise ValueError(f"{where}: check: name {mname!r} must be a new metric name "
                                 "(letters, digits, _ . + -)")
            unit = check.get("unit", "")
            if not isinstance(unit, str):
                raise ValueError(f"{where}: check: unit must be a string")
            self.patterns[mname] = _compile(f"{where}: check", check["regex"], 1)
            self.metrics = self.metrics + (Metric(mname, unit, False,
                                                  f"check figure, regex {check['regex']}"),)
        else:
            mname = check.get("metric")
            if mname not in self.patterns:
                raise ValueError(f"{where}: check: metric {mname!r} is not one of the metrics "
                                 f"({', '.join(self.patterns)}); or give name and regex")
        return Check(mname, None if rtol is None else float(rtol))

    def launch(self, params, ctx):
        """The MPI launch of the ``mpi:`` block (None without one): ranks (default: the
        environment's CPUs) x threads with the given implementation, bound as vhpc's kernels."""
        if self.mpi is None:
            return None
        return Launch(self.mpi["ranks"] or ctx.ncpus, self.mpi["threads"],
                      self.mpi["implementation"], ctx.ncpus, cpuset=ctx.cpuset)

    def preflight(self, params: Mapping[str, Any]) -> None:
        """Before any trial: every input is a regular file or a folder, and so is everything in
        an input folder at any depth and whatever each symbolic link leads to
        (:func:`vhpc.core.paths.input_problem`: ``/dev/zero`` or a FIFO would be copied until
        the disk is full, or block).  Raises BenchmarkError naming the path and what to fix."""
        for src, _ in self.inputs:
            problem = input_problem(src)
            if problem is not None:
                raise BenchmarkError(f"custom benchmark {self.name!r}: input {' '.join(problem)}"
                                     ": inputs must be regular files or folders; fix inputs: "
                                     "in the campaign file")

    def copied_inputs(self, params, ncpus=1):
        """The inputs' host paths (an environment on another file system copies them)."""
        return [src for src, _ in self.inputs]

    def host_paths(self, params):
        """Every host path a trial reads: the inputs, and where each symbolic link inside an
        input folder leads (a guest must see those too)."""
        out = []
        for src, _ in self.inputs:
            out += [src, *(os.path.realpath(p) for p in [src, *_links(src)]
                           if os.path.islink(p))]
        return out

    def __repr__(self) -> str:
        return f"CommandBenchmark({self.name!r}, {self.argv!r})"

    def trial_timeout(self, campaign_timeout: float) -> float:
        """Seconds this benchmark's trial may run: its own ``timeout`` (when given) if smaller
        than the campaign's."""
        return min(self.timeout, campaign_timeout) if self.own_timeout else campaign_timeout

    def command(self, params, ctx):
        """The command as given; with ``mpi:`` or ``inputs:``, the launcher (if any), then
        ``rankrun.py`` with the inputs and ``env:``, then the command."""
        if self.mpi is None and not self.inputs:
            return list(self.argv)
        from vhpc.benchmarks.apps.common import rank_command

        remote = ctx.remote  # ssh, a user's image: the copies there, and rankrun.py there
        stage = list(self.inputs) if remote is None else [
            (remote.files[src], name) for src, name in self.inputs]
        return rank_command(self.launch(params, ctx), stage, [], list(self.argv),
                            env=self.env, runner=None if remote is None else
                            [remote.python, "-S", remote.rankrun])

    def environ(self, params, ctx):
        """The launcher's variables; ``env:`` too when the command runs without rankrun
        (no ``mpi:``/``inputs:``).  With rankrun, ``env:`` is set in the ranks only (its
        ``--env``): a ``PATH`` meant for the program must not decide which mpirun starts."""
        launch = self.launch(params, ctx)
        ranks_only = self.mpi is not None or bool(self.inputs)
        return {**(launch.environ() if launch else {}), **({} if ranks_only else self.env)}

    def parse(self, params, stdout, stderr, returncode):
        """One :class:`Sample` per metric: the last match of its regex's first group in stdout and
        stderr together, as a float in the metric's unit; valid when the exit status is 0 and
        ``success`` (when given) matches.  Raises ParseError naming the metric when its regex finds
        nothing or captures text that is not a number."""
        text = f"{stdout}\n{stderr}"
        valid = returncode == 0 and (self.success is None or bool(self.success.search(text)))
        samples = []
        for m in self.metrics:
            found = self.patterns[m.name].findall(text)
            if not found:
                raise ParseError(f"{self.name}: metric {m.name!r}: regex "
                                 f"{self.patterns[m.name].pattern!r} not found in the output")
            raw = found[-1].strip()
            try:
                value = float(raw)
            except ValueError:
                raise ParseError(f"{self.name}: metric {m.name!r}: captured {raw!r}, which is "
                                 "not a number") from None
            samples.append(Sample(m.name, value, m.unit, m.higher_is_better, valid))
        return samples


KEYS = ("name", "command", "metrics", "success", "env", "timeout", "mpi", "inputs", "check")
#: a metric's declared partner (:class:`vhpc.core.metrics.Metric`)
PAIR_KEYS = ("inverse_of", "same_as")
METRIC_KEYS = ("name", "regex", "unit", "higher_is_better", "direction", "signed", *PAIR_KEYS)
MPI_KEYS = ("ranks", "threads", "implementation")
CHECK_KEYS = ("metric", "rtol", "name", "regex", "unit")



def block(value: Any, where: str, name: str, allowed: Iterable[str], shape: str) -> Mapping:
    """``value`` of the block ``name`` (``check:``, ``mpi:``) of a custom benchmark, checked to
    be a mapping of ``allowed`` keys.  Raises ValueError (one line: ``where``, the block, and
    ``shape``, an example of what is expected, or the unknown keys and the allowed ones)."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: {name} must be a mapping {shape}")
    bad = sorted(set(value) - set(allowed))
    if bad:
        raise ValueError(f"{where}: {name}: unknown key(s) {', '.join(map(str, bad))} "
                         f"(allowed: {', '.join(allowed)})")
    return value

def _count(where: str, key: str, value: Any, default: int | None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65536:
        raise ValueError(f"{where}: mpi: {key} must be a whole number from 1 to 65536, got "
                         f"{value!r}")
    return value


def _mpi_block(where: str, mpi: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``mpi:`` block validated: {ranks (None: the environment's CPUs), threads,
    implementation}.  Raises ValueError saying what to change."""
    if mpi is None:
        return None
    if isinstance(mpi, Mapping) and "ranks_per_node" in mpi:
        raise ValueError(f"{where}: mpi: ranks_per_node is set where the nodes are: "
                         "--executor slurm:ranks_per_node=N, or vcluster:ranks_per_vm=N")
    block(mpi, where, "mpi", MPI_KEYS, "such as {ranks: 2}")
    impl = mpi.get("implementation", "openmpi")
    if impl not in MPI_IMPLS:
        raise ValueError(f"{where}: mpi: implementation {impl!r}: choose one of "
                         f"{', '.join(MPI_IMPLS)}")
    return {"ranks": _count(where, "ranks", mpi.get("ranks"), None),
            "threads": _count(where, "threads", mpi.get("threads"), 1), "implementation": impl}


def anchor_inputs(definitions: Any, folder: str) -> Any:
    """``definitions`` (a campaign file's ``custom:`` list) with every relative ``inputs:``
    path joined to ``folder`` (the campaign file's), so a file names its inputs relative to
    itself and the stored spec holds absolute paths (a resume from elsewhere finds them).
    Anything that is not such a list is returned unchanged (validated later)."""
    if not isinstance(definitions, list):
        return definitions
    out = []
    for d in definitions:
        inputs = d.get("inputs") if isinstance(d, Mapping) else None
        if isinstance(inputs, list):
            d = {**d, "inputs": [_anchor(i, folder) for i in inputs]}
        out.append(d)
    return out


def _anchor(item: Any, folder: str) -> Any:
    """One ``inputs:`` item (a path, or ``{src: PATH, as: NAME}``) with a relative path
    joined to ``folder``; anything else unchanged (validated later)."""
    if isinstance(item, Mapping) and isinstance(item.get("src"), str):
        return {**item, "src": _anchor(item["src"], folder)}
    if isinstance(item, str) and item and not item.startswith("-"):
        return os.path.join(folder, os.path.expanduser(item))
    return item


def _inputs(where: str, inputs: Iterable[Any] | None) -> tuple[tuple[str, str], ...]:
    """``inputs:`` as (absolute source path, name in the rank's working folder) pairs.  An item
    is a path (its name is the path's last component; ``~`` expanded; a relative path is taken
    from the current directory, a campaign file's are anchored at the file first,
    :func:`anchor_inputs`) or an explicit mapping ``{src: PATH, as: NAME}``; a ``=`` in a path
    is part of the path.  NAME is one plain file name (:func:`plain_name`), so a copy can
    never land outside the rank's folder.  Raises ValueError (one line) for anything else."""
    if inputs is None:
        return ()
    if isinstance(inputs, str) or not isinstance(inputs, (list, tuple)):
        raise ValueError(f"{where}: inputs must be a list of files or folders")
    out = []
    for item in inputs:
        src, name = item, None
        if isinstance(item, Mapping):
            block(item, where, "inputs", ("src", "as"), "{src: PATH, as: NAME}")
            src, name = item.get("src"), item.get("as")
        if not isinstance(src, str) or not src or "\x00" in src or src.startswith("-"):
            raise ValueError(f"{where}: inputs: {src!r} is not a path (give files or folders "
                             "as strings, or {src: PATH, as: NAME})")
        src = os.path.abspath(os.path.expanduser(src))
        name = os.path.basename(src.rstrip("/")) if name is None else name
        if not plain_name(name):
            raise ValueError(f"{where}: inputs: as {name!r} must be one plain file name (no /, "
                             "not . or .., not starting with -), the name in the rank's "
                             "working folder")
        out.append((src, name))
    names = [n for _, n in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"{where}: inputs: two inputs named {dupes[0]!r} would land on the "
                         "same name in the working directory: rename one with "
                         "{src: PATH, as: NAME}")
    return tuple(out)


def plain_name(name: Any) -> bool:
    """True when ``name`` is one plain file name: a non-empty string without ``/`` or NUL,
    not ``.`` or ``..``, not starting with ``-`` (no option to rankrun)."""
    return (isinstance(name, str) and bool(name) and "/" not in name and "\x00" not in name
            and name not in (".", "..") and not name.startswith("-"))


def _links(src: str) -> list[str]:
    """Paths of the symbolic links inside the folder ``src`` (none for a file)."""
    if not os.path.isdir(src) or os.path.islink(src):
        return []
    out = []
    for root, dirs, files in os.walk(src):
        out += [os.path.join(root, n) for n in dirs + files
                if os.path.islink(os.path.join(root, n))]
    return out


def from_mapping(d: Mapping[str, Any]) -> CommandBenchmark:
    """A :class:`CommandBenchmark` from a campaign-file entry (see the module docstring).

    ``command`` may be a list of strings or one string split with :func:`shlex.split`;
    ``unit`` defaults to ``""``; ``higher_is_better`` is required.  Raises ValueError with a
    one-line message saying what to change.
    """
    if not isinstance(d, Mapping):
        raise ValueError(f"custom benchmark: expected a mapping with keys {', '.join(KEYS)}, "
                         f"got {type(d).__name__}")
    name = d.get("name")
    where = f"custom benchmark {name!r}" if name else "custom benchmark"
    unknown = sorted(set(d) - set(KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(map(str, unknown))} (allowed: "
                         f"{', '.join(KEYS)})")
    for key in ("name", "command", "metrics"):
        if key not in d:
            raise ValueError(f"{where}: missing '{key}'")
    command = d["command"]
    if isinstance(command, str):
        try:
            command = shlex.split(command)
        except ValueError as exc:
            raise ValueError(f"{where}: command {d['command']!r} cannot be split ({exc}); "
                             "give a list of arguments instead") from None
    elif not isinstance(command, (list, tuple)):
        raise ValueError(f"{where}: command must be a list of strings or one string")
    metrics = d["metrics"]
    if not isinstance(metrics, (list, tuple)) or not metrics:
        raise ValueError(f"{where}: metrics must be a non-empty list of "
                         "{name, regex, unit, higher_is_better}")
    tuples = []
    for i, m in enumerate(metrics):
        if not isinstance(m, Mapping):
            raise ValueError(f"{where}: metrics[{i}] must be a mapping with keys "
                             f"{', '.join(METRIC_KEYS)}")
        bad = sorted(set(m) - set(METRIC_KEYS))
        if bad:
            raise ValueError(f"{where}: metrics[{i}]: unknown key(s) {', '.join(map(str, bad))} "
                             f"(allowed: {', '.join(METRIC_KEYS)})")
        for key in ("name", "regex"):
            if key not in m:
                raise ValueError(f"{where}: metrics[{i}]: missing '{key}'")
        if "direction" in m:
            if m["direction"] not in ("higher", "lower") or "higher_is_better" in m:
                raise ValueError(f"{where}: metrics[{i}]: direction must be higher or lower "
                                 "(and not given together with higher_is_better)")
            higher = m["direction"] == "higher"
        elif "higher_is_better" in m:
            higher = m["higher_is_better"]
        else:
            raise ValueError(f"{where}: metrics[{i}]: missing 'higher_is_better' (true or false)"
                             " or 'direction' (higher or lower)")
        if not isinstance(m.get("signed", False), bool):  # read by the analysis
            raise ValueError(f"{where}: metrics[{i}]: signed must be true or false")
        tuples.append((m["name"], m["regex"], m.get("unit", ""), higher,
                       {k: m[k] for k in PAIR_KEYS if k in m}))
    env = d.get("env") or {}
    if not isinstance(env, Mapping):
        raise ValueError(f"{where}: env must be a mapping of variable names to values")
    env = {k: v if isinstance(v, str) else str(v) for k, v in env.items()}
    return CommandBenchmark(name, command, tuples, success=d.get("success"), env=env,
                            timeout=d.get("timeout"), mpi=d.get("mpi"), inputs=d.get("inputs"),
                            check=d.get("check"))


__all__ = ["CommandBenchmark", "from_mapping"]
