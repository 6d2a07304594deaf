"""What an executor is: the abstract base every executor derives from, and their registry.

An executor runs a campaign's trials somewhere: ``local`` (this process, this host) or
``slurm`` (job steps of one allocation).  Each is a subclass of :class:`Executor` in its own
module or package under ``vhpc/executors/`` that registers itself with
``@EXECUTORS.register("name")`` and declares its options as a frozen pydantic model
(:class:`ExecutorOptions`), validated once when ``--executor`` is parsed.  Adding one (PBS,
Flux, LSF) is one new module; nothing else dispatches on executor names
(docs/architecture.md, "How to add an executor").
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from vhpc.core.errors import SpecError
from vhpc.core.registry import Registry
from vhpc.host.doctor import Component
from vhpc.environments.base import Environment, RunResult

#: Every executor, by name; the modules under vhpc/executors/ register themselves.
EXECUTORS: Registry[type["Executor"]] = Registry("executor", "vhpc.executors")
#: The executor of a campaign that names none.
DEFAULT = "local"


class ExecutorOptions(BaseModel):
    """Base of an executor's options (``--executor NAME:k=v,...``): frozen, unknown keys
    rejected.  The values arrive as text from the command line."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class ExecutorSpec:
    """A parsed ``--executor`` value: ``kind`` (a registered executor) and its validated
    ``options`` model."""

    kind: str
    options: ExecutorOptions

    def given(self) -> dict[str, Any]:
        """The options set explicitly (``{"nodes": 2}``)."""
        return self.options.model_dump(exclude_unset=True)

    @property
    def part(self) -> type["Executor"]:
        """The registered :class:`Executor` class (``runs_here``, :meth:`Executor.node_count`)."""
        return EXECUTORS.get(self.kind)

    def node_count(self) -> int:
        """Compute nodes an environment may spread over (1: one host)."""
        return self.part.node_count(self.options)

    def __str__(self) -> str:
        """The ``--executor`` text that :func:`parse` reads back into this spec
        (``slurm:nodes=3``; ``local``)."""
        given = self.given()
        return self.kind + (":" + ",".join(f"{k}={v}" for k, v in given.items()) if given else "")


class Executor(ABC):
    """Runs trials of environments.  Used as a context manager (an allocation lives inside the
    ``with``).  Subclasses set ``options`` and ``runs_here`` and implement :meth:`run`."""

    name: ClassVar[str] = ""
    options: ClassVar[type[ExecutorOptions]] = ExecutorOptions
    #: Whether trials run on this host (host knobs and this host's checks apply to them).
    runs_here: ClassVar[bool] = True
    #: One line for help texts (``vhpc compare --help``).
    summary: ClassVar[str] = ""
    #: What ``vhpc doctor`` checks for it (:class:`vhpc.host.doctor.Component`).
    components: ClassVar[tuple[Component, ...]] = ()

    def __init__(self, campaign_id: str, options: ExecutorOptions):
        self.campaign_id = campaign_id
        self.config = options
        #: the command that resumes the campaign (with --out), for messages; set by execute
        self.resume_hint = f"vhpc compare --resume {campaign_id or 'ID'}"
        #: the trials still to run and the seconds they may take (measured times where the
        #: store has them, else timeouts: execute.plan_budget); set before entering (0 / None
        #: when unknown)
        self.plan_trials = 0
        self.plan_seconds: float | None = None
        #: how many of those trials' times come from earlier measurements (not timeouts)
        self.plan_measured = 0

    @classmethod
    def node_count(cls, options: ExecutorOptions) -> int:
        """Compute nodes an environment may spread over under ``options`` (1: one host)."""
        return 1

    @classmethod
    def node_cpus(cls, options: ExecutorOptions) -> int | None:
        """CPUs of the smallest compute node trials may land on under ``options``, when known
        before anything runs (a dry run's check of what a node can hold); None: this host's
        checks apply, or nothing is known."""
        return None

    @classmethod
    def node_hugepages(cls, options: ExecutorOptions) -> dict[str, dict[int, int]] | None:
        """Free hugepages ``{node: {page_kib: free}}`` of each compute node trials may land on
        under ``options``, read on the nodes before anything runs (a guest with hugepage
        backing must fit on every node it boots on); None: this host's checks apply, or
        nothing is known."""
        return None

    def preflight(self) -> None:
        """Check, before a campaign is stored, that this executor can run (commands installed,
        controller answers).  Raises a VhpcError subclass saying what to change."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def prepare(self, env: Environment, env_spec: Any) -> str | None:
        """Make ``env`` ready for a trial before its kernels are built and its inputs copied
        (Slurm: a guest host on each node that holds guests of a spanning environment).
        Returns None, or one line saying why the trial cannot run (it is stored failed with
        it); default: nothing to do."""
        return None

    @abstractmethod
    def run(self, env: Environment, env_spec: Any, argv: list[str], environ: dict[str, str],
            timeout: float, key: str) -> RunResult:
        """Run one trial of ``env`` (described by ``env_spec``, an EnvSpec): ``argv`` (a list,
        never a shell string) with the extra variables ``environ``, killed after ``timeout``
        seconds; ``key`` names the kind of trial (benchmark + parameters), as in
        :meth:`Environment.run`.  Returns the trial's :class:`RunResult`.  Never raises for a
        failing command: failures are in the result.  Raises EnvError (e.g. Slurm's
        AllocationLost) when the machine that runs the trials is gone, leaving the trial
        unfinished for ``--resume``."""

    def fingerprint(self, env: Environment) -> dict[str, Any]:
        """``env``'s fingerprint as the machine running its trials sees it (may raise
        EnvError when the environment cannot tell)."""
        return env.fingerprint()


def parse(text: "str | ExecutorSpec | None") -> ExecutorSpec:
    """``"slurm:partition=batch,nodes=2"`` → ExecutorSpec (``None``/empty: ``local``; an
    ExecutorSpec is returned as it is).  Raises SpecError (one line: the known executors, or
    the option and what it allows)."""
    if isinstance(text, ExecutorSpec):
        return text
    if not isinstance(text, str) and text is not None:
        raise SpecError(f"executor: {text!r}: give a name like local or slurm:nodes=2")
    text = (text or DEFAULT).strip()
    kind, _, rest = text.partition(":")
    cls = EXECUTORS.get(kind.strip())
    opts: dict[str, str] = {}
    for token in filter(None, (t.strip() for t in rest.split(","))):
        k, sep, v = token.partition("=")
        if not sep or k.strip() not in cls.options.model_fields:
            allowed = ", ".join(cls.options.model_fields) or "none"
            raise SpecError(f"executor {cls.name}: unknown option {token!r} (options: {allowed})")
        opts[k.strip()] = v.strip()
    try:
        return ExecutorSpec(cls.name, cls.options.model_validate(opts))
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise SpecError(f"executor {cls.name}: {field}={opts.get(field)!r}: "
                        f"{err['msg'].removeprefix('Value error, ')}") from None


def make(spec: ExecutorSpec, campaign_id: str = "") -> Executor:
    """The executor ``spec`` describes (not yet entered)."""
    return spec.part(campaign_id, spec.options)
