"""How long planned trials may take here (``--dry-run`` of ``vhpc compare``, ``run``, ``study``
and ``paper``), from what this host measured, at the load it has now.

A store keeps each finished trial's start and end and this host's load average just before
and just after it (:class:`~vhpc.core.records.Diagnostics`).  A trial's duration is brought
to an idle host by the share of a CPU it got, and back to the load now:

    slowdown(L) = max(1, (L + 1) / C)

with C this host's CPUs and L the runnable tasks beside the trial (the 1-minute load
average; the load recorded around a trial counts the campaign's own process, so one is taken
off it).  That is the processor-sharing model of a round-robin scheduler (Kleinrock, *Queueing
Systems* vol. 2, 1976, §4.4): a task among L + 1 runnable ones on C CPUs gets C / (L + 1) of
one once L + 1 > C.  The estimate says how sure it is: the range runs from the fastest
normalised trial at the lowest of today's load averages (1, 5, 15 min) halved, to the
slowest at the highest doubled plus one, so a load that moves during the campaign is inside
it.  Benchmarks and environments the store has not seen fall back, in order, to the same
benchmark in an environment of the same kind, to the median trial of that kind scaled by the
parameters' work (:func:`work_factor`), and to the kind's rule of thumb, with a wider range.

Custom benchmarks of a campaign file are looked up in the campaign (``spec.benchmark``),
never only in the built-in registry.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from vhpc.environments.kind import GUEST, KINDS

__all__ = [
    "BOOT_S",
    "DURATION",
    "FACTOR",
    "PARALLEL",
    "PAST_CAMPAIGNS",
    "Estimate",
    "Past",
    "accelerator",
    "boots_guests",
    "dry_run_estimate",
    "estimate",
    "estimate_line",
    "estimate_s",
    "fmt_duration",
    "load_now",
    "past_seconds",
    "slowdown",
    "work_factor",
]

#: seconds a guest takes to boot (a fresh session), by accelerator: generous rules of thumb
#: (a TCG guest of vhpc's was ready in 4.2-4.7 s on a 2-core host, 2 vCPUs, 1 GiB; its kernel
#: reaches init in 1.85-2.3 s under TCG, shared/reference/vm-mechanics.md); a store's past
#: boots replace it
BOOT_S = {"kvm": 15.0, "tcg": 15.0}
#: seconds the first boot of a user's image takes, by accelerator, before one was measured
#: here: its checks (SHA-256) and kernel copy, then a distribution's boot to ready (docs/
#: images.md: 5 + 40 s, then 143-199 s under TCG at load 8-12; a KVM boot about 20 s)
IMAGE_BOOT_S = {"kvm": 60.0, "tcg": 240.0}
#: a guest trial against the same trial natively, before this host measured the ratio: TCG
#: emulation runs compiled HPC kernels 10-50 times slower (docs/fidelity.md), KVM near native
GUEST_FACTOR = {"kvm": 1.2, "tcg": 20.0}
#: parameters that spread work over CPUs rather than add to it (left out of the work factor)
PARALLEL = frozenset({"ranks", "threads", "copies", "pairs", "vcpus"})
#: a parameter of this name is wall-clock seconds (noise runs that long in any environment)
DURATION = "duration"
#: the work factor's bounds (a parameter far from its default is still a rule of thumb)
FACTOR = (0.02, 50.0)
#: campaigns, newest first, whose trials teach the estimate
PAST_CAMPAIGNS = 30
#: the range of a trial estimated without a measurement of its own benchmark here (a rule of
#: thumb, or another benchmark's median): this much below and above
GUESS_SPREAD = (0.5, 3.0)


def _cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - Linux has it
        return max(1, os.cpu_count() or 1)


def slowdown(load: float | None, cpus: int | None = None) -> float:
    """How much longer a one-CPU task takes beside ``load`` runnable tasks on ``cpus`` CPUs
    than on an idle host: max(1, (load + 1) / cpus) (processor sharing, module docstring);
    1 when the load is unknown.  ``cpus`` defaults to the CPUs this process may use."""
    if load is None or not math.isfinite(load) or load < 0:
        return 1.0
    return max(1.0, (load + 1.0) / (cpus or _cpus()))


def load_now() -> tuple[float, float, float] | None:
    """This host's load averages (1, 5, 15 min; /proc/loadavg by getloadavg(3)); None where
    the system has none."""
    try:
        return os.getloadavg()
    except OSError:  # pragma: no cover - Linux has it
        return None


def _trial_load(t) -> float | None:
    """The load beside trial ``t`` when it ran: the mean of the 1-minute load averages just
    before and just after it, less the campaign's own process; None when not recorded."""
    d = getattr(t, "diagnostics", None)
    loads = [x[0] for x in (getattr(d, "loadavg_before", None), getattr(d, "loadavg_after", None))
             if x]
    return max(0.0, sum(loads) / len(loads) - 1.0) if loads else None


@dataclass
class Past:
    """What a store's finished trials say about time on this host, in seconds on an idle host
    (each trial's duration divided by :func:`slowdown` at the load recorded with it): every
    normalised duration per (benchmark, parameters, environment) and per (benchmark,
    parameters, environment kind, accelerator); per (kind, accelerator) the median trial and
    the median measured boot (a session's first trial started this long after the trial
    before it ended, in the same campaign; a campaign's first session: its first trial began
    this long after the campaign was created, host checks included; a user's image: the
    ``boot_seconds`` its session's first trial recorded, QEMU start to ready, per image)."""

    exact: dict[tuple[str, str, str], list[float]] = field(default_factory=dict)
    #: normalised durations per (benchmark, parameters) of environments that boot no guest
    #: (native): what a guest trial of the same is scaled from by :attr:`guest_ratio`
    native: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    #: per (kind, accelerator): the median over benchmarks of guest / native trial time
    guest_ratio: dict[tuple[str, str], float] = field(default_factory=dict)
    #: a campaign's start (host checks, fingerprints) before its first trial, where no guest
    #: booted in it: the median over the campaigns (None: none seen)
    start: float | None = None
    by_kind: dict[tuple[str, str, str, str], list[float]] = field(default_factory=dict)
    median: dict[tuple[str, str], float] = field(default_factory=dict)
    #: per (kind, accelerator, image file name or "" for vhpc's direct kernel boot): the
    #: median measured boot
    boot: dict[tuple[str, str, str], float] = field(default_factory=dict)


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def past_seconds(store, cpus: int | None = None) -> Past:
    """:class:`Past` from the newest :data:`PAST_CAMPAIGNS` campaigns of ``store`` (an empty
    one without a store: the rules of thumb then), read through its public methods, so a
    damaged store raises its one-line StoreError.  ``cpus``: this host's (default: the CPUs
    this process may use)."""
    if store is None:
        return Past()
    past = Past()
    medians: dict[tuple, list[float]] = {}
    boots: dict[tuple, list[float]] = {}
    starts: list[float] = []
    ratios: dict[tuple[str, str], list[float]] = {}
    for camp in store.campaigns()[:PAST_CAMPAIGNS]:
        envs = store.environments(camp["id"])
        kinds = {n: (e.kind, e.accel or "") for n, e in envs.items()}
        images = {n: _image_name((e.fingerprint or {}).get("image")) for n, e in envs.items()}
        guest: dict[tuple, list[float]] = {}  # (bench, params, kind, accel) → this campaign's
        trials = [t for t in store.trials(camp["id"])
                  if t.started is not None and t.ended is not None]
        ended = {t.seq: t.ended for t in trials}
        first = min((t.started for t in trials), default=None)
        native: dict[tuple[str, str], list[float]] = {}
        for t in trials:
            k = kinds.get(t.environment, ("", ""))
            image = images.get(t.environment, "")
            measured = getattr(t.applied, "boot_seconds", None) if t.applied else None
            if t.session_index == 0 and isinstance(measured, (int, float)) and measured > 0:
                boots.setdefault((*k, image), []).append(float(measured))  # its own clock
            elif t.session_index == 0:  # a fresh session's first trial: the boot came before
                gap = t.started - ended.get(t.seq - 1, t.started)
                if 1.0 < gap < 600:
                    boots.setdefault((*k, image), []).append(gap)
            if t.status == "done":
                d = (t.ended - t.started) / slowdown(_trial_load(t), cpus)
                past.exact.setdefault((t.benchmark, t.params, t.environment), []).append(d)
                past.by_kind.setdefault((t.benchmark, t.params, *k), []).append(d)
                medians.setdefault(k, []).append(d)
                if _boots(k[0]):
                    guest.setdefault((t.benchmark, t.params, *k), []).append(d)
                else:
                    native.setdefault((t.benchmark, t.params), []).append(d)
                    past.native.setdefault((t.benchmark, t.params), []).append(d)
        for (bench, params, *k), ds in guest.items():  # guest / native, same campaign
            if native.get((bench, params)) and _median(native[(bench, params)]) > 0:
                ratios.setdefault(tuple(k), []).append(
                    _median(ds) / _median(native[(bench, params)]))
        booting = [n for n, k in kinds.items() if _boots(k[0])]
        gap = first - camp["created"] if first is not None else 0.0
        if booting and 1.0 < gap < 600 and not images.get(booting[0]):
            # the first session booted before the first trial (an image's boot is its own
            # boot_seconds, read above: its preflight came before the campaign was created)
            boots.setdefault((*kinds[booting[0]], ""), []).append(gap)
        elif not booting and 0.0 < gap < 600:
            starts.append(gap)
    past.guest_ratio = {k: _median(v) for k, v in ratios.items()}
    past.median = {k: _median(v) for k, v in medians.items()}
    past.boot = {k: _median(v) for k, v in boots.items()}
    past.start = _median(starts) if starts else None
    return past


def _boots(kind: str) -> bool:
    """Whether environments of ``kind`` boot guests (a kind vhpc does not know: no)."""
    return kind in KINDS and KINDS.get(kind)().boots_guests


def _image_name(image) -> str:
    """The file name of a user's image (a fingerprint's ``image`` record, or an environment's
    ``image=`` option), "" for none: what a measured boot is kept under."""
    path = image.get("path") if isinstance(image, dict) else image
    return Path(str(path)).name if path else ""


def work_factor(bench_spec, benchmark=None) -> float:
    """How much more (or less) work a benchmark's given parameters ask for than its defaults:
    the product of value / default over the numeric parameters given (those that spread work
    over CPUs, :data:`PARALLEL`, and a :data:`DURATION` left out; a ``*_log2`` parameter
    counts as 2^(value − default)), bounded by :data:`FACTOR`.  ``linpack:n=200`` → 0.2 of
    the default ``n=1000``; a parameter whose default is 0 or auto (``hpccg:nx``) counts as
    1.  ``benchmark``: its definition (a campaign's custom one); default: the registry's, and
    1 for a name it does not know."""
    from vhpc import benchmarks

    if benchmark is None:
        benchmark = benchmarks.REGISTRY.get(bench_spec.name)
    declared = {p.name: p for p in getattr(benchmark, "params", ())}
    f = 1.0
    for name, value in bench_spec.params.items():
        p = declared.get(name)
        if (p is None or name in PARALLEL or name == DURATION or isinstance(p.default, bool)
                or not isinstance(p.default, (int, float)) or not p.default
                or isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            continue
        f *= 2.0 ** (value - p.default) if name.endswith("_log2") else value / p.default
    return min(max(f, FACTOR[0]), FACTOR[1])


@dataclass(frozen=True)
class Estimate:
    """Seconds planned trials may take here: ``seconds`` at the load now, ``low``..``high``
    the range (module docstring); ``measured``: trials estimated from a measurement of their
    own benchmark and parameters on this host, of ``trials``; ``load``: the 1-minute load
    average now (None: unknown)."""

    seconds: float
    low: float
    high: float
    measured: int
    trials: int
    load: float | None
    #: the parts not measured here, in words ("vm boots: none measured here", "vm trials:
    #: native's × 20 under tcg"), each once, in the order met
    guessed: tuple[str, ...] = ()

    def text(self) -> str:
        """"about 6 min (4–19 min at today's load)"; "about 40 s (20 s–2 min, a rule of
        thumb: nothing like it measured here yet)" when no trial was measured; then the parts
        guessed ("; guessed: vm boots: none of bench.qcow2 measured here")."""
        when = f"about {fmt_duration(self.seconds)}"
        span = fmt_duration(self.low, self.high)
        guessed = f"; guessed: {'; '.join(self.guessed)}" if self.guessed else ""
        if not self.measured:  # every part guessed: no list
            return f"{when} ({span}, a rule of thumb: nothing like it measured here yet)"
        at = "at today's load" if self.load is not None else "load unknown"
        part = "" if self.measured == self.trials else \
            f"; {self.measured} of {self.trials} trials measured here before"
        return f"{when} ({span} {at}{part}{guessed})"


def _unit(s: float) -> tuple[float, str]:
    return (1.0, "s") if s < 90 else (60.0, "min") if s < 5400 else (3600.0, "h")


def fmt_duration(s: float, high: float | None = None) -> str:
    """Seconds as a reader says them: "40 s", "6 min", "2.5 h"; with ``high``, the range
    ``s``–``high``, the unit said once when both share it ("4–19 min", "40 s–3 min")."""
    def one(x: float, unit: bool = True) -> str:
        div, name = _unit(x)
        text = f"{x / div:.1f}" if name == "h" else f"{x / div:.0f}"
        return f"{text} {name}" if unit else text

    if high is None:
        return one(s)
    same = _unit(s)[1] == _unit(high)[1]
    return f"{one(s, not same)}–{one(high)}"


def estimate(spec, trials, accel: str, store=None, load=None, cpus: int | None = None) -> Estimate:
    """The :class:`Estimate` of the planned ``trials`` of ``spec``, each trial at most the
    spec's timeout, from what ``store`` measured here (:class:`Past`), best first: the
    same benchmark, parameters and environment; the same benchmark and parameters in an
    environment of the same kind and accelerator; a guest trial of a benchmark measured
    natively: that time × the guest / native ratio this host measured for the kind and
    accelerator (else × :data:`GUEST_FACTOR`, guessed); the median past trial of that kind
    scaled by the benchmark's :func:`work_factor`; else the kind's rule of thumb
    (:meth:`EnvironmentKind.trial_seconds` under ``accel``), half of it fixed (starting the
    trial) and half scaled by the work factor.  Plus a given :data:`DURATION`, and a boot for
    the first session of a kind that boots guests and every fresh one: the median boot
    measured for that kind, accelerator and image (a user's ``image=``: its own boots, the
    first included), else :data:`IMAGE_BOOT_S` for an image and :data:`BOOT_S` otherwise;
    and the campaign's start as measured (:attr:`Past.start`).  Measured trials are brought
    to ``load`` (the load averages now, default :func:`load_now`) by :func:`slowdown`; a
    measured boot or start, whose load was not recorded, counts as measured, its range half
    to twice it; rules of thumb stand as they are (sized on a shared 2-core host, not an idle
    one), with :data:`GUESS_SPREAD` as their range, and are named in
    :attr:`Estimate.guessed`."""
    cpus = cpus or _cpus()
    load = load_now() if load is None else load
    past = past_seconds(store, cpus)
    now = slowdown(load[0] if load else None, cpus)
    lo_load = slowdown(min(load) / 2 if load else None, cpus)
    hi_load = slowdown(max(load) * 2 + 1 if load else None, cpus)
    envs = {e.name: e for e in spec.environments}
    kinds = {n: KINDS.get(e.kind)() for n, e in envs.items()}
    images = {n: _image_name(getattr(e.options, "image", None)) for n, e in envs.items()}
    factors = {b.name + "\0" + b.key: (work_factor(b, spec.benchmark(b.name)),
                                       float(b.params.get(DURATION) or 0))
               for b in spec.benchmarks}
    limit = getattr(spec, "timeout", None) or float("inf")
    total = low = high = 0.0
    measured = 0
    booted: set[str] = set()
    guessed: dict[str, None] = {}
    for t in trials:
        kind = kinds[t.environment]
        k = (envs[t.environment].kind, accel if kind.boots_guests else "")
        f, wall = factors.get(t.benchmark + "\0" + t.params, (1.0, 0.0))
        seen = past.exact.get((t.benchmark, t.params, t.environment)) or \
            past.by_kind.get((t.benchmark, t.params, *k))
        native = past.native.get((t.benchmark, t.params)) if kind.boots_guests else None
        if seen:
            measured += 1
            s, s_lo, s_hi = (_median(seen) * now, min(seen) * lo_load, max(seen) * hi_load)
        elif native:  # the same trial natively, times what a guest costs here
            ratio = past.guest_ratio.get(k)
            if ratio is None:
                ratio = GUEST_FACTOR.get(accel, GUEST_FACTOR["tcg"])
                guessed[f"{t.environment} trials: native's × {ratio:g} under {accel}"] = None
            s = _median(native) * ratio * now + wall
            s_lo, s_hi = min(native) * ratio * lo_load, max(native) * ratio * hi_load * 2
        else:
            if k in past.median:
                s = past.median[k] * f * now + wall
            else:  # half of a rule-of-thumb trial is starting it, half the work; rules of
                # thumb are this kind of host's under its usual load, not scaled again
                s = kind.trial_seconds(accel) * (0.5 + 0.5 * f) + wall
            guessed[f"{t.environment} trials: none run here"] = None
            s_lo, s_hi = s * GUESS_SPREAD[0], s * GUESS_SPREAD[1]
        total += min(s, limit)
        low += min(s_lo, limit)
        high += min(s_hi, limit)
        if kind.boots_guests and (t.fresh or t.environment not in booted):
            image = images[t.environment]
            if (*k, image) in past.boot:  # measured at the load of its day: half to twice it
                b = past.boot[(*k, image)]
                total, low, high = total + b, low + b / 2, high + b * 2
            else:  # a rule of thumb: its range as a trial's
                b = (IMAGE_BOOT_S if image else BOOT_S).get(accel, 60.0)
                guessed[f"{t.environment} boots" + (f": none of {image} measured here"
                                                    if image else ": none measured here")] = None
                total, low, high = (total + b, low + b * GUESS_SPREAD[0],
                                    high + b * GUESS_SPREAD[1])
            booted.add(t.environment)
    if past.start is not None and trials:  # host checks and fingerprints before the first
        total, low, high = total + past.start, low + past.start / 2, high + past.start * 2
    return Estimate(total, min(low, total), max(high, total), measured, len(trials),
                    load[0] if load else None, tuple(guessed))


def estimate_s(spec, trials, accel: str, store=None, load=None) -> float:
    """Seconds of :func:`estimate` (its centre)."""
    return estimate(spec, trials, accel, store, load).seconds


def estimate_line(spec, trials, accel: str, store=None, done: Estimate | None = None) -> str:
    """One line for ``--dry-run``: the trial count and the estimate with its range
    (:meth:`Estimate.text`); ``done``: the :func:`estimate` of these trials when the caller
    has it already."""
    e = done or estimate(spec, trials, accel, store)
    guests = f" (guests under {accel})" if boots_guests(spec) else ""
    return (f"{len(trials)} trials ({len(spec.benchmarks)} benchmark(s) × "
            f"{len(spec.environments)} environment(s) × {spec.warmup}+{spec.repeats} rounds), "
            f"{e.text()} on this host{guests}")


def boots_guests(spec) -> bool:
    """Whether any environment of ``spec`` boots guests (its kind's ``boots_guests``)."""
    return any(KINDS.get(e.kind).boots_guests for e in spec.environments)


def dry_run_estimate(spec, out: str | Path) -> str:
    """The estimate line ``vhpc study --dry-run`` prints for ``spec`` (the same as ``vhpc
    paper --dry-run`` gives the study), past trials read from ``out``'s store if it has one."""
    from vhpc.campaign import execute
    from vhpc.store import Store

    db = Path(out, "vhpc.db")
    store = Store(db) if db.is_file() else None
    # no guest, no KVM probe: it boots a probe guest, 8 s where KVM guests hang
    accel = accelerator()[0] if boots_guests(spec) else "tcg"
    return estimate_line(spec, execute.plan(spec), accel, store)


def accelerator() -> tuple[str, str]:
    """(``"kvm"`` or ``"tcg"``, why) for the guests a run would boot here: the guest kind's
    answer (:meth:`vhpc.environments.kind.EnvironmentKind.estimate_accel`)."""
    return KINDS.providing(GUEST)().estimate_accel()
