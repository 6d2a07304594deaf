"""The policy grammar: ``POLICY[;mem=MEM][;pin=pu|node]`` → :class:`Policy` (see the package docstring)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from vhpc.core.cpulist import format_cpu_list as format_list
from vhpc.core.cpulist import parse_cpu_list
from vhpc.placement.model import PlacementError

_KINDS = ("float", "compact", "spread", "span", "packages", "confine", "nodes", "map")
_MEM_MODES = ("auto", "bind", "interleave", "preferred", "local")

@dataclass(frozen=True)
class Policy:
    """A parsed policy string (see the module docstring for the grammar).

    name: one of ``float compact spread span packages confine nodes map``; count: K of
    ``span:K``; targets: packages (``packages``) or nodes (``confine``, ``nodes``);
    vcpu_map: for ``map``, entries ``(vcpus, pus, node)`` where either pus (tuple of PU OS
    indexes) or node (an int, ``nN``) is set; mem: ``auto bind interleave preferred local``;
    mem_nodes: explicit host nodes for memory (empty = derived from vCPUs); pin: ``pu``/``node``.
    """

    name: str
    text: str
    count: int | None = None
    targets: tuple[int, ...] = ()
    vcpu_map: tuple[tuple[tuple[int, ...], tuple[int, ...], int | None], ...] = ()
    mem: str = "auto"
    mem_nodes: tuple[int, ...] = ()
    pin: str = "pu"

    @property
    def pinned(self) -> bool:
        """True unless the policy is ``float``."""
        return self.name != "float"


def _plist(text: str, what: str, policy: str) -> tuple[int, ...]:
    try:
        return parse_cpu_list(text)
    except ValueError:
        raise PlacementError(f"policy {policy!r}: bad {what} list {text!r}: write numbers and ranges like 0-3,8") from None


def parse_policy(text: str) -> Policy:
    """Parse a policy string such as ``"span:2"``, ``"nodes:0,1;mem=local"`` or
    ``"map:0-3=0-3;mem=1"`` into a :class:`Policy`. Raises PlacementError."""
    raw = " ".join(str(text).split())
    from vhpc.core.cpulist import foreign_digit
    if foreign_digit(raw):
        raise PlacementError(f"policy {raw!r}: {foreign_digit(raw)!r} is not an ASCII digit: "
                             "write numbers with 0-9")
    if not raw:
        raise PlacementError(f"empty policy: use one of {', '.join(_KINDS)}")
    parts = [p.strip() for p in raw.split(";")]
    head, mods = parts[0], parts[1:]
    kind, _, arg = head.partition(":")
    kind = kind.strip().lower()
    arg = arg.strip()
    if kind not in _KINDS:
        raise PlacementError(f"unknown policy {kind!r} in {raw!r}: use one of {', '.join(_KINDS)}")
    count = None
    targets: tuple[int, ...] = ()
    vmap: list[tuple[tuple[int, ...], tuple[int, ...], int | None]] = []
    if kind in ("float", "compact", "spread"):
        if arg:
            raise PlacementError(f"policy {kind!r} takes no argument (got {arg!r}): write just {kind}")
    elif kind == "span":
        if not arg.isdigit() or int(arg) < 1:
            raise PlacementError(f"policy {raw!r}: span needs a socket count, e.g. span:2")
        count = int(arg)
    elif kind == "confine":
        if not arg.isdigit():
            raise PlacementError(f"policy {raw!r}: confine needs one NUMA node, e.g. confine:0")
        targets = (int(arg),)
    elif kind in ("nodes", "packages"):
        if not arg:
            raise PlacementError(f"policy {raw!r}: {kind} needs a list, e.g. {kind}:0,1")
        items = [a.strip() for a in arg.split(",")]
        seen: list[int] = []
        for it in items:
            for v in _plist(it, kind, raw):
                if v in seen:
                    raise PlacementError(f"policy {raw!r}: {kind[:-1]} {v} is listed twice: list each once")
                seen.append(v)
        targets = tuple(seen)
    elif kind == "map":
        vmap = _parse_map(arg, raw)  # type: ignore[assignment]

    mem, mem_nodes, pin = "auto", (), "pu"
    for mod in mods:
        key, eq, val = mod.partition("=")
        key, val = key.strip().lower(), val.strip().lower()
        if not eq or not val:
            raise PlacementError(f"policy {raw!r}: modifier {mod!r} must be mem=... or pin=...")
        if key == "pin":
            if val not in ("pu", "node"):
                raise PlacementError(f"policy {raw!r}: pin must be pu or node")
            pin = val
        elif key == "mem":
            mode, _, lst = val.partition(":")
            if mode in _MEM_MODES and not lst:
                mem = mode
            elif mode in ("bind", "interleave", "preferred") and lst:
                mem, mem_nodes = mode, _ordered_list(lst, raw)
            elif re.fullmatch(r"[\d,\- ]+", val):
                mem, mem_nodes = "bind", _ordered_list(val, raw)
            else:
                raise PlacementError(
                    f"policy {raw!r}: mem must be auto, bind, interleave, preferred, local or a node list like mem=1")
        else:
            raise PlacementError(f"policy {raw!r}: unknown modifier {key!r}: use mem= or pin=")
    if kind == "float" and pin != "pu":
        raise PlacementError(f"policy {raw!r}: float is unpinned, pin= does not apply: drop it")
    return Policy(name=kind, text=raw, count=count, targets=targets, vcpu_map=tuple(vmap), mem=mem,
                  mem_nodes=mem_nodes, pin=pin)


def _parse_map(arg: str, raw: str) -> list[tuple[tuple[int, ...], tuple[int, ...], int | None]]:
    """``map:`` argument ``V=P,...`` → entries ``(vcpus, pus, node)`` (see :class:`Policy`)."""
    vmap: list = []
    if not arg:
        raise PlacementError(f"policy {raw!r}: map needs vCPU=PU pairs, e.g. map:0-3=0-3")
    cur: list | None = None
    for tok in arg.split(","):
        tok = tok.strip()
        if "=" in tok:
            left, right = (x.strip() for x in tok.split("=", 1))
            if not re.fullmatch(r"\d+(-\d+)?", left):
                raise PlacementError(f"policy {raw!r}: left side {left!r} must be a vCPU or range a-b")
            cur = [_plist(left, "vCPU", raw), [], None]
            vmap.append(cur)  # type: ignore[arg-type]
            tok = right
        if cur is None:
            raise PlacementError(f"policy {raw!r}: start with a vCPU=PU pair, e.g. map:0-3=0-3")
        m = re.fullmatch(r"n(\d+)", tok)
        if m:
            if cur[1] or cur[2] is not None:
                raise PlacementError(f"policy {raw!r}: give either PUs or one node nN per vCPU range")
            cur[2] = int(m.group(1))
        else:
            if cur[2] is not None:
                raise PlacementError(f"policy {raw!r}: give either PUs or one node nN per vCPU range")
            cur[1].extend(_plist(tok, "PU", raw))
    vmap_t = []
    for v, p, n in vmap:
        if not p and n is None:
            raise PlacementError(f"policy {raw!r}: vCPUs {format_list(v)} have no PU after '='")
        vmap_t.append((tuple(v), tuple(p), n))
    return vmap_t


def _ordered_list(text: str, raw: str) -> tuple[int, ...]:
    """A node list keeping the order given (``1,0`` maps guest node 0 → host 1)."""
    out: list[int] = []
    for item in text.split(","):
        for v in _plist(item.strip(), "memory node", raw):
            if v in out:
                raise PlacementError(f"policy {raw!r}: memory node {v} is listed twice: list each once")
            out.append(v)
    return tuple(out)
