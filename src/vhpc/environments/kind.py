"""Environment kinds as registered parts: ``native``, ``vm``, ``ssh``, ``vcluster``, ...

A kind is a subclass of :class:`EnvironmentKind` in its own package under
``vhpc/environments/`` that registers itself with ``@KINDS.register("name")``.  It declares its
options model (validated once, at the edge, by the spec parser), checks the host and computes
its placement **once** (:meth:`EnvironmentKind.plan`, returning an immutable :class:`EnvPlan`),
and builds the :class:`~vhpc.environments.base.Environment` from the options and that plan
(:meth:`EnvironmentKind.build`).  Adding a kind is one new package; nothing else dispatches on
kind names (docs/architecture.md, "How to add an environment kind").  A room that needs "the
baseline" or "the kind that builds images" asks for a capability the kind declares
(:attr:`EnvironmentKind.provides`, ``KINDS.providing``), never for a name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from vhpc.core.errors import HostError, VhpcError
from vhpc.core.registry import Registry
from vhpc.host.doctor import Component
from vhpc.environments.base import Environment
from vhpc.environments.options import EnvOptions, HostFacts, Slowdown

#: How much slower a guest trial is under TCG emulation than under KVM, for estimates only
#: (where the results store has no past trial to go by).  Whole trials, not cycles: on a
#: 2-core host (load 10-20) the quick suite's TCG trials took 16.5 s (median of 60) and
#: NPB class S ones 25-55 s, against the 10 s a KVM trial is given; 10 (the cycles of
#: docs/fidelity.md) made estimates 3-25x too high.
TCG_FACTOR = 2.0

#: Every environment kind, by name; the packages under vhpc/environments/ register themselves.
KINDS: Registry[type["EnvironmentKind"]] = Registry("environment", "vhpc.environments")


#: Capabilities: what a room outside the environments asks of "the kind that ...", never naming
#: it.  A kind declares its own in :attr:`EnvironmentKind.provides`, and
#: ``KINDS.providing(capability)`` finds the kind (:func:`kind_name`).
#:
#: Runs benchmarks on this host itself, no guest: a comparison's usual baseline.
BASELINE = "baseline"
#: One guest on this host; its :meth:`~EnvironmentKind.estimate_accel` says what the guests of a
#: run would run under.
GUEST = "guest"
#: Several guests as one machine, one MPI job across them; its
#: :meth:`~EnvironmentKind.node_guests` places the guests one compute node holds.
GUEST_CLUSTER = "guest-cluster"
#: Builds a guest image (:meth:`~EnvironmentKind.build_image`, ``vhpc image build``).
IMAGE_BUILDER = "image-builder"
#: Reaches a machine that exists already (:meth:`~EnvironmentKind.remote_report`, ``vhpc host
#: --ssh``).
REMOTE_MACHINE = "remote-machine"
#: Every capability, for checks and help.
CAPABILITIES = (BASELINE, GUEST, GUEST_CLUSTER, IMAGE_BUILDER, REMOTE_MACHINE)

#: The capabilities of the environments a campaign compares when none is given (``vhpc
#: compare``, ``vhpc calibrate``, a campaign file without ``environments``): the baseline and
#: one guest.
DEFAULT_CAPABILITIES = (BASELINE, GUEST)


def kind_name(capability: str) -> str:
    """The name of the kind that provides ``capability`` (``kind_name(BASELINE)``: the
    baseline's), also the name its environments get by default.  Raises NoProvider (a one-line
    SpecError) when no registered kind provides it."""
    return KINDS.providing(capability).name


def default_environments() -> tuple[str, ...]:
    """The ``-e`` items of the environments a campaign compares when none is given: the kinds
    of :data:`DEFAULT_CAPABILITIES`, baseline first."""
    return tuple(kind_name(c) for c in DEFAULT_CAPABILITIES)


@dataclass(frozen=True)
class EnvPlan:
    """Where one environment's benchmarks will run on this host, computed once per environment
    and campaign: ``text`` (one line for ``--dry-run``), ``placement`` (a
    :class:`~vhpc.placement.Placement` for guests, else None) and ``corunner`` (the co-runner
    guest's placement, or None)."""

    text: str
    placement: Any = None
    corunner: Any = None


@dataclass(frozen=True)
class GlobalFlag:
    """A ``vhpc`` option (before the command) that a kind declares and that sets one of its
    environment variables for that one command: ``flag`` (``--allow-uri``), ``env`` (the
    variable), ``help``, ``metavar`` (a repeatable option taking values, joined with ``,``
    to what the variable already holds) or None (a switch: the variable is set to ``1``)."""

    flag: str
    env: str
    help: str
    metavar: str | None = None


class EnvironmentKind(ABC):
    """One environment kind.  Subclasses set ``options`` (an :class:`EnvOptions` model) and
    ``summary`` (one line for help texts), and implement :meth:`build`; they override
    :meth:`plan` when the host must be checked or a placement computed."""

    name: ClassVar[str] = ""
    options: ClassVar[type[EnvOptions]]
    summary: ClassVar[str] = ""
    #: What it can be asked for as "the kind that ...": capabilities (:data:`BASELINE`, ...);
    #: none by default.
    provides: ClassVar[frozenset[str]] = frozenset()
    #: What ``vhpc doctor`` checks for it (:class:`vhpc.host.doctor.Component`).
    components: ClassVar[tuple[Component, ...]] = ()
    #: It boots guests: a fresh session costs a boot (time estimates, cold/warm protocol).
    boots_guests: ClassVar[bool] = False
    #: Whose last-level cache sizes an auto-sized working set at run time ("the guest's",
    #: "that host's"), or None when it is this host's, known before the run.
    llc_owner: ClassVar[str | None] = None
    #: Rule-of-thumb seconds of one trial when no past trial says better (``vhpc paper
    #: --dry-run``), before the emulation factor.
    trial_s: ClassVar[float] = 10.0

    #: ``vhpc`` options it reads through environment variables (:class:`GlobalFlag`).
    global_flags: ClassVar[tuple[GlobalFlag, ...]] = ()

    def trial_seconds(self, accel: str) -> float:
        """Rule-of-thumb seconds for one trial of a quick kernel here, with guests running under
        ``accel`` (``"kvm"`` or ``"tcg"``; TCG emulation is about 10x slower: the measured
        cycles of docs/fidelity.md).  Used only for estimates, never for timeouts."""
        return self.trial_s * (TCG_FACTOR if self.boots_guests and accel == "tcg" else 1.0)

    def host_lines(self, probe: bool = True, reprobe: bool = False) -> list[tuple[str, str, str]]:
        """What ``vhpc host`` says of this host for this kind, as (label, text, style) lines
        (style: a rich colour for the text, or ""); ``probe``: it may start something to find
        out (a probe guest), ``reprobe``: past answers are not reused.  None by default."""
        return []

    def all_components(self) -> tuple[Component, ...]:
        """What ``vhpc doctor`` checks for it and for the parts it holds (a vm's backends):
        :attr:`components` by default."""
        return self.components

    def placement_dialects(self, placement: Any, name: str) -> list[str]:
        """``placement`` (a :class:`~vhpc.placement.Placement`) in the words of the tools this
        kind starts guests with, for ``vhpc plan``: a title line, then the text.  None by
        default."""
        return []

    def export_placement(self, placements: Any, name: str, pool: Any = ()) -> list[Any]:
        """The guests of ``placements`` (one per VM) as a user would start them outside vhpc
        (``vhpc tune``'s recommendation), one export per tool that has a form for them (each
        with ``title``, ``key`` and ``value``).  None by default."""
        return []

    def estimate_accel(self) -> tuple[str, str]:
        """(``"kvm"`` or ``"tcg"``, why) for the guests a run of this kind would boot here,
        for time estimates; a kind without guests has nothing to emulate (``"kvm"``)."""
        return "kvm", f"{self.name} boots no guest"

    def remote_report(self, target: str) -> list[str]:
        """Lines describing the machine ``target`` names (``vhpc host --ssh``), for a kind
        that reaches other machines.  Raises HostError for a kind that reaches none."""
        raise HostError(f"the {self.name} kind reaches no other machine")

    def build_image(self, out: Any, release: str, include: list[str], progress: Any = None,
                    **options: Any) -> Any:
        """Build a guest image for this kind at ``out`` (``vhpc image build``; ``options``:
        the command's further choices) and return what was built.  Raises HostError for a
        kind that boots no image."""
        raise HostError(f"the {self.name} kind builds no guest image")

    def node_guests(self, name: str, first: int, count: int, policy: str,
                    member: dict[str, Any], vms: int | None = None,
                    seed: dict[str, str] | None = None) -> list[Environment]:
        """The guests ``first`` .. ``first + count - 1`` of the guest cluster ``name`` that one
        compute node of an executor holds (a :data:`GUEST_CLUSTER` kind's).
        Raises HostError for a kind that holds no guest cluster."""
        raise HostError(f"the {self.name} kind holds no guest cluster")

    def hidden_host_dirs(self, options: EnvOptions) -> tuple[str, ...]:
        """Host directories that programs of this environment do not see, because it puts
        its own in their place (a guest's tmpfs over ``/tmp``): a benchmark input under one is
        refused before a campaign runs.  None by default (the host's files as they are, or
        inputs copied in)."""
        return ()

    def dry_check(self, options: EnvOptions) -> None:
        """The checks of this environment's own inputs that a real run makes before its first
        trial and that start nothing (a user's image: its file, format, backing file and boot
        mode), for ``--dry-run``, which runs them all.  Raises a VhpcError (one line), as the
        real run would.  None by default."""

    @classmethod
    def clean_leftover(cls, record: dict[str, Any]) -> list[str]:
        """Clean what a killed run left (``record``: what :meth:`Environment.leftover_record`
        stored); one line per action.  Nothing by default."""
        return []

    def plan(self, options: EnvOptions, host: HostFacts) -> EnvPlan:
        """Check ``options`` against ``host`` and compute the placement (pure: reads no host
        state beyond ``host``).  Raises HostError or PlacementError saying what to change."""
        return EnvPlan("unpinned")

    @abstractmethod
    def build(self, name: str, options: EnvOptions, plan: EnvPlan,
              host: HostFacts) -> Environment:
        """The environment called ``name`` (may probe the host: QEMU, guest kernel, ssh
        client).  Raises HostError (a user error) when this host cannot provide it."""


def plan(kind: str, name: str, options: EnvOptions, host: HostFacts) -> EnvPlan:
    """The plan of environment ``name`` of ``kind``.  Raises the kind's error (a VhpcError
    subclass: HostError, PlacementError, ...) with ``environment NAME:`` before its message."""
    try:
        return KINDS.get(kind)().plan(options, host)
    except VhpcError as exc:
        raise type(exc)(f"environment {name}: {exc}") from None


def build(kind: str, name: str, options: EnvOptions, host: HostFacts,
          plan_: EnvPlan | None = None) -> Environment:
    """The environment ``name`` of ``kind`` on ``host``, from its plan (computed here when not
    given), wrapped in a :class:`~vhpc.environments.slowdown.ThrottledEnvironment` when the
    options ask for ``slowdown=``.  Raises HostError/PlacementError naming the environment."""
    kind_ = KINDS.get(kind)()
    plan_ = plan_ if plan_ is not None else plan(kind, name, options, host)
    try:
        env = kind_.build(name, options, plan_, host)
    except VhpcError:
        raise
    except ValueError as exc:
        raise HostError(f"environment {name}: {exc}") from None
    env.kind = kind_.name
    if isinstance(options, Slowdown):
        env = slowed(env, options, plan_)
    return env


def slowed(env: Environment, options: Slowdown, plan_: EnvPlan) -> Environment:
    """``env`` wrapped in a ThrottledEnvironment (environments/slowdown.py) when ``options`` has
    ``slowdown=``; the busy CPUs default to the environment's benchmark CPUs.  Raises HostError
    when ``slowdown_cpus=`` is given without ``slowdown=``."""
    if options.slowdown is None:
        if options.slowdown_cpus is not None:
            raise HostError(f"environment {env.name}: slowdown_cpus= needs slowdown=")
        return env
    from vhpc.environments.slowdown import ThrottledEnvironment

    return ThrottledEnvironment(env, options.slowdown,
                                options.slowdown_cpus or env.benchmark_cpus())
