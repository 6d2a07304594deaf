"""Running a race as a campaign: the spec (native + one environment per candidate), the stored
definition for ``--resume``, and the round-by-round loop on top of :func:`vhpc.campaign.execute`.

Every trial is a campaign trial (same plan, same store, same environments), so ``vhpc report ID``
re-analyses a race like any campaign.  The race's own definition (candidates, their placements,
the settings) is written to ``<out>/<id>/tune.json`` before the first trial runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from vhpc.campaign import execute
from vhpc.analysis import memprofile
from vhpc import placement
from vhpc.core import stats
from vhpc.spec import parse as specmod
from vhpc.core.cpulist import format_cpu_list
from vhpc.core.paths import write_atomic
from vhpc.environments.kind import BASELINE, kind_name
from vhpc.spec.parse import CampaignSpec
from vhpc.store import DONE, FAILED, Store
from vhpc.workflows.tune.candidates import Candidate, TuneError
from vhpc.workflows.tune.race import RaceState, Settings, next_round, replay

__all__ = ["Definition", "build_spec", "start", "load", "run", "state", "prior"]

DEFINITION = "tune.json"
#: Largest race definition read (bytes): real ones are a few KiB.
MAX_DEFINITION = 16 << 20


@dataclass(frozen=True)
class Definition:
    """What a race is: ``vcpus``, ``memory_mib``, ``topology`` (its one-line summary),
    ``candidates`` (raced, in listing order), ``settings`` and ``warmup`` rounds."""

    vcpus: int
    memory_mib: int
    topology: str
    candidates: tuple[Candidate, ...]
    settings: Settings
    warmup: int = 1

    def candidate(self, env: str) -> Candidate:
        """The candidate whose environment is ``env`` (KeyError if none)."""
        return {c.env: c for c in self.candidates}[env]

    def to_dict(self) -> dict:
        """JSON-able form (placements as :meth:`~vhpc.placement.Placement.to_dict`)."""
        cands = [{**c.__dict__, "aliases": list(c.aliases), "pool": list(c.pool),
                  "placements": [p.to_dict() for p in c.placements]} for c in self.candidates]
        return {"vcpus": self.vcpus, "memory_mib": self.memory_mib, "topology": self.topology,
                "warmup": self.warmup, "settings": self.settings.to_dict(), "candidates": cands}

    @classmethod
    def from_dict(cls, d: dict) -> Definition:
        """Inverse of :meth:`to_dict`."""
        cands = tuple(Candidate(**{**c, "aliases": tuple(c["aliases"]),
                                   "pool": tuple(c.get("pool", ())),
                                   "placements": tuple(_placement(p) for p in c["placements"])})
                      for c in d["candidates"])
        return cls(d["vcpus"], d["memory_mib"], d["topology"], cands,
                   Settings.from_dict(d["settings"]), d.get("warmup", 1))


def _placement(d: dict) -> placement.Placement:
    nodes = tuple(placement.GuestNode(g["id"], tuple(g["vcpus"]), g["memory_mib"],
                                      tuple(g["host_nodes"]), g["policy"]) for g in d["guest_nodes"])
    return placement.Placement(
        policy=d["policy"], vcpus=d["vcpus"], memory_mib=d["memory_mib"],
        vcpu_pins=tuple(tuple(p) for p in d["vcpu_pins"]), guest_nodes=nodes,
        backing=d["backing"], distances=tuple(tuple(r) for r in d["distances"]),
        vm_index=d["vm_index"], exclusive=d["exclusive"], notes=tuple(d["notes"]))


def build_spec(benches: Sequence[str], d: Definition, native_cpus: Sequence[int] | None,
               host_knobs: Sequence[str] | None = None, timeout: float | None = None,
               accel: str = "auto") -> CampaignSpec:
    """The campaign, built from typed spec models (:func:`vhpc.spec.parse.env`,
    :func:`vhpc.spec.parse.campaign`): ``native`` (on ``native_cpus``, the PUs of the compact
    placement, so both sides use as many CPUs) and one environment per candidate (kind ``vm``
    or ``vcluster``); ``warmup`` warm-up round(s) and ``min_rounds`` measured rounds planned up
    front, later rounds added by the race.  Raises SpecError for bad benchmarks or knobs."""
    parsed = specmod.from_cli(list(benches), [kind_name(BASELINE)],
                              host_knobs=list(host_knobs or []))
    native = {"cpus": format_cpu_list(native_cpus)} if native_cpus else {}
    envs = [specmod.env_of(BASELINE, d.settings.baseline, **native)]
    envs += [specmod.env(c.kind, c.env, **c.options(d.memory_mib, accel)) for c in d.candidates]
    return specmod.campaign(list(parsed.benchmarks), envs, "vhpc tune",
                            baseline=d.settings.baseline, warmup=d.warmup,
                            repeats=d.settings.min_rounds, host_knobs=dict(parsed.host_knobs),
                            timeout=timeout)


def check_budget(spec: CampaignSpec, d: Definition) -> None:
    """Raise TuneError when the budget cannot pay for the warm-up and the first
    ``min_rounds`` rounds of ``spec``."""
    first = len(execute.plan(spec))
    if first > d.settings.budget:
        raise TuneError(f"--budget {d.settings.budget} is below the {first} trials of the warm-up "
                        f"and first {d.settings.min_rounds} rounds of {len(d.candidates)} "
                        f"candidate(s) and native: raise --budget to at least {first} or restrict "
                        "--candidates")


def start(store: Store, spec: CampaignSpec, d: Definition, out: str | Path, command: str = "") -> str:
    """Check the budget, create the campaign (:func:`vhpc.campaign.execute.create`) and write its
    definition; returns the campaign id.  Raises TuneError when the budget cannot pay for the
    warm-up and the first ``min_rounds`` rounds."""
    check_budget(spec, d)
    cid = execute.create(store, spec, command)
    folder = Path(out) / cid
    folder.mkdir(parents=True, exist_ok=True)
    # atomic (temporary file in the folder + rename, 0600): a kill or a full disk never
    # leaves a truncated definition
    write_atomic(folder / DEFINITION, json.dumps(d.to_dict(), indent=1))
    return cid


def load(out: str | Path, cid: str) -> Definition:
    """The stored definition of race ``cid``.  Raises TuneError when ``cid`` is not a race, or
    its definition file cannot be read or is damaged."""
    path = Path(out) / cid / DEFINITION
    from vhpc.core.paths import read_regular

    try:
        raw = read_regular(path, MAX_DEFINITION)  # never waits on a FIFO in its place
    except FileNotFoundError:
        raise TuneError(f"campaign {cid} is not a vhpc tune race (no {path}): resume it with "
                        f"vhpc compare --resume {cid}") from None
    except OSError as exc:
        raise TuneError(f"cannot read {path} ({exc.strerror or exc}): check its permissions, or "
                        "move it aside") from None
    try:
        if len(raw) > MAX_DEFINITION:
            raise ValueError(f"larger than {MAX_DEFINITION // 1024} KiB")
        return Definition.from_dict(json.loads(raw.decode("utf-8")))
    except (ValueError, KeyError, TypeError, AttributeError, IndexError,
            RecursionError) as exc:  # truncated, not JSON, or edited: a field missing or mistyped
        what = f"{type(exc).__name__}: {exc}" if isinstance(exc, KeyError) else str(exc)
        raise TuneError(f"{path} is damaged ({' '.join(what.split())[:100]}): the race "
                        f"definition cannot be read; restore it from a copy, or resume the "
                        f"trials as a plain campaign (vhpc compare --resume {cid})") from None


def state(store: Store, cid: str, d: Definition) -> RaceState:
    """The race as the stored trials decide it (:func:`vhpc.workflows.tune.race.replay`)."""
    trials = store.trials(cid)
    rounds: dict[int, bool] = {}
    for t in trials:
        if not t.warmup:
            rounds[t.round] = rounds.get(t.round, True) and t.status in (DONE, FAILED)
    return replay(store.observations(cid), [r for r, ok in rounds.items() if ok], d.settings)


def run(store: Store, cid: str, d: Definition, progress=None, envs=None,
        on_round: Callable[[RaceState], None] | None = None) -> RaceState:
    """Run (or resume) race ``cid`` to its end: the planned trials, then one round at a time
    while :func:`vhpc.workflows.tune.race.next_round` gives one.  ``envs``: environments by name
    (default: built from the spec); ``on_round``: told the state after every round.
    Returns the final state; ``reason`` says why it stopped."""
    from vhpc.campaign.execute import stored_spec

    spec = stored_spec(store, cid)
    stopped: list[str] = []

    def more(rounds: int) -> list[dict]:
        st = state(store, cid, d)
        if on_round:
            on_round(st)
        planned = [t for t in execute.plan(spec, rounds + 1) if t.round == rounds]
        trials, why = next_round(st, planned, len(store.trials(cid)), d.settings)
        if why:
            stopped.append(why)
        return [asdict(t) for t in trials]

    execute.execute(store, cid, progress, envs=envs, next_round=more)
    final = state(store, cid, d)
    if not final.finished and stopped:
        final.reason = stopped[-1]
    return final


def prior(trials, baseline: str) -> tuple[str | None, str]:
    """The workload's memory-intensity class from the native trials' counters (Cheng and
    Chen, 3PGCIC 2013, Sec. III-B: MPKI > 3 high, 1–3 medium, < 1 low;
    :func:`vhpc.analysis.memprofile.intensity`) and a sentence saying what the prior did, or
    (None, why there is none)."""
    from vhpc.host import counters

    mpki = [t.mpki for t in memprofile.from_trials(trials)
            if t.environment == baseline and t.mpki is not None]
    if not mpki:
        ok, why = counters.perf_status()
        return None, ("no prior: hardware counters unavailable"
                      f"{'' if ok else ' (' + why + ')'}, so all candidates were raced in "
                      "listing order")
    m = stats.mean(mpki)
    cls = memprofile.intensity(m)
    first = "local-memory candidates" if cls in ("high", "medium") else "unpinned candidates"
    return cls, (f"prior: MPKI {m:.2f} ({cls} memory intensity, seed 003): {first} listed "
                 "first and preferred among equivalent ones")
