"""Campaign specification: CLI flags, campaign files and studies compile to one validated,
immutable :class:`CampaignSpec`.

CLI: ``-b NAME[:k=v,...]`` (benchmark), ``-e KIND[:k=v,...]`` (environment; ``name=`` renames).
A value may contain commas (``pin=0,1``, ``policy=nodes:0,1;mem=local``): an item is split only
before ``KEY=`` where KEY is a field the benchmark or environment kind declares, and each value
is then parsed by its field's type (the kind's options model, the benchmark's :class:`Param`).
YAML (``vhpc run FILE``, at most 1 MiB and 32 levels deep)::

    repeats: 5          # measured rounds
    warmup: 1           # warm-up rounds: stored, not analysed
    baseline: native
    timeout: 600        # seconds per trial
    protocol: warm      # warm | cold | cold-warm (docs/campaigns.md, "Protocol")
    session_trials: 3   # cold-warm: trials per benchmark in each fresh session
    host_knobs: {hugepages_2m: 1024}   # changed only because asked; restored afterwards
    target_ci: 2%       # adaptive: add rounds until every mean is known to ±2 % (95 % CI) ...
    max_repeats: 30     # ... or this many measured rounds
    margin: 5%          # equivalence margin of the verdicts: ±5 % (or 0.05; docs/statistics.md)
    custom:             # bring your own benchmark (docs/benchmarks.md)
      - name: mybench
        command: ./mybench --size 100
        metrics: [{name: time, regex: 'took (\\S+) s', unit: s, higher_is_better: false}]
        success: PASSED
    benchmarks:
      - stream: {n: 1000000}
      - randomaccess
      - mybench
    environments:
      - native
      - vm: {vcpus: 2, pin: auto}

Parsing never touches the host and never changes the benchmark registry (custom benchmarks
live in the spec: :meth:`CampaignSpec.benchmark`).  Host-dependent checks are each
kind's :meth:`~vhpc.environments.kind.EnvironmentKind.plan`, run when a campaign starts or is
dry-run.  Errors are :class:`SpecError` with one line naming the item
or file, the field, the value and what is allowed.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Annotated, Any

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, PrivateAttr,
                      SerializeAsAny, ValidationError, field_validator, model_validator)

from vhpc import benchmarks, executors
from vhpc.core import argtypes
from vhpc.core.cpulist import foreign_digit
from vhpc.core.errors import SpecError, VhpcError
from vhpc.environments import kind as kinds
from vhpc.environments.kind import BASELINE, KINDS, EnvPlan, default_environments, kind_name
from vhpc.environments.options import MAX_SECONDS, EnvOptions, HostFacts
from vhpc.spec.document import read_document

__all__ = ["SpecError", "BenchSpec", "EnvSpec", "CampaignSpec", "bench", "env", "env_of",
           "campaign", "parse_bench", "parse_env", "from_cli", "from_file", "one_line",
           "default_environments", "default_baseline"]

#: Largest magnitude a numeric benchmark parameter may have (exact in a double).
MAX_PARAM = 2 ** 53
#: Most trials one campaign may plan (a year of 30-second trials; keeps the plan in memory).
MAX_TRIALS = 1_000_000


def default_baseline() -> str:
    """The baseline of a campaign that names none: the environment named after the baseline
    kind (:data:`~vhpc.environments.kind.BASELINE`), as :func:`default_environments`
    names it.  Also the baseline of a stored spec that has none (vhpc before the ``baseline``
    field).  Raises NoProvider when no kind provides it."""
    return kind_name(BASELINE)


class BenchSpec(BaseModel):
    """One benchmark with its parameter overrides, converted by the benchmark's declaration
    (only explicit overrides are kept; defaults are filled in by ``Benchmark.resolve``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    params: dict[str, Any] = Field(default_factory=dict)

    @property
    def key(self) -> str:
        """Canonical parameter string ``k=v,k=v`` (sorted; only explicit overrides)."""
        return ",".join(f"{k}={self.params[k]}" for k in sorted(self.params))

    @property
    def label(self) -> str:
        """``name[k=v,...]`` for messages and plans."""
        return f"{self.name}[{self.key}]" if self.params else self.name


class EnvSpec(BaseModel):
    """One environment: ``kind`` (a name in :data:`vhpc.environments.kind.KINDS`), unique ``name`` and
    the kind's typed, immutable ``options`` model."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: str
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.+-]+$")
    options: SerializeAsAny[EnvOptions]

    @model_validator(mode="before")
    @classmethod
    def _typed_options(cls, data):
        if isinstance(data, dict) and "kind" in data:
            entry = KINDS.get(str(data["kind"]))
            opts = data.get("options") or {}
            if not isinstance(opts, entry.options):
                if not isinstance(opts, dict):
                    raise ValueError(f"options of {data['kind']!r} must be a mapping")
                try:
                    opts = entry.options.model_validate(opts)
                except ValidationError as exc:
                    raise ValueError(one_line(exc, entry.options)) from None
            data = {**data, "options": opts}
        return data

    @property
    def part(self):
        """The registered :class:`~vhpc.environments.kind.EnvironmentKind` of this environment:
        what the kind can do (``boots_guests``, ``llc_owner``, :meth:`trial_seconds`, ...) is
        asked of it, never read from the kind's name."""
        return KINDS.get(self.kind)()

    def plan(self, host: HostFacts) -> EnvPlan:
        """Host checks and the placement of this environment on ``host``, computed once (the
        kind's :meth:`~vhpc.environments.kind.EnvironmentKind.plan`).  Raises
        HostError/PlacementError naming the environment."""
        return kinds.plan(self.kind, self.name, self.options, host)

    def build(self, host: HostFacts | None = None, plan: EnvPlan | None = None):
        """The Environment this spec describes on ``host`` (default: this host, read now), from
        ``plan`` (computed here when not given).  May probe the host (QEMU, guest kernel).
        Raises HostError/PlacementError naming the environment."""
        return kinds.build(self.kind, self.name, self.options, host or HostFacts.live(), plan)


def _finite_number(b: str, p, raw: Any) -> Any:
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise SpecError(f"{b}: {p.name}={raw!r} is not a valid {p.type.__name__}")
    if isinstance(raw, str) and not raw.isascii():
        raise SpecError(f"{b}: {p.name}={raw!r}: write the number in ASCII (0-9)")
    try:
        value = float(raw) if p.type is float else int(raw) if not isinstance(raw, float) else raw
    except (TypeError, ValueError):
        raise SpecError(f"{b}: {p.name}={raw!r} is not a valid {p.type.__name__}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise SpecError(f"{b}: {p.name}={raw!r}: give a finite number")
    if p.type is int and isinstance(value, float):
        if value != int(value):
            raise SpecError(f"{b}: {p.name}={raw!r} is not a valid int")
        value = int(value)
    if abs(value) > MAX_PARAM:
        raise SpecError(f"{b}: {p.name}={raw!r} is out of range (at most {MAX_PARAM:.0e})")
    if p.minimum is None and value < 0:
        raise SpecError(f"{b}: {p.name}={raw!r}: give a value of 0 or more")
    return value


def _check_params(bench: benchmarks.Benchmark, params: Any) -> dict[str, Any]:
    """Explicit overrides converted by the benchmark's own parameter declarations, plus the
    benchmark's :attr:`~vhpc.benchmarks.base.Benchmark.stored_params` (its problem size) at
    their defaults, so the stored campaign says what was computed."""
    if not isinstance(params, dict):
        raise SpecError(f"{bench.name}: parameters must be a mapping, got {params!r}")
    known = {p.name: p for p in bench.params}
    out = {}
    for k, raw in params.items():
        p = known.get(k)
        if p is None:
            out[k] = raw  # resolve() names the unknown parameter and lists the known ones
        elif p.type in (int, float):
            out[k] = _finite_number(bench.name, p, raw)
        elif isinstance(raw, (dict, bool)) or (isinstance(raw, list) and not all(
                isinstance(v, (int, str)) and not isinstance(v, bool) for v in raw)):
            raise SpecError(f"{bench.name}: {k}={raw!r}: give a {p.type.__name__} value")
        else:
            out[k] = raw
    try:
        resolved = bench.resolve(out)
    except (TypeError, ValueError, OverflowError) as exc:
        if isinstance(exc, VhpcError):
            raise SpecError(str(exc)) from None
        raise SpecError(f"{bench.name}: bad parameters {params!r}: {exc}") from None
    kept = set(params) | set(getattr(bench, "stored_params", ()))  # an application's size
    # (one left to auto, None, is sized when the campaign is created: execute.sized)
    return {k: v for k, v in resolved.items() if k in params or (k in kept and v is not None)}


class CampaignSpec(BaseModel):
    """The whole plan: environments × benchmarks × rounds, and the protocol.  ``custom``
    holds bring-your-own benchmark definitions (vhpc.benchmarks.custom.from_mapping); they
    are visible through :meth:`benchmark`, not the global registry."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    custom: list[dict[str, Any]] = Field(default_factory=list, max_length=256)
    benchmarks: list[BenchSpec] = Field(min_length=1, max_length=10000)
    environments: list[EnvSpec] = Field(min_length=1, max_length=1000)
    repeats: int = Field(5, ge=1, le=10000)
    warmup: int = Field(1, ge=0, le=1000)
    baseline: str = Field(default_factory=default_baseline)
    timeout: float = Field(600.0, gt=0, le=MAX_SECONDS, allow_inf_nan=False)
    order: str = Field("alternate", pattern="^(alternate|fixed)$")
    protocol: str = Field("warm", pattern="^(warm|cold|cold-warm)$")
    session_trials: int = Field(3, ge=2, le=1000)
    host_knobs: dict[str, str] = Field(default_factory=dict)
    #: fractions (``0.02``) or percentages (``2%``), never a bare number ≥ 1 (:meth:`_fraction`)
    target_ci: float | None = Field(None, gt=0, lt=1, allow_inf_nan=False)
    max_repeats: int = Field(30, ge=1, le=10000)
    #: equivalence margin of the verdicts (0.05: a ratio inside [1/1.05, 1.05] is
    #: "equivalent"; docs/statistics.md)
    margin: float = Field(0.05, ge=0, lt=1, allow_inf_nan=False)
    #: which intervals a family's rows show: ``holm`` (slower/faster at Holm's level, the rest
    #: at 1 − α/m) or ``simultaneous`` (all at 1 − α/m); docs/statistics.md
    intervals: str = Field("holm", pattern="^(holm|simultaneous)$")
    #: how positive metrics are compared: ``log-welch`` (Welch's t on ln values) or ``rank``
    #: (Hodges–Lehmann with the Mann–Whitney interval on ln values); docs/statistics.md
    method: str = Field("log-welch", pattern="^(log-welch|rank)$")
    #: compare an application (LAMMPS, GROMACS) across environments that have different
    #: versions of it (refused by default: vhpc.campaign.likewise.check_app_versions)
    allow_app_versions: bool = False
    #: where the trials run, parsed once (``local`` | ``slurm[:partition=P,nodes=N,...]``);
    #: stored as its text
    #: the study (a name in vhpc.campaign.studies.STUDIES) this campaign reproduces, if any
    study: str | None = Field(None, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    executor: Annotated[executors.ExecutorSpec, BeforeValidator(executors.parse),
                        PlainSerializer(str, return_type=str)] = executors.parse("local")

    _custom: dict[str, benchmarks.Benchmark] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _benchmarks_typed(cls, data):
        if not isinstance(data, dict):
            return data
        custom = _custom_benchmarks(data.get("custom") or [])
        items = data.get("benchmarks")
        if isinstance(items, list):
            out = []
            for b in items:
                if isinstance(b, dict) and isinstance(b.get("name"), str):
                    bench = custom.get(b["name"]) or benchmarks.get(b["name"])
                    b = {**b, "params": _check_params(bench, b.get("params") or {})}
                out.append(b)
            data = {**data, "benchmarks": out}
        return data

    @field_validator("margin", "target_ci", mode="before")
    @classmethod
    def _fraction(cls, v):
        """``5%`` or a fraction below 1 (:func:`vhpc.core.argtypes.fraction`): ``margin: 5%``
        is ``--margin 5``; a bare ``margin: 5`` (±500 %) is refused (the message names the
        key)."""
        return v if v is None else argtypes.fraction(v, "")

    @field_validator("host_knobs", mode="before")
    @classmethod
    def _knobs(cls, v):
        from vhpc.host.knobs import parse_knob

        if not isinstance(v, dict):
            raise ValueError("host_knobs must be a mapping NAME: VALUE")
        return dict(parse_knob(f"{k}={val}") for k, val in v.items())

    @model_validator(mode="before")
    @classmethod
    def _lone_baseline(cls, data):
        """A lone environment (e.g. one vcluster) is its own baseline unless one is given."""
        if isinstance(data, dict) and data.get("baseline") is None:
            envs = data.get("environments")
            if isinstance(envs, list) and len(envs) == 1:
                e = envs[0]
                name = e.name if isinstance(e, EnvSpec) else (
                    e.get("name") if isinstance(e, dict) else None)
                if isinstance(name, str):
                    data = {**data, "baseline": name}
        return data

    @model_validator(mode="after")
    def _check(self):
        names = [e.name for e in self.environments]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"environment name {dup[0]!r} is used twice: give one name=... ")
        if self.baseline not in names:
            raise ValueError(f"baseline {self.baseline!r} is not one of the environments "
                             f"({', '.join(names)})")
        if self.target_ci is not None and self.max_repeats < self.repeats:
            raise ValueError(f"max_repeats={self.max_repeats} is below repeats={self.repeats}: "
                             "raise max_repeats")
        if self.host_knobs and not self.executor.part.runs_here:
            raise ValueError("host knobs cannot be set on the executor's nodes from here: drop "
                             "--host-knob or use --executor local")
        keys = [(b.name, b.key) for b in self.benchmarks]
        if len(set(keys)) != len(keys):
            raise ValueError("the same benchmark with the same parameters is listed twice")
        rounds = self.warmup + (max(self.repeats, self.max_repeats) if self.target_ci
                                else self.repeats)
        per = self.session_trials if self.protocol == "cold-warm" else 1
        trials = len(self.benchmarks) * len(self.environments) * rounds * per
        if trials > MAX_TRIALS:
            raise ValueError(f"{trials} planned trials (benchmarks × environments × rounds) is "
                             f"over {MAX_TRIALS}: split the campaign or lower repeats")
        return self

    def model_post_init(self, context: Any) -> None:
        """Build the bring-your-own benchmarks of :attr:`custom` (:func:`_custom_benchmarks`: each
        definition once per process) into the spec's own lookup."""
        self._custom.update(_custom_benchmarks(self.custom))

    def __eq__(self, other: object) -> bool:
        """Equal when every field is (the custom benchmark objects built from ``custom``
        follow from it)."""
        return isinstance(other, CampaignSpec) and self.model_dump() == other.model_dump()

    __hash__ = None  # a spec holds dicts

    def benchmark(self, name: str) -> benchmarks.Benchmark:
        """The benchmark ``name``: a custom one of this spec, else a built-in.  Raises
        BenchmarkError for an unknown name."""
        return self._custom.get(name) or benchmarks.get(name)

    def environment(self, name: str) -> EnvSpec:
        """The environment called ``name`` (KeyError if none)."""
        return {e.name: e for e in self.environments}[name]


def _custom_benchmarks(definitions: Any) -> dict[str, benchmarks.Benchmark]:
    """Bring-your-own benchmarks by name, each definition built once per process (a spec
    validated again, from its file, the store or a copy, reuses the built objects).  Raises
    SpecError for a bad definition or a name a built-in benchmark already uses."""
    if not isinstance(definitions, list):
        raise SpecError("custom must be a list of benchmark definitions")
    try:
        key = json.dumps(definitions)
    except (TypeError, ValueError):  # not JSON data: built (and refused) without the cache
        return _build_custom(definitions)
    if key not in _CUSTOM_BUILT:
        if len(_CUSTOM_BUILT) >= 64:
            _CUSTOM_BUILT.clear()
        _CUSTOM_BUILT[key] = _build_custom(definitions)
    return dict(_CUSTOM_BUILT[key])


#: Custom benchmarks built from their definitions (JSON text → name → benchmark).
_CUSTOM_BUILT: dict[str, dict[str, benchmarks.Benchmark]] = {}


def _build_custom(definitions: list) -> dict[str, benchmarks.Benchmark]:
    from vhpc.benchmarks.custom import from_mapping

    out = {}
    for d in definitions:
        try:
            b = from_mapping(d)
        except (TypeError, ValueError) as exc:
            raise SpecError(f"custom: {exc}") from None
        if b.name in benchmarks.REGISTRY:
            raise SpecError(f"custom benchmark {b.name!r} clashes with a built-in benchmark: "
                            "choose another name")
        if b.name in out:
            raise SpecError(f"custom: two benchmarks are named {b.name!r}: give each its own "
                            "name")
        out[b.name] = b
    return out


# ---------------------------------------------------------------------------- errors


def one_line(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    """The first error of ``exc`` as one line: field, message and the value given."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith(("function-", "tagged")))
    msg = " ".join(err["msg"].removeprefix("Value error, ").split())
    if err["type"] == "extra_forbidden" and model is not None:
        msg += f" (allowed: {', '.join(model.model_fields)})"
    elif err["type"] not in ("value_error", "assertion_error") and "input" in err:
        given = repr(err["input"])
        msg += f" (got {given[:60] + '...' if len(given) > 60 else given})"
    last = str(err["loc"][-1]) if err["loc"] else ""
    if not loc or (last and msg.startswith((f"{last}=", f"{last} "))):
        return msg
    return f"{loc}: {msg}"


# ---------------------------------------------------------------------------- builders


def bench(name: str, **params: Any) -> BenchSpec:
    """A benchmark entry (parameters are checked when the campaign is assembled)."""
    return BenchSpec(name=name, params=params)


def env(kind: str, name: str | None = None, **options: Any) -> EnvSpec:
    """A typed environment ``kind`` named ``name`` (default: the kind).  Raises SpecError."""
    try:
        return EnvSpec(kind=kind, name=name or kind, options=options)
    except ValidationError as exc:
        raise SpecError(f"environment {name or kind}: {one_line(exc)}") from None


def env_of(capability: str, name: str | None = None, **options: Any) -> EnvSpec:
    """A typed environment of the kind that provides ``capability`` (a capability of
    :mod:`vhpc.environments.kind`: ``BASELINE``, ``GUEST``, ``GUEST_CLUSTER``, ...), named
    ``name`` (default: the kind's name), for code that asks for "the baseline" or "one guest"
    rather than naming a kind.  Raises SpecError (NoProvider when no kind provides it)."""
    return env(kind_name(capability), name, **options)


def campaign(benches: list[BenchSpec], envs: list[EnvSpec], where: str = "campaign",
             **protocol: Any) -> CampaignSpec:
    """Assemble and validate a campaign; protocol values of None keep their defaults.
    Raises SpecError naming ``where``."""
    data = {"benchmarks": [b.model_dump() for b in benches], "environments": envs,
            **{k: v for k, v in protocol.items() if v is not None}}
    try:
        return CampaignSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(f"{where}: {one_line(exc, CampaignSpec)}") from None
    except VhpcError as exc:
        raise SpecError(f"{where}: {exc}") from None


def _split(text: str, fields: list[str], where: str,
           noun: str = "option") -> tuple[str, dict[str, str]]:
    """``NAME:k=v,k=v`` → (NAME, {k: v}), splitting only before the declared ``fields``;
    errors name ``where`` (the flag and item)."""
    name, _, rest = text.partition(":")
    name = name.strip()
    if not name:
        raise SpecError(f"{where}: missing a name before ':'")
    if not rest.strip():
        return name, {}
    keys = "|".join(re.escape(f) for f in sorted(fields, key=len, reverse=True)) or "(?!)"
    tokens = re.split(rf",\s*(?=(?:{keys})\s*=)", rest)
    out: dict[str, str] = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        key = key.strip()
        if not sep or not re.fullmatch(r"[A-Za-z_]\w*", key):
            raise SpecError(f"{where}: expected {name}:key=value,... "
                            f"(keys: {', '.join(fields) or 'none'})")
        stray = re.search(r",\s*([A-Za-z_]\w*)\s*=", value)
        if key not in fields or (stray and stray.group(1) not in fields and
                                 not re.search(r"[:;]", value[:stray.start()])):
            bad = key if key not in fields else stray.group(1)
            allowed = ", ".join(f for f in fields if f != "name") or "none"
            raise SpecError(f"{where}: unknown {noun} {bad!r} ({noun}s: {allowed})")
        if key in out:
            raise SpecError(f"{where}: {key} is given twice")
        bad = foreign_digit(value)
        if bad:
            raise SpecError(f"{where}: {key}={value.strip()!r}: {bad!r} is not an ASCII digit: "
                            "write numbers with 0-9")
        out[key] = value.strip()
    return name, out


def parse_bench(text: str, custom: dict[str, benchmarks.Benchmark] | None = None) -> BenchSpec:
    """``-b NAME[:k=v,...]`` → BenchSpec (values still text; checked by the campaign); ``custom``:
    bring-your-own benchmarks by name, looked up first.  Raises SpecError naming ``text`` for an
    unknown benchmark or parameter, or a malformed or repeated ``k=v``."""
    name = text.partition(":")[0].strip()
    b = (custom or {}).get(name)
    try:
        b = b or benchmarks.get(name)
    except VhpcError as exc:
        raise SpecError(f"-b {text!r}: {exc}") from None
    name, params = _split(text, [p.name for p in b.params], f"-b {text!r}", "parameter")
    return BenchSpec(name=name, params=params)


def parse_env(text: str, taken: list[str]) -> EnvSpec:
    """``-e KIND[:k=v,...]`` → EnvSpec; a kind used twice without ``name=`` gets ``KIND2``...
    ``taken`` (names so far) is extended.  Raises SpecError naming the item."""
    kind = text.partition(":")[0].strip()
    try:
        entry = KINDS.get(kind)
    except ValueError as exc:
        raise SpecError(f"-e {text!r}: {exc}") from None
    kind, opts = _split(text, ["name", *entry.options.model_fields], f"-e {text!r}")
    return _named(kind, opts, taken, f"-e {text!r}")


def _named(kind: str, opts: dict[str, Any], taken: list[str], where: str) -> EnvSpec:
    opts = dict(opts)
    name = opts.pop("name", None)
    if name is None:
        name, i = kind, 2
        while name in taken:
            name, i = f"{kind}{i}", i + 1
    taken.append(str(name))
    try:
        return EnvSpec(kind=kind, name=name, options=opts)
    except ValidationError as exc:
        raise SpecError(f"{where}: {one_line(exc)}") from None


def from_cli(bench_items: list[str], env_items: list[str], host_knobs: list[str] | None = None,
             strict_placement: bool = False, **protocol: Any) -> CampaignSpec:
    """Build a spec from ``-b``/``-e`` strings, ``--host-knob NAME=VALUE`` strings,
    ``--strict-placement`` (sets ``strict`` on every VM that does not set it) and protocol
    flags (repeats, warmup, baseline, timeout, order, protocol, session_trials, target_ci,
    max_repeats, margin; None values keep their defaults).  Raises SpecError."""
    from vhpc.host.knobs import parse_knob

    taken: list[str] = []
    benches = [parse_bench(b) for b in bench_items]
    envs = [parse_env(e, taken) for e in env_items]
    if strict_placement:
        envs = [e.model_copy(update={"options": e.options.model_validate(
                    {**e.options.given(), "strict": True})})
                if "strict" in type(e.options).model_fields and "strict" not in
                e.options.model_fields_set else e for e in envs]
    if host_knobs:
        try:
            protocol["host_knobs"] = dict(parse_knob(k) for k in host_knobs)
        except VhpcError as exc:
            raise SpecError(f"--host-knob: {exc}") from None
    return campaign(benches, envs, "command line", **protocol)


def _entry(item: Any, where: str) -> tuple[str, dict[str, Any] | None, str | None]:
    """A list entry of a campaign file: ``NAME``/``"NAME:k=v"`` or ``{NAME: {k: v}}``."""
    if isinstance(item, str):
        return item.partition(":")[0].strip(), None, item
    if isinstance(item, dict) and len(item) == 1:
        (name, opts), = item.items()
        if opts is None:
            opts = {}
        if not isinstance(name, str) or not isinstance(opts, dict):
            raise SpecError(f"{where}: options of {name!r} must be a mapping")
        return name, dict(opts), None
    raise SpecError(f"{where}: expected NAME or {{NAME: {{key: value}}}}, got {str(item)[:60]!r}")


def from_file(path) -> CampaignSpec:
    """Load and validate a YAML (or JSON) campaign file (bounded: :mod:`vhpc.spec.document`).
    Raises SpecError naming the file."""
    doc = read_document(path)
    if not isinstance(doc, dict):
        raise SpecError(f"{path}: expected a mapping with benchmarks: and environments:")
    doc = dict(doc)
    benches_in = doc.pop("benchmarks", None)
    envs_in = doc.pop("environments", list(default_environments()))
    if not isinstance(benches_in, list) or not isinstance(envs_in, list):
        raise SpecError(f"{path}: benchmarks and environments must be lists")
    from os.path import abspath, dirname

    from vhpc.benchmarks.custom import anchor_inputs  # inputs: relative to the file

    doc["custom"] = anchor_inputs(doc.get("custom") or [], dirname(abspath(str(path))))
    custom = _custom_benchmarks(doc["custom"])
    benches, envs, taken = [], [], []
    for i, item in enumerate(benches_in):
        where = f"{path}: benchmarks[{i}]"
        name, params, text = _entry(item, where)
        try:
            benches.append(parse_bench(text, custom) if text is not None
                           else BenchSpec(name=name, params=params))
        except SpecError as exc:
            raise SpecError(f"{where}: {exc}") from None
    for i, item in enumerate(envs_in):
        where = f"{path}: environments[{i}]"
        name, opts, text = _entry(item, where)
        if text is not None:
            try:
                envs.append(parse_env(text, taken))
            except SpecError as exc:
                raise SpecError(f"{where}: {exc}") from None
            continue
        try:
            KINDS.get(name)
        except ValueError as exc:
            raise SpecError(f"{where}: {exc}") from None
        if isinstance(opts, dict) and isinstance(opts.get("image"), str):  # vm:image=FILE
            opts = {**opts, "image": os.path.join(dirname(abspath(str(path))),
                                                  os.path.expanduser(opts["image"]))}
        envs.append(_named(name, opts, taken, where))
    return campaign(benches, envs, str(path), **doc)
