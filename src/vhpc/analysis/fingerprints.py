"""What differs between the fingerprints of two campaigns (``vhpc diff``, docs/diff.md): host
kernel, QEMU, libvirt, microcode, BIOS, settings, topology, vhpc version and build flags, the
environments' options and the protocol, ordered so the likely cause of a change in overhead
comes first."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from vhpc.analysis.diff import CampaignData


@dataclass(frozen=True)
class FingerprintChange:
    """One fingerprint field that differs: ``scope`` ``campaign`` (protocol), ``all
    environments`` (the same change in each) or an environment name; ``key`` dotted
    (``host_kernel``, ``knobs.thp``, ``option.slowdown``); ``a``/``b`` as text, None when not
    recorded on that side (an older vhpc, or an environment only in one campaign)."""

    scope: str
    key: str
    a: str | None
    b: str | None



#: fields shown first, in this order (the likely causes of a change in overhead)
KEY_ORDER = ("host_kernel", "qemu_version", "libvirt_version", "microcode", "bios.", "cpu_model",
             "knobs.governor", "knobs.thp", "knobs.hugepages", "topology", "host_cpus",
             "vhpc_version", "kernel_build", "accel", "guest_kernel", "option.", "campaign.")
#: fields that change from run to run without meaning anything (free hugepages, probe text)
VOLATILE = re.compile(r"(^|\.)(free|accel_reason)$")


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True)


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested dicts → dotted keys; lists and scalars as JSON text (strings bare); None kept
    out (a field that was not readable is the same as one not recorded)."""
    out: dict[str, str] = {}
    for k, v in mapping.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif v is not None and not VOLATILE.search(key):
            out[key] = _text(v)
    return out


def _env_facts(c: CampaignData, env: str) -> dict[str, str]:
    info = c.environments.get(env)
    facts = flatten(info.fingerprint) if info else {}
    if info and info.accel:
        facts["accel"] = info.accel
    facts.update(flatten({k: v for k, v in c.options(env).items() if v not in (None, False)},
                         "option."))
    return facts


def _campaign_facts(c: CampaignData) -> dict[str, str]:
    skip = {"benchmarks", "environments", "custom"}
    return flatten({k: v for k, v in c.spec.items() if k not in skip}, "campaign.")


def _rank(key: str) -> tuple[int, str]:
    for i, prefix in enumerate(KEY_ORDER):
        if key == prefix or (prefix.endswith(".") and key.startswith(prefix)) \
                or key.startswith(prefix + "."):
            return (i, key)
    return (len(KEY_ORDER), key)


def fingerprint_changes(campaign_a: CampaignData, campaign_b: CampaignData) -> list[FingerprintChange]:
    """Fields that differ between A and B: protocol (scope ``campaign``), then per
    environment present in both; a change identical in every such environment is one row
    with scope ``all environments``.  Ordered by :data:`KEY_ORDER`."""
    out: list[FingerprintChange] = []
    facts_a, facts_b = _campaign_facts(campaign_a), _campaign_facts(campaign_b)
    for key in sorted(set(facts_a) | set(facts_b), key=_rank):
        if facts_a.get(key) != facts_b.get(key):
            out.append(FingerprintChange("campaign", key, facts_a.get(key), facts_b.get(key)))
    envs = [e for e in campaign_a.environments if e in campaign_b.environments]
    facts = {e: (_env_facts(campaign_a, e), _env_facts(campaign_b, e)) for e in envs}
    keys = sorted({k for fa, fb in facts.values() for k in (*fa, *fb)}, key=_rank)
    env_rows: list[FingerprintChange] = []
    for key in keys:
        pairs = {e: (fa.get(key), fb.get(key)) for e, (fa, fb) in facts.items()}
        changed = {e: p for e, p in pairs.items() if p[0] != p[1]}
        if not changed:
            continue
        if len(envs) > 1 and len(changed) == len(envs) and len(set(changed.values())) == 1:
            va, vb = next(iter(changed.values()))
            env_rows.append(FingerprintChange("all environments", key, va, vb))
        else:
            env_rows.extend(FingerprintChange(e, key, va, vb) for e, (va, vb) in changed.items())
    return out + sorted(env_rows, key=lambda r: _rank(r.key))
