"""Reading campaign files safely: bounded size, bounded nesting, strict UTF-8.

A campaign file is read with at most :data:`MAX_BYTES` bytes (``vhpc run /dev/zero`` stops at
the limit instead of filling memory), decoded as UTF-8 (a binary file is an error, not a
``UnicodeDecodeError``), and scanned with PyYAML's event parser (iterative) before it is
composed, so nesting deeper than :data:`MAX_DEPTH` levels, more than :data:`MAX_NODES` nodes or
:data:`MAX_ALIASES` aliases (exponential "billion laughs" documents) are refused in one line
(PyYAML's composer is recursive and would otherwise end in ``RecursionError``).  An alias that
refers to a node still open around it (``a: &a [*a]``) would compose a cyclic document that no
walk ends: it is refused there too.

The parsed document is then walked once (:func:`check_values`): a mapping key that is not text
(``1:``, ``null:``, ``yes:``), a NUL byte in any text (it cannot reach a command line or an
environment variable) and an integer beyond :data:`MAX_INT` are refused in one line naming
where, before anything else reads the document.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from vhpc.core.errors import SpecError

#: Largest campaign file read (bytes): real ones are a few KiB.
MAX_BYTES = 1 << 20
#: Deepest nesting of mappings/sequences: a campaign file needs 4.
MAX_DEPTH = 32
#: Most YAML nodes (scalars, mappings, sequences) in one document.
MAX_NODES = 100_000
#: Most aliases (``*name``) in one document.
MAX_ALIASES = 100
#: Largest integer magnitude a campaign file may hold (every real option is far below).
MAX_INT = 2 ** 63 - 1


def read_text(path: str | Path, limit: int = MAX_BYTES) -> str:
    """The file's text, at most ``limit`` bytes, UTF-8 (core.paths.read_small_text).  Raises
    SpecError naming the file."""
    from vhpc.core.paths import read_small_text

    try:
        return read_small_text(path, limit, str(path), "give a YAML campaign file (a short "
                               "document; check the path)", regular_only=False)
    except ValueError as exc:
        raise SpecError(str(exc)) from None


def check_structure(text: str, where: str) -> None:
    """Refuse documents nested deeper than MAX_DEPTH, or with too many nodes or aliases,
    before they are composed.  Raises SpecError (also for YAML syntax errors)."""
    depth = nodes = aliases = 0
    # anchors: the latest node of each name (an anchor may be redefined) and which are open
    latest: dict[str, int] = {}
    open_nodes: list[int | None] = []
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise SpecError(f"{where}: nested deeper than {MAX_DEPTH} levels: a "
                                    "campaign file needs a few")
                if event.anchor is not None:
                    latest[event.anchor] = nodes
                    open_nodes.append(nodes)
                else:
                    open_nodes.append(None)
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
                if open_nodes:
                    open_nodes.pop()
            elif isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_ALIASES:
                    raise SpecError(f"{where}: more than {MAX_ALIASES} YAML aliases: write the "
                                    "values out")
                target = latest.get(event.anchor)
                if target is not None and target in open_nodes:
                    raise SpecError(f"{where}: YAML alias *{event.anchor} refers to a node that "
                                    "contains it (a cycle): write the value out")
            elif isinstance(event, yaml.ScalarEvent) and event.anchor is not None:
                latest[event.anchor] = -1 - nodes  # closed at once: never an open container
            if isinstance(event, yaml.NodeEvent):
                nodes += 1
                if nodes > MAX_NODES:
                    raise SpecError(f"{where}: more than {MAX_NODES} YAML nodes: a campaign "
                                    "file is short")
    except yaml.YAMLError as exc:
        raise SpecError(f"{where}: not valid YAML: {str(exc).splitlines()[0]}") from None


def expanded_size(doc: Any) -> int:
    """How many values ``doc`` holds once its aliases are written out (a container shared
    through aliases counts every time it appears).  Iterative and linear in the distinct
    containers; ``doc`` must be acyclic (:func:`check_structure` refuses cycles)."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(doc, False)]
    while stack:
        node, done = stack.pop()
        if not isinstance(node, (dict, list)) or (id(node) in sizes and not done):
            continue
        children = list(node.values()) if isinstance(node, dict) else node
        if done:
            sizes[id(node)] = 1 + sum(sizes.get(id(c), 1) if isinstance(c, (dict, list))
                                      else 1 for c in children)
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in children if isinstance(c, (dict, list)))
    return sizes.get(id(doc), 1)


def check_values(doc: Any, where: str) -> None:
    """Refuse, in one line naming ``where`` and the path inside the document, a mapping key
    that is not a string, a string holding a NUL byte, or an integer beyond :data:`MAX_INT`
    (raises SpecError).  Iterative (the document is already bounded by
    :func:`check_structure`)."""
    stack: list[tuple[Any, str]] = [(doc, "")]
    seen: set[int] = set()  # a container shared through aliases is checked once
    while stack:
        node, at = stack.pop()
        here = at or "top level"
        if isinstance(node, (dict, list)):
            if id(node) in seen:
                continue
            seen.add(id(node))
        if isinstance(node, dict):
            for k, v in node.items():
                if not isinstance(k, str):
                    raise SpecError(f"{where}: key {k!r} ({here}) is not text: quote it or use "
                                    "a name")
                if "\x00" in k:
                    raise SpecError(f"{where}: key {k!r} ({here}) holds a NUL byte: remove it")
                stack.append((v, f"{at}.{k}" if at else k))
        elif isinstance(node, list):
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(node))
        elif isinstance(node, str):
            if "\x00" in node:
                raise SpecError(f"{where}: {here}: text holds a NUL byte (it cannot be part of a "
                                "command or an environment variable): remove it")
        elif isinstance(node, int) and not isinstance(node, bool) and abs(node) > MAX_INT:
            raise SpecError(f"{where}: {here}: {str(node)[:24]}... is out of range (at most "
                            f"{MAX_INT})")


def read_document(path: str | Path) -> Any:
    """Read, check and parse a YAML/JSON campaign file (:func:`check_values` on the result).
    Raises SpecError naming the file."""
    text = read_text(path)
    check_structure(text, str(path))
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    except (ValueError, OverflowError, RecursionError) as exc:  # e.g. a timestamp out of range
        raise SpecError(f"{path}: cannot read a value: {str(exc)[:120]}") from None
    if expanded_size(doc) > MAX_NODES:  # aliases of aliases ("billion laughs")
        raise SpecError(f"{path}: more than {MAX_NODES} values once its YAML aliases are "
                        "written out: write the values out")
    check_values(doc, str(path))
    return doc
