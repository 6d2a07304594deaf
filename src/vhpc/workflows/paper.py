"""A seed paper's evaluation at once (``vhpc paper SEED``): every study of the seed, in the
paper's figure order, run as campaigns (or taken from the store with ``--from-store``) and
presented on one page with the figures and the paper-found / this-host lines.

:func:`plan` builds each study's spec on this host (a study the host cannot make is kept with
its reason), :func:`estimate_s` guesses how long its trials take (from this store's past trials
of the same benchmark and environment kind when there are some, else a rule of thumb), and
:func:`page` writes ``OUT/paper-SEED/index.html`` from the stored campaigns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhpc.core.errors import VhpcError

#: rule-of-thumb seconds when the store has no past trial: per trial, per VM session start
TRIAL_S = {"native": 5.0, "vm": 10.0, "vcluster": 20.0, "ssh": 10.0}
BOOT_S = {"kvm": 15.0, "tcg": 60.0}
TCG_FACTOR = 10.0


@dataclass
class Item:
    """One study of the seed: its spec (None when this host cannot make it, ``reason`` then)."""

    name: str
    number: str
    spec: Any = None
    reason: str | None = None
    note: str | None = None
    trials: list = field(default_factory=list)


def plan(seed: str, topology, overrides: dict[str, list[str]], **protocol: Any) -> list[Item]:
    """The seed's studies on ``topology``; ``overrides``: study → ``-b`` items."""
    from vhpc.campaign import execute as campaign, studies

    items = []
    found = studies.of_seed(seed)
    if not found:
        seeds = sorted({s.seed for _, s in studies.STUDIES.items() if s.seed})
        raise studies.StudyError(f"no study reproduces seed {seed!r}: choose one of {', '.join(seeds)}")
    for s in found:
        item = Item(s.name, s.figure.number, note=studies.note(s.name, topology))
        try:
            item.spec = studies.build(s.name, topology, overrides.get(s.name, []), **dict(protocol))
            item.trials = campaign.plan(item.spec)
        except VhpcError as exc:
            item.reason = " ".join(str(exc).split())
        items.append(item)
    return items


def _past_seconds(store) -> dict[tuple[str, str], float]:
    """Mean stored duration per (benchmark, environment kind-ish name) of finished trials."""
    out: dict[tuple[str, str], list[float]] = {}
    if store is None:
        return {}
    try:
        rows = store.db.execute("SELECT benchmark, environment, started, ended FROM trials "
                                "WHERE status='done' AND started IS NOT NULL AND ended IS NOT NULL "
                                "ORDER BY id DESC LIMIT 5000").fetchall()
    except Exception:  # an old or foreign store: rule of thumb only
        return {}
    for r in rows:
        out.setdefault((r["benchmark"], r["environment"]), []).append(r["ended"] - r["started"])
    return {k: sum(v) / len(v) for k, v in out.items()}


def accelerator() -> tuple[str, str]:
    """(``"kvm"`` or ``"tcg"``, why) for the guests a run would boot here: the KVM probe's
    answer (:func:`vhpc.environments.vm.backends.qemu.probe_kvm`, cached per host boot), not
    whether ``/dev/kvm`` exists — a host can offer /dev/kvm and still fall back to TCG."""
    from vhpc.environments.vm import guestimage
    from vhpc.environments.vm.backends import qemu
    from vhpc.host.facts import qemu_version

    if qemu_version() is None:
        return "tcg", "QEMU is not installed: no guest can run (apt-get install qemu-system-x86)"
    try:
        kernel = guestimage.find_kernel()
    except guestimage.GuestImageError as exc:
        return "tcg", f"not probed: {exc}"
    probe = qemu.probe_kvm(kernel)
    return probe.accel, probe.reason


def estimate_s(item: Item, accel: str, store=None) -> float:
    """Seconds the item's trials may take on this host (past trials, else rule of thumb)."""
    if item.spec is None:
        return 0.0
    past = _past_seconds(store)
    total = 0.0
    for t in item.trials:
        kind = item.spec.environment(t.environment).kind
        s = past.get((t.benchmark, t.environment))
        if s is None:
            s = TRIAL_S.get(kind, 10.0) * (TCG_FACTOR if kind != "native" and accel == "tcg" else 1)
        total += s
        if t.fresh and kind in ("vm", "vcluster"):
            total += BOOT_S.get(accel, 60.0)
    return total


def latest_campaigns(store) -> dict[str, str]:
    """Study name → id of its newest stored campaign with at least one finished trial."""
    from vhpc.report.paper import study_of

    out: dict[str, str] = {}
    for row in store.campaigns():  # newest first
        name = study_of({"command": row["command"]})
        if name and name not in out and (row["done"] or 0) > 0:
            out[name] = row["id"]
    return out


def entry(store, cid: str, out: Path, name: str, note: str | None = None) -> dict[str, Any]:
    """One study's entry on the seed page from stored campaign ``cid``: figure + lines, and
    its full report written into ``out/cid/``."""
    from vhpc import analysis
    from vhpc.report import console as views
    from vhpc.report.paper import study_block

    camp = store.campaign(cid)
    envs = store.environments(cid)
    result = analysis.analyse(store.observations(cid), envs, camp["spec"]["baseline"])
    trials = store.trials(cid)
    html = views.campaign_report(store, cid, out, None, quiet=True)
    block = study_block(name, result, trials, prefix=f"{name}-", note=note,
                        png=f"../{cid}/figure.png")[0]
    return {"cid": cid, "block": block, "report": f"../{cid}/{Path(html).name}",
            "status": camp["status"], "emulated": bool(result.emulated())}


def page(seed: str, items: list[Item], store, out: str | Path) -> Path:
    """Write ``out/paper-SEED/index.html``: every item from its newest stored campaign."""
    from vhpc.report.paper import write_seed_page

    out = Path(out)
    have = latest_campaigns(store)
    entries = []
    for it in items:
        e = {"name": it.name, "number": it.number, "cid": None, "block": None,
             "status": it.reason and f"placement not makeable on this host: {it.reason}" or "no stored campaign"}
        if it.name in have:
            e.update(entry(store, have[it.name], out, it.name, it.note))
        entries.append(e)
    return write_seed_page(seed, entries, out / f"paper-{seed}" / "index.html")
