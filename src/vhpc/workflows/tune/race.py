"""Racing candidate placements: interleaved rounds against the native reference, dropping a
candidate as soon as it is significantly worse than the current leader.

Method: successive elimination (E. Even-Dar, S. Mannor, Y. Mansour, "Action elimination and
stopping conditions for the multi-armed bandit and reinforcement learning problems", JMLR 7
(2006) 1079–1105) in the style of F-Race (M. Birattari, T. Stützle, L. Paquete, K. Varrentrapp,
"A racing algorithm for configuring metaheuristics", GECCO 2002): every round runs each
surviving candidate and native once per benchmark (a campaign round, environment order
alternating); after each measured round from ``min_rounds`` on:

1. **cost** of candidate c in round r: the mean over benchmarks and metrics of
   ``log(value_c / value_native)`` in the worse direction (``log(native / c)`` when higher is
   better), native taken from the same round, so slow host drift cancels. 0 = native speed.
2. **leader**: the candidate with the lowest mean cost.
3. **elimination**: each other candidate vs the leader, Welch's t-test on the per-round costs
   (:func:`vhpc.core.stats.welch_test`, two-sided: conservative for the selected leader); p-values
   Holm-adjusted across the candidates compared in that round (:func:`vhpc.core.stats.holm_adjust`);
   adjusted p < α drops the candidate.
4. **equivalence**: a candidate is equivalent to the leader when the two one-sided Welch tests
   (TOST; D. J. Schuirmann, J. Pharmacokin. Biopharm. 15 (1987) 657–680) reject a cost
   difference of ±log(1 + tolerance) at level α; when every survivor is equivalent the race
   stops. Claiming all of them at once needs no multiplicity correction (intersection–union
   test: R. L. Berger, Technometrics 24 (1982) 295–300).
5. stop when one candidate remains, the survivors are equivalent, or the next round would
   exceed the budget (trials, warm-up and native included).

Repeated testing after every round makes the overall error rate larger than α (as in F-Race);
``min_rounds`` and Holm's correction keep early mistakes rare.  The race is a pure function of
the stored trials (:func:`replay`), so a resumed race takes the same decisions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from vhpc.core import stats
from vhpc.spec.parse import default_baseline

__all__ = ["Settings", "Standing", "RoundRecord", "RaceState", "costs", "decide", "replay",
           "ratio_ci", "per_benchmark", "next_round", "order_by_prior",
           "LEADER", "ELIMINATED", "EQUIVALENT", "CONTENDER", "FAILED"]

LEADER, ELIMINATED, EQUIVALENT, CONTENDER, FAILED = ("leader", "eliminated", "equivalent",
                                                     "contender", "failed")


@dataclass(frozen=True)
class Settings:
    """Race parameters: ``alpha`` (test level, e.g. 0.05), ``tolerance`` (equivalence margin as a
    fraction, 0.02 = 2 %), ``budget`` (max trials, all environments and warm-up included),
    ``min_rounds`` (measured rounds before the first test, ≥ 2), ``baseline`` (native
    environment name) and ``candidates`` (environment names, listing order)."""

    alpha: float = 0.05
    tolerance: float = 0.02
    budget: int = 60
    min_rounds: int = 3
    baseline: str = field(default_factory=default_baseline)
    candidates: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """JSON-able form (stored beside the campaign for ``--resume``)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, d: Mapping) -> Settings:
        """Inverse of :meth:`to_dict`."""
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


@dataclass(frozen=True)
class Standing:
    """One candidate after a round: cost samples ``n``, geometric-mean ``ratio`` to native with
    its 95 % Student-t ``ci`` (from the log costs; None with n < 2), ``status`` and, for an
    eliminated one, the ``round`` and Holm-adjusted ``p``; ``tost_p`` for an equivalence test."""

    env: str
    n: int
    ratio: float | None
    ci: tuple[float, float] | None
    status: str
    round: int | None = None
    p: float | None = None
    tost_p: float | None = None


@dataclass(frozen=True)
class RoundRecord:
    """The decision after measured round ``round``: every candidate's :class:`Standing`."""

    round: int
    standings: tuple[Standing, ...]


@dataclass
class RaceState:
    """Where the race stands: per-round records, the final standings, ``finished`` and why
    (``one remains``, ``equivalent within tolerance``, ``budget spent`` or ``running``)."""

    rounds: list[RoundRecord] = field(default_factory=list)
    standings: dict[str, Standing] = field(default_factory=dict)
    finished: bool = False
    reason: str = "running"

    @property
    def alive(self) -> list[str]:
        """Candidates still racing (not eliminated, not failed)."""
        return [e for e, s in self.standings.items() if s.status not in (ELIMINATED, FAILED)]

    @property
    def leader(self) -> str | None:
        """The current leader's environment name."""
        return next((e for e, s in self.standings.items() if s.status == LEADER), None)


def costs(observations: Iterable, baseline: str) -> dict[str, dict[int, float]]:
    """Per environment, per measured round: the mean log cost vs ``baseline`` in that round
    (module docstring, step 1).  ``observations``: store observations (environment, benchmark,
    params, metric, higher_is_better, value, valid, warmup, round).  Rounds where the baseline
    or the environment lacks a valid positive value of a metric skip that metric."""
    vals: dict[tuple, list[float]] = {}
    hib: dict[tuple, bool] = {}
    for o in observations:
        if o.warmup or not o.valid or not (o.value > 0):
            continue
        vals.setdefault((o.environment, o.round, o.benchmark, o.params, o.metric), []).append(o.value)
        hib[(o.benchmark, o.params, o.metric)] = o.higher_is_better
    logs: dict[str, dict[int, list[float]]] = {}
    for (env, rnd, b, p, m), v in vals.items():
        if env == baseline or (baseline, rnd, b, p, m) not in vals:
            continue
        ratio = stats.mean(v) / stats.mean(vals[(baseline, rnd, b, p, m)])
        logs.setdefault(env, {}).setdefault(rnd, []).append(
            -math.log(ratio) if hib[(b, p, m)] else math.log(ratio))
    return {env: {r: stats.mean(x) for r, x in per.items()} for env, per in logs.items()}


def ratio_ci(x: Sequence[float], confidence: float = 0.95
             ) -> tuple[float | None, tuple[float, float] | None]:
    """Geometric-mean ratio exp(mean) of log costs ``x`` and its Student-t interval (exp of
    :func:`vhpc.core.stats.describe`'s CI of the mean); (None, None) for no values, no CI for one."""
    d = stats.describe(x, confidence)
    if not d.n:
        return None, None
    return math.exp(d.mean), ((math.exp(d.ci_low), math.exp(d.ci_high))
                              if d.ci_low is not None else None)


def per_benchmark(observations: Iterable, baseline: str, env: str
                  ) -> dict[str, tuple[float | None, tuple[float, float] | None]]:
    """Per benchmark (``name[params]``): :func:`ratio_ci` of ``env``'s per-round costs on that
    benchmark alone (the race itself uses all benchmarks combined)."""
    obs = list(observations)
    keys = sorted({(o.benchmark, o.params) for o in obs})
    out = {}
    for b, p in keys:
        per = costs([o for o in obs if (o.benchmark, o.params) == (b, p)], baseline).get(env, {})
        out[f"{b}[{p}]" if p else b] = ratio_ci([per[r] for r in sorted(per)])
    return out


def _summary(x: Sequence[float]) -> tuple[float, float, int]:
    d = stats.describe(x)
    return d.mean, (d.stdev or 0.0) ** 2, d.n


def _tost(c: Sequence[float], lead: Sequence[float], margin: float) -> float | None:
    """TOST p-value that mean(c) − mean(lead) lies within ±margin (Welch), None if untestable."""
    mc, vc, nc = _summary(c)
    ml, vl, nl = _summary(lead)
    out = []
    for shift, want_below in ((-margin, True), (margin, False)):
        p2, _ = stats.welch_test(mc + shift, vc, nc, ml, vl, nl)
        if p2 is None:
            return None
        right_side = (mc + shift < ml) if want_below else (mc + shift > ml)
        out.append(p2 / 2 if right_side else 1 - p2 / 2)
    return max(out)


def _standing(env: str, x: Sequence[float], status: str, **kw) -> Standing:
    ratio, ci = ratio_ci(x)
    return Standing(env, len(x), ratio, ci, status, **kw)


def decide(data: Mapping[str, Sequence[float]], previous: Mapping[str, Standing],
           rnd: int, s: Settings) -> tuple[dict[str, Standing], str | None]:
    """One elimination step after measured round ``rnd`` (module docstring, steps 2–5 without
    the budget): ``data`` maps every candidate to its per-round costs so far; ``previous`` the
    standings before (eliminated ones stay so).  Returns (standings, stop reason or None)."""
    out: dict[str, Standing] = {}
    alive = []
    for env in s.candidates:
        prev = previous.get(env)
        x = list(data.get(env, ()))
        if prev is not None and prev.status in (ELIMINATED, FAILED):
            out[env] = prev
        elif len(x) < 2:
            out[env] = Standing(env, len(x), None, None, FAILED, round=rnd)
        else:
            alive.append(env)
    if not alive:
        return out, "no candidate produced valid results"
    lead = min(alive, key=lambda e: (stats.mean(data[e]), s.candidates.index(e)))
    others = [e for e in alive if e != lead]
    raw = []
    for e in others:
        mc, vc, nc = _summary(data[e])
        ml, vl, nl = _summary(data[lead])
        p, _ = stats.welch_test(mc, vc, nc, ml, vl, nl)
        raw.append(1.0 if p is None else p)
    adjusted = dict(zip(others, stats.holm_adjust(raw, s.alpha)))
    out[lead] = _standing(lead, data[lead], LEADER)
    left = []
    for e in others:
        if adjusted[e] < s.alpha:
            out[e] = _standing(e, data[e], ELIMINATED, round=rnd, p=adjusted[e])
        else:
            left.append(e)
    margin = math.log1p(s.tolerance)
    tosts = {e: _tost(data[e], data[lead], margin) for e in left}
    equivalent = all(p is not None and p < s.alpha for p in tosts.values())
    for e in left:
        out[e] = _standing(e, data[e], EQUIVALENT if equivalent else CONTENDER, p=adjusted[e],
                           tost_p=tosts[e])
    if not left:
        return out, "one remains"
    return out, "equivalent within tolerance" if equivalent else None


def replay(observations: Iterable, complete_rounds: Iterable[int], s: Settings) -> RaceState:
    """Re-take every decision from stored observations: after each measured round in
    ``complete_rounds`` (rounds whose trials all finished), from the ``min_rounds``-th on.
    Deterministic, so ``--resume`` continues the same race."""
    per = costs(observations, s.baseline)
    state = RaceState(standings={e: Standing(e, 0, None, None, CONTENDER) for e in s.candidates})
    for k, rnd in enumerate(sorted(complete_rounds), start=1):
        if k < s.min_rounds:
            continue
        data = {e: [per.get(e, {})[r] for r in sorted(per.get(e, {})) if r <= rnd]
                for e in state.alive}
        standings, reason = decide(data, state.standings, rnd, s)
        state.standings = standings
        state.rounds.append(RoundRecord(rnd, tuple(standings[e] for e in s.candidates)))
        if reason:
            state.finished, state.reason = True, reason
            break
    return state


def next_round(state: RaceState, planned: Sequence, used: int, s: Settings,
               ) -> tuple[list, str | None]:
    """The trials of the next round for the survivors and native, or ([], why not): the race
    is finished, or they would exceed the budget (``used`` trials stored so far).  ``planned``:
    the campaign plan's trials of that round (any object with ``environment``)."""
    if state.finished:
        return [], state.reason
    keep = set(state.alive) | {s.baseline}
    trials = [t for t in planned if t.environment in keep]
    if used + len(trials) > s.budget:
        return [], "budget spent"
    return trials, None


def order_by_prior(names: Sequence[str], local: Callable[[str], float], intensity: str | None,
                   ) -> tuple[str, ...]:
    """Seed 003's advice as an order: memory-intensive workloads (MPKI class ``high`` or
    ``medium``) list local-memory candidates first (``local`` = fraction of memory local to
    the vCPUs, higher first); ``low`` intensity lists unpinned/less-bound ones first; None
    (no counters) keeps the order.  Only an order, never a result."""
    if intensity in ("high", "medium"):
        return tuple(sorted(names, key=lambda n: -local(n)))
    if intensity == "low":
        return tuple(sorted(names, key=local))
    return tuple(names)
