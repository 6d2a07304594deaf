"""Bring-your-own benchmarks: any command whose output holds the numbers, read with regexes.

A :class:`CommandBenchmark` runs a fixed argv (no parameters) and extracts each metric with a
regular expression that has exactly one capture group (the number).  Build one in code, or
from a campaign-file entry with :func:`from_mapping`::

    name: mybench
    command: ["sh", "-c", "echo 'rate: 12.5 MB/s'; echo PASSED"]   # or one string (shlex)
    metrics:
      - {name: rate, regex: 'rate: ([0-9.eE+-]+)', unit: MB/s, higher_is_better: true}
    success: PASSED        # optional: samples are invalid when this regex is not found
    env: {OMP_NUM_THREADS: "2"}   # optional
    timeout: 300                   # optional, seconds: the trial is killed and stored failed
                                   # after min(timeout, the campaign's --timeout)

Regexes are Python ``re`` patterns searched with MULTILINE in stdout followed by stderr; when a
pattern matches several times the **last** match counts (final results are usually printed
last).  The command runs in the environment as given (on the host, or inside the guest, which
sees the host's root filesystem read-only and a writable /tmp), so use absolute paths.
"""

from __future__ import annotations

import re
import shlex
from typing import Any, Iterable, Mapping

from vhpc.benchmarks.base import Benchmark, ParseError
from vhpc.core.metrics import Metric, Sample

#: Longest ``timeout:`` a custom benchmark may ask for (seconds; a week).
MAX_TIMEOUT = 7 * 24 * 3600

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def _compile(what: str, pattern: Any, groups: int | None) -> re.Pattern[str]:
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"{what}: give a regular expression as a non-empty string")
    try:
        rx = re.compile(pattern, re.M)
    except re.error as exc:
        raise ValueError(f"{what}: invalid regular expression {pattern!r} ({exc})") from None
    if groups is not None and rx.groups != groups:
        raise ValueError(f"{what}: regex {pattern!r} has {rx.groups} capture groups; it needs "
                         "exactly one around the number, e.g. 'time: ([0-9.eE+-]+)' (use (?:...) "
                         "for other groups)")
    return rx


class CommandBenchmark(Benchmark):
    """A user-supplied command whose metrics are regex captures of its output.

    name: benchmark name (letters, digits, ``_ . + -``); argv: the command (list of strings,
    run without a shell); metrics: ``(name, regex, unit, higher_is_better)`` tuples, each regex
    with exactly one capture group around a number; success: optional regex that must occur in
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
                 env: Mapping[str, str] | None = None, timeout: float | None = None):
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
        self.patterns: dict[str, re.Pattern[str]] = {}
        metric_objs = []
        for i, item in enumerate(metrics):
            try:
                mname, pattern, unit, higher = item
            except (TypeError, ValueError):
                raise ValueError(f"{where}: metrics[{i}] must be (name, regex, unit, "
                                 "higher_is_better)") from None
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
            metric_objs.append(Metric(mname, unit, higher, f"regex {pattern}"))
        if not metric_objs:
            raise ValueError(f"{where}: give at least one metric (name, regex, unit, "
                             "higher_is_better)")
        self.metrics = tuple(metric_objs)
        self.success = None if success is None else _compile(f"{where}: success", success, None)
        env = dict(env or {})
        for k, v in env.items():
            if not isinstance(k, str) or not k or "=" in k or not isinstance(v, str):
                raise ValueError(f"{where}: env must map variable names to strings "
                                 f"(problem with {k!r})")
            if "\x00" in k or "\x00" in v:
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

    def __repr__(self) -> str:
        return f"CommandBenchmark({self.name!r}, {self.argv!r})"

    def trial_timeout(self, campaign_timeout: float) -> float:
        """Seconds this benchmark's trial may run: its own ``timeout`` (when given) if smaller
        than the campaign's."""
        return min(self.timeout, campaign_timeout) if self.own_timeout else campaign_timeout

    def command(self, params, ctx):
        return list(self.argv)

    def environ(self, params, ctx):
        return dict(self.env)

    def parse(self, params, stdout, stderr, returncode):
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


KEYS = ("name", "command", "metrics", "success", "env", "timeout")
METRIC_KEYS = ("name", "regex", "unit", "higher_is_better")


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
        for key in ("name", "regex", "higher_is_better"):
            if key not in m:
                hint = " (true or false)" if key == "higher_is_better" else ""
                raise ValueError(f"{where}: metrics[{i}]: missing '{key}'{hint}")
        tuples.append((m["name"], m["regex"], m.get("unit", ""), m["higher_is_better"]))
    env = d.get("env") or {}
    if not isinstance(env, Mapping):
        raise ValueError(f"{where}: env must be a mapping of variable names to values")
    env = {k: v if isinstance(v, str) else str(v) for k, v in env.items()}
    return CommandBenchmark(name, command, tuples, success=d.get("success"), env=env,
                            timeout=d.get("timeout"))


__all__ = ["CommandBenchmark", "from_mapping"]
