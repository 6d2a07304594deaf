"""Help texts and the ``vhpc doctor`` table, generated from the registered parts.

Every environment kind, hypervisor backend, executor and benchmark carries its own metadata
(``summary``, ``components``, ``quick``, its options model); the ``vhpc`` command's help and the
doctor's table are read off the registries here, so a part added by a new module, or by an
outside package through the ``vhpc.parts`` entry points (docs/plugins.md), shows everywhere
without a table to edit."""

from __future__ import annotations

from vhpc import benchmarks
from vhpc.environments.kind import KINDS, GlobalFlag
from vhpc.executors.base import DEFAULT, EXECUTORS
from vhpc.host import doctor


def kinds_help() -> str:
    """``-e``'s help: each registered kind with its one-line summary, in registration order."""
    kinds = "; ".join(f"{name} ({part.summary})" if part.summary else name
                      for name, part in KINDS.items())
    return (f"environment KIND[:k=v,...], KIND one of: {kinds} (repeatable; default: "
            f"{default_env_flags()})")


def default_env_flags() -> str:
    """The default environments as ``-e`` flags (``-e native -e vm``), for help texts."""
    from vhpc.spec.parse import default_environments

    return " ".join(f"-e {name}" for name in default_environments())


def slowable_kinds() -> list[str]:
    """Names of the registered kinds whose environments take ``slowdown=`` (their options model
    derives from :class:`~vhpc.environments.options.Slowdown`): the kinds ``vhpc calibrate`` can
    make a slowed copy of, in registration order."""
    from vhpc.environments.options import Slowdown

    return [name for name, part in KINDS.items() if issubclass(part.options, Slowdown)]


def calibrate_env_help() -> str:
    """``vhpc calibrate -e``'s help: the kinds it can slow (:func:`slowable_kinds`) and the
    default environments."""
    return (f"environment KIND[:k=v,...], KIND one of: {', '.join(slowable_kinds())} (the kinds "
            f"that take slowdown=; repeatable; default: {default_env_flags()})")


def executor_metavar() -> str:
    """``--executor``'s metavar: the registered names, ``|``-separated, then ``[:k=v,...]``."""
    return "|".join(EXECUTORS.names()) + "[:k=v,...]"


def executor_help() -> str:
    """``--executor``'s help: the default (:data:`vhpc.executors.base.DEFAULT`), then each
    registered executor with its options and its summary."""
    parts = []
    for name, part in EXECUTORS.items():
        fields = ",".join(f"{f}=" for f in part.options.model_fields)
        usage = f"{name}[:{fields}]" if fields else name
        parts.append(f"{usage}: {part.summary}" if part.summary else usage)
    return f"where trials run (default: {DEFAULT}): " + "; ".join(parts)


def bench_help(what: str = "") -> str:
    """``-b``'s help: ``what`` the flag does (default: a benchmark to run, the quick suite
    when none is given), then every registered benchmark by suite, in listing order
    (:func:`vhpc.benchmarks.by_suite`), so a benchmark added by a new module or an outside
    package shows without a text to edit."""
    what = what or ("benchmark to run (repeatable; default: the quick suite, "
                    f"{', '.join(benchmarks.quick_suite())})")
    suites = "; ".join(f"{name}: {', '.join(names)}" for name, names in benchmarks.by_suite())
    return f"{what}. Benchmarks by suite: {suites} ('vhpc list benchmarks' describes them)"


def global_flags() -> list[GlobalFlag]:
    """The ``vhpc`` options (before the command) the registered kinds declare
    (:attr:`~vhpc.environments.kind.EnvironmentKind.global_flags`), each flag once, in
    registration order."""
    out: dict[str, GlobalFlag] = {}
    for _, part in KINDS.items():
        for flag in part.global_flags:
            out.setdefault(flag.flag, flag)
    return list(out.values())


def study_protocol_flags(parser, whose: str) -> None:
    """Add ``--repeats``, ``--warmup`` and ``--timeout`` (seconds per trial) to ``parser``, the
    protocol a study (``vhpc study``) or every study of a seed (``vhpc paper``) runs with;
    ``whose``: the trials they set, as the help says it ("the study's", "every study's")."""
    from vhpc.core.argtypes import count, number
    from vhpc.environments.options import MAX_SECONDS

    parser.add_argument("--repeats", type=count(1, 10000), metavar="N",
                        help=f"measured rounds of {whose} trials (default: the study's own, 5 "
                             "for most); --method rank needs 4 or more for an interval")
    parser.add_argument("--warmup", type=count(0, 1000), metavar="N",
                        help="warm-up rounds, stored but not analysed (default: the study's "
                             "own, 1 for most)")
    parser.add_argument("--timeout", type=number(0, MAX_SECONDS, lo_open=True), metavar="SECONDS",
                        help="wall-clock seconds a trial may run before it is killed "
                             "(default 600)")


def components() -> tuple[doctor.Component, ...]:
    """What ``vhpc doctor`` checks: the host tools every part shares
    (:data:`vhpc.host.doctor.COMPONENTS`), then each registered kind's (with the parts it
    holds: a vm's backends), executor's and benchmark's own ``components``, each name once."""
    out = {c.name: c for c in doctor.COMPONENTS}
    held = [c for _, kind in KINDS.items() for c in kind().all_components()]
    for c in held + [c for registry in (EXECUTORS, benchmarks.BENCHMARKS)
                     for _, part in registry.items() for c in part.components]:
        out.setdefault(c.name, c)
    return tuple(out.values())
