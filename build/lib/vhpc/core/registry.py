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
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable, Generic, Iterator, TypeVar

from vhpc.core.errors import SpecError

T = TypeVar("T")


class UnknownName(SpecError):
    """A name no part registered; the message lists the known names."""


class DuplicateName(RuntimeError):
    """Two parts registered under one name: a programming error, raised at import."""


class Registry(Generic[T]):
    """Parts of one sort by name.  ``what`` names the sort in messages ("executor");
    ``package``: dotted package whose modules are imported (once) before the first lookup,
    so that every part in it has registered."""

    def __init__(self, what: str, package: str | None = None):
        self.what = what
        self.package = package
        self._parts: dict[str, T] = {}
        self._loaded = package is None

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
        pkg = importlib.import_module(self.package)
        for info in pkgutil.iter_modules(pkg.__path__, self.package + "."):
            importlib.import_module(info.name)

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

    def items(self) -> Iterator[tuple[str, T]]:
        """(name, part) pairs in registration order."""
        self._load()
        return iter(list(self._parts.items()))
