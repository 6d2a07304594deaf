"""Campaign specification: CLI flags and YAML files compile to one validated :class:`CampaignSpec`.

CLI: ``-b NAME[:k=v,...]`` (benchmark), ``-e KIND[:k=v,...]`` (environment; ``name=`` renames).
YAML (``vhpc run FILE``)::

    repeats: 5          # measured rounds
    warmup: 1           # warm-up rounds: stored, not analysed
    baseline: native
    timeout: 600        # seconds per trial
    protocol: warm      # warm | cold | cold-warm (docs/campaigns.md, "Protocol")
    session_trials: 3   # cold-warm: trials per benchmark in each fresh session
    host_knobs: {hugepages_2m: 1024}   # changed only because asked; restored afterwards
    target_ci: 0.02     # adaptive: add rounds until every mean is known to ±2 % (95 % CI) ...
    max_repeats: 30     # ... or this many measured rounds
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

Errors are :class:`SpecError` with a one-line message naming the file, the key and what is
allowed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from vhpc import benchmarks

ENV_KINDS = ("native", "vm", "ssh", "vcluster")
ENV_OPTIONS = {
    "native": {"name", "cpus", "nodes", "membind"},
    "vm": {"name", "vcpus", "memory", "pin", "policy", "numa", "backing", "accel", "kernel",
           "boot_timeout", "strict", "guest_bind", "corunner", "corunner_policy",
           "backend", "uri", "domain_xml"},
    "ssh": {"name", "host", "user", "port", "identity", "cpus", "nodes", "membind", "workdir"},
    "vcluster": {"name", "vms", "vcpus", "memory", "policy", "net", "ranks_per_vm", "accel",
                 "kernel", "boot_timeout", "strict"},
}
#: options whose values stay strings (they may contain commas, colons or look numeric)
STRING_OPTIONS = {"pin", "cpus", "name", "kernel", "policy", "nodes", "membind", "guest_bind",
                  "corunner", "corunner_policy", "backend", "uri", "domain_xml", "host", "user",
                  "identity", "workdir"}


class SpecError(ValueError):
    """An invalid campaign specification; the message says where and what to change."""


class BenchSpec(BaseModel):
    """One benchmark with its parameter overrides (validated against the benchmark)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self):
        bench = benchmarks.get(self.name)
        resolved = bench.resolve(self.params)
        self.params = {k: v for k, v in resolved.items() if k in self.params}
        return self

    @property
    def key(self) -> str:
        """Canonical parameter string ``k=v,k=v`` (sorted; only explicit overrides)."""
        return ",".join(f"{k}={self.params[k]}" for k in sorted(self.params))


class EnvSpec(BaseModel):
    """One environment: ``kind`` (native | vm), unique ``name``, kind-specific options."""

    model_config = ConfigDict(extra="forbid")
    kind: str
    name: str
    options: dict[str, Any] = Field(default_factory=dict)

    @field_validator("kind")
    @classmethod
    def _kind(cls, v):
        if v not in ENV_KINDS:
            raise ValueError(f"unknown environment {v!r}: choose one of {', '.join(ENV_KINDS)}")
        return v

    @model_validator(mode="after")
    def _options(self):
        bad = set(self.options) - ENV_OPTIONS[self.kind]
        if bad:
            raise ValueError(f"{self.kind}: unknown option(s) {', '.join(sorted(bad))} "
                             f"(options: {', '.join(sorted(ENV_OPTIONS[self.kind] - {'name'}))})")
        return self


def register_custom(definitions: list[dict[str, Any]]) -> None:
    """Register bring-your-own benchmarks (``custom:`` in a campaign file) so the campaign's
    benchmark list can name them.  Raises ValueError for a bad definition or a name that a
    built-in benchmark already uses."""
    from vhpc.benchmarks.custom import CommandBenchmark, from_mapping

    for d in definitions:
        bench = from_mapping(d)
        known = benchmarks.REGISTRY.get(bench.name)
        if known is not None and not isinstance(known, CommandBenchmark):
            raise ValueError(f"custom benchmark {bench.name!r} clashes with a built-in "
                             "benchmark: choose another name")
        benchmarks.REGISTRY[bench.name] = bench


class CampaignSpec(BaseModel):
    """The whole plan: environments × benchmarks × rounds, and the protocol.  ``custom``
    holds bring-your-own benchmark definitions (vhpc.benchmarks.custom.from_mapping)."""

    model_config = ConfigDict(extra="forbid")
    custom: list[dict[str, Any]] = Field(default_factory=list)
    benchmarks: list[BenchSpec] = Field(min_length=1)
    environments: list[EnvSpec] = Field(min_length=1)
    repeats: int = Field(5, ge=1, le=10000)
    warmup: int = Field(1, ge=0, le=1000)
    baseline: str = "native"
    timeout: float = Field(600.0, gt=0)
    order: str = Field("alternate", pattern="^(alternate|fixed)$")
    protocol: str = Field("warm", pattern="^(warm|cold|cold-warm)$")
    session_trials: int = Field(3, ge=2, le=1000)
    host_knobs: dict[str, str] = Field(default_factory=dict)
    target_ci: float | None = Field(None, gt=0, lt=1)
    max_repeats: int = Field(30, ge=1, le=10000)
    executor: str = "local"  # local | slurm[:partition=P,nodes=N,time=T,account=A]

    @field_validator("executor")
    @classmethod
    def _executor(cls, v):
        from vhpc import executors

        executors.parse(v)
        return v

    @model_validator(mode="before")
    @classmethod
    def _custom_first(cls, data):
        if isinstance(data, dict) and data.get("custom"):
            if not isinstance(data["custom"], list):
                raise ValueError("custom must be a list of benchmark definitions")
            register_custom(data["custom"])
        return data

    @field_validator("host_knobs")
    @classmethod
    def _knobs(cls, v):
        from vhpc.environments.knobs import parse_knob

        return dict(parse_knob(f"{k}={val}") for k, val in v.items())

    @model_validator(mode="after")
    def _check(self):
        names = [e.name for e in self.environments]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"environment name {dup[0]!r} is used twice: give one name=... ")
        if "baseline" not in self.model_fields_set and len(names) == 1:
            self.baseline = names[0]  # a lone environment (e.g. one vcluster) is its own baseline
        if self.baseline not in names:
            raise ValueError(f"baseline {self.baseline!r} is not one of the environments "
                             f"({', '.join(names)})")
        if self.target_ci is not None and self.max_repeats < self.repeats:
            raise ValueError(f"max_repeats={self.max_repeats} is below repeats={self.repeats}: "
                             "raise max_repeats")
        if self.executor.startswith("slurm") and self.host_knobs:
            raise ValueError("host knobs cannot be set on Slurm compute nodes from here: drop "
                             "--host-knob or use --executor local")
        keys = [(b.name, b.key) for b in self.benchmarks]
        if len(set(keys)) != len(keys):
            raise ValueError("the same benchmark with the same parameters is listed twice")
        return self


def _scalar(text: str) -> Any:
    try:
        return yaml.safe_load(text) if text != "" else ""
    except yaml.YAMLError:
        return text


def parse_item(text: str) -> tuple[str, dict[str, Any]]:
    """``"name:k=v,k=v"`` → ("name", {k: v}).  Raises SpecError for a malformed item."""
    name, _, rest = text.partition(":")
    opts: dict[str, Any] = {}
    if rest:
        # values may contain commas (pin=0,1; policy=nodes:0,1;mem=local): a token that does
        # not start with ``identifier=`` continues the previous value
        last = None
        for token in rest.split(","):
            if re.match(r"\s*[A-Za-z_]\w*=", token):
                k, v = token.split("=", 1)
                last = k.strip()
                opts[last] = v.strip()
            elif last is not None:
                opts[last] = f"{opts[last]},{token.strip()}"
            else:
                raise SpecError(f"{text!r}: expected NAME:key=value,... ")
    if not name.strip():
        raise SpecError(f"{text!r}: missing a name before ':'")
    return name.strip(), {k: v if k in STRING_OPTIONS else _scalar(v) for k, v in opts.items()}


def _env(kind: str, opts: dict[str, Any], taken: list[str]) -> dict[str, Any]:
    opts = dict(opts)
    name = str(opts.get("name") or kind)
    if "name" not in opts and name in taken:
        i = 2
        while f"{kind}{i}" in taken:
            i += 1
        name = f"{kind}{i}"
    opts.pop("name", None)
    taken.append(name)
    return {"kind": kind, "name": name, "options": opts}


def _errors(exc: ValidationError, where: str) -> SpecError:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    return SpecError(f"{where}{': ' + loc if loc else ''}: {msg}")


def from_cli(bench_items: list[str], env_items: list[str], host_knobs: list[str] | None = None,
             strict_placement: bool = False, **protocol: Any) -> CampaignSpec:
    """Build a spec from ``-b``/``-e`` strings, ``--host-knob NAME=VALUE`` strings,
    ``--strict-placement`` (sets ``strict=1`` on every VM that does not set it) and protocol
    flags (repeats, warmup, baseline, timeout, order, protocol, session_trials; None values
    are left at their defaults).  Raises SpecError."""
    from vhpc.environments.knobs import KnobError, parse_knob

    taken: list[str] = []
    try:
        if host_knobs:
            protocol["host_knobs"] = dict(parse_knob(k) for k in host_knobs)
        data = {
            "benchmarks": [dict(zip(("name", "params"), parse_item(b))) for b in bench_items],
            "environments": [_env(*parse_item(e), taken) for e in env_items],
            **{k: v for k, v in protocol.items() if v is not None},
        }
        if strict_placement:
            for e in data["environments"]:
                if e["kind"] in ("vm", "vcluster"):
                    e["options"].setdefault("strict", 1)
        return CampaignSpec.model_validate(data)
    except ValidationError as exc:
        raise _errors(exc, "command line") from None
    except (benchmarks.BenchmarkError, KnobError) as exc:
        raise SpecError(f"command line: {exc}") from None


def _entry(item: Any, where: str) -> tuple[str, dict[str, Any]]:
    if isinstance(item, str):
        return parse_item(item)
    if isinstance(item, dict) and len(item) == 1:
        (name, opts), = item.items()
        if opts is None:
            opts = {}
        if not isinstance(opts, dict):
            raise SpecError(f"{where}: options of {name!r} must be a mapping")
        return str(name), dict(opts)
    raise SpecError(f"{where}: expected NAME or {{NAME: {{key: value}}}}, got {item!r}")


def from_file(path: str | Path) -> CampaignSpec:
    """Load and validate a YAML (or JSON) campaign file.  Raises SpecError naming the file."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict):
        raise SpecError(f"{path}: expected a mapping with benchmarks: and environments:")
    doc = dict(doc)
    taken: list[str] = []
    try:
        benches = doc.pop("benchmarks", None)
        envs = doc.pop("environments", ["native", "vm"])
        if not isinstance(benches, list) or not isinstance(envs, list):
            raise SpecError(f"{path}: benchmarks and environments must be lists")
        data = {
            "benchmarks": [dict(zip(("name", "params"), _entry(b, f"{path}: benchmarks[{i}]")))
                           for i, b in enumerate(benches)],
            "environments": [_env(*_entry(e, f"{path}: environments[{i}]"), taken)
                             for i, e in enumerate(envs)],
            **doc,
        }
        return CampaignSpec.model_validate(data)
    except ValidationError as exc:
        raise _errors(exc, str(path)) from None
    except benchmarks.BenchmarkError as exc:
        raise SpecError(f"{path}: {exc}") from None
