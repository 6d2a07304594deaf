"""Named, registered parts: environment kinds, hypervisor backends, executors, studies.

A :class:`Registry` maps a name to a class (or function) that registers itself with a
decorator, as ReFrame registers its schedulers and launchers (``reframe/core/backends.py``):

    KINDS = Registry("environment kind")

    @KINDS.register("native")
    class NativeKind(EnvironmentKind): ...

A second registration of a name is an error (:class:`DuplicateName`), and looking up an unknown
name raises :class:`UnknownName`, a one-line :class:`~vhpc.core.errors.SpecError` listing the
known names.  With ``package`` set, the first lookup imports every module of that package, so a
new part is one new module and nothing dispatches on names elsewhere.

Parts from outside the package: a distribution names its modules in the entry-point group
``vhpc.parts`` (:data:`PLUGIN_GROUP`), and the first lookup in any registry imports them all
(:func:`load_plugins`), so their decorators register them beside vhpc's own (docs/plugins.md).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Callable, Generic, Iterator, TypeVar

from vhpc.core.errors import HostError, SpecError

T = TypeVar("T")


class UnknownName(SpecError):
    """A name no part registered; the message lists the known names."""


class DuplicateName(RuntimeError):
    """Two parts registered under one name: a programming error, raised at import."""


#: The entry-point group whose modules add parts (kinds, backends, executors, benchmarks, ...).
PLUGIN_GROUP = "vhpc.parts"

_plugins: list[str] | None = None


def load_plugins() -> list[str]:
    """Import every module named in the entry-point group :data:`PLUGIN_GROUP` of the installed
    distributions (once per process; their decorators register their parts), and return the
    entry points' names.  Raises HostError naming the entry point when one fails to import:
    an installed package is broken, not vhpc."""
    global _plugins
    if _plugins is not None:
        return _plugins
    _plugins = []
    for ep in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        try:
            ep.load()
        except Exception as exc:  # any error of foreign code, said in one line
            raise HostError(f"the {PLUGIN_GROUP} entry point {ep.name} ({ep.value}) failed to "
                            f"load: {type(exc).__name__}: {exc}; fix or uninstall the package "
                            "that provides it") from exc
        _plugins.append(ep.name)
    return _plugins


class _View(Mapping):
    """A registry as a read-only mapping name → part, loaded on first use (for callers that
    read parts as a dict: ``view.get(name)`` is None for an unknown name)."""

    def __init__(self, registry: "Registry"):
        self._registry = registry

    def __getitem__(self, name):
        self._registry._load()
        return self._registry._parts[name]

    def __iter__(self):
        return iter(self._registry.names())

    def __len__(self) -> int:
        return len(self._registry.names())


class Registry(Generic[T]):
    """Parts of one sort by name.  ``what`` names the sort in messages ("executor");
    ``package``: dotted package whose modules are imported (once) before the first lookup,
    so that every part in it has registered."""

    def __init__(self, what: str, package: str | None = None):
        self.what = what
        self.package = package
        self._parts: dict[str, T] = {}
        self._loaded = False

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator registering its class or function under ``name``; sets ``.name`` on a
        class that has no name yet.  Raises DuplicateName when ``name`` is taken."""
        if not name or not isinstance(name, str):
            raise ValueError(f"{self.what}: a registered name must be a non-empty string")

        def add(part: T) -> T:
            if name in self._parts:
                raise DuplicateName(f"{self.what} {name!r} is registered twice "
                                    f"({self._parts[name]!r} and {part!r})")
            if isinstance(part, type) and not getattr(part, "name", None):
                part.name = name  # type: ignore[attr-defined]
            self._parts[name] = part
            return part

        return add

    def unregister(self, name: str) -> None:
        """Remove ``name`` (for tests that register a temporary part)."""
        self._parts.pop(name, None)

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        if self.package is not None:
            pkg = importlib.import_module(self.package)
            for info in pkgutil.iter_modules(pkg.__path__, self.package + "."):
                importlib.import_module(info.name)
        load_plugins()

    def get(self, name: str) -> T:
        """The part called ``name``.  Raises UnknownName listing the known names."""
        self._load()
        try:
            return self._parts[name]
        except (KeyError, TypeError):
            raise UnknownName(f"unknown {self.what} {name!r}: choose one of "
                              f"{', '.join(self.names())}") from None

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._parts

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def names(self) -> list[str]:
        """Registered names in registration order."""
        self._load()
        return list(self._parts)

    def view(self) -> Mapping[str, T]:
        """This registry as a read-only mapping name → part (live: later registrations show)."""
        return _View(self)

    def items(self) -> Iterator[tuple[str, T]]:
        """(name, part) pairs in registration order."""
        self._load()
        return iter(list(self._parts.items()))
