"""Named, registered parts: environment kinds, hypervisor backends, executors, studies.

A :class:`Registry` maps a name to a class (or function) that registers itself with a
decorator, as ReFrame registers its schedulers and launchers (``reframe/core/backends.py``):

    KINDS = Registry("environment kind")

    @KINDS.register("container")
    class ContainerKind(EnvironmentKind): ...

A second registration of a name is an error (:class:`DuplicateName`), and looking up an unknown
name raises :class:`UnknownName`, a one-line :class:`~vhpc.core.errors.SpecError` listing the
known names.  A part may also be asked for by what it provides instead of its name
(:meth:`Registry.providing`: "the kind that builds images"), so that no room outside a part's
own names it.  With ``package`` set, the first lookup imports every module of that package (and,
with ``recursive``, of its sub-packages), so a new part is one new module and nothing dispatches
on names elsewhere.  Where the order of the parts shows to users, the registry sorts them by a
``key`` each part declares (a study's seed figure, a benchmark's suite), never by a list kept
elsewhere nor by whichever module happened to be imported first.

Parts from outside the package: a distribution names its modules in the entry-point group
``vhpc.parts`` (:data:`PLUGIN_GROUP`), and the first lookup in any registry imports them all
(:func:`load_plugins`), so their decorators register them beside vhpc's own (docs/plugins.md).
Plugins are guests: one never replaces a part of vhpc's own (whatever the import order), and
one that fails to load in any way is skipped with one line naming it.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Callable, Generic, Iterator, TypeVar

from vhpc.core.errors import SpecError

T = TypeVar("T")


class UnknownName(SpecError):
    """A name no part registered; the message lists the known names."""


class NoProvider(SpecError):
    """No registered part provides a capability that was asked for; the message names it."""


class DuplicateName(RuntimeError):
    """Two parts registered under one name: a programming error, raised at import."""


#: The entry-point group whose modules add parts (kinds, backends, executors, benchmarks, ...).
PLUGIN_GROUP = "vhpc.parts"

#: Seconds a plugin may take to import before a line names it (it goes on loading).
SLOW_PLUGIN_S = 1.0

_plugins: list[str] | None = None
#: The plugin being imported now (its label, :func:`_label`), or None.
_loading: str | None = None
#: One line per plugin that could not load (it is skipped), and one per part a plugin
#: registered under a name that a part of vhpc (or an earlier plugin) holds.
_failures: list[str] = []
_clashes: list[str] = []
#: Every registry, so that a plugin that fails to load leaves no part of its own behind.
_registries: list["Registry"] = []


def _label(name: str, value: str) -> str:
    return f"the {PLUGIN_GROUP} entry point {name} ({value})"


def _plugin_entry_points() -> list[tuple[str, str, object]]:
    """(name, value, entry point or None) of every entry point in :data:`PLUGIN_GROUP`, sorted
    by name.  A distribution whose metadata cannot be read (not UTF-8, unreadable) adds one
    line to :data:`_failures` naming it (when its raw entry_points.txt names the group), and its
    entry points are skipped."""
    from importlib.metadata import EntryPoint, distributions

    found = []
    for dist in distributions():
        try:
            eps = [ep for ep in dist.entry_points if ep.group == PLUGIN_GROUP]
        except Exception as exc:  # noqa: BLE001 - any fault of foreign metadata, said in one line
            where = getattr(dist, "_path", None)
            try:  # a package whose entry points name no vhpc plugin is not vhpc's to judge
                if PLUGIN_GROUP.encode() not in Path(where, "entry_points.txt").read_bytes():
                    continue
            except (OSError, TypeError):
                pass
            _failures.append(f"the entry points of {where} cannot be read ({type(exc).__name__}: "
                             f"{exc}); fix or uninstall that package")
            continue
        for ep in eps:
            found.append((ep.name, ep.value, ep if isinstance(ep, EntryPoint) else None))
    return sorted(found, key=lambda f: (f[0], f[1]))


def load_plugins() -> list[str]:
    """Import every module named in the entry-point group :data:`PLUGIN_GROUP` of the installed
    distributions (once per process; their decorators register their parts), and return the
    names of those that loaded.

    Plugins are guests: whatever a plugin's import raises or calls (an exception,
    ``SystemExit``, ``KeyboardInterrupt``), metadata that cannot be read and an entry point
    value that is no ``module[:attr]`` never escape.  Each adds one line to
    :func:`plugin_failures` naming the plugin, and the plugin is skipped (the parts it had
    registered are removed).  A plugin still importing after :data:`SLOW_PLUGIN_S` seconds is
    named on stderr at once (every command waits for it).  Raises nothing."""
    global _plugins, _loading
    if _plugins is not None:
        return _plugins
    _plugins = []
    for name, value, ep in _plugin_entry_points():
        label = _label(name, value)
        if ep is None or ep.pattern.fullmatch(value) is None:
            _failures.append(f"{label} is not a module name (module or module:attribute); fix "
                             "or uninstall the package that provides it")
            continue
        slow = threading.Timer(SLOW_PLUGIN_S, _say_slow, (label,))
        slow.daemon = True
        _loading = label
        slow.start()
        try:
            ep.load()
        except BaseException as exc:  # noqa: BLE001 - SystemExit and ^C at import included: a guest's fault
            why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            _failures.append(f"{label} failed to load: {why}; fix or uninstall the package "
                             "that provides it")
            for registry in _registries:
                registry._evict(label)
            continue
        finally:
            slow.cancel()
            _loading = None
        _plugins.append(name)
    return _plugins


def _say_slow(label: str) -> None:
    sys.stderr.write(f"vhpc: {label} has been importing for over {SLOW_PLUGIN_S:g} s: every "
                     "vhpc command waits for it\n")
    sys.stderr.flush()


def plugin_failures() -> list[str]:
    """One line per plugin that failed to load and is skipped (after :func:`load_plugins`)."""
    return list(_failures)


def plugin_clashes() -> list[str]:
    """One line per part a plugin registered under a name already taken: the part first
    registered (vhpc's own, whatever the import order) stays, the plugin's is skipped."""
    return list(_clashes)


def load_all() -> None:
    """Load every registry made so far (their packages, then the plugins), so that a plugin's
    clash with a part of vhpc shows before a command starts, whatever it looks up first."""
    for registry in list(_registries):
        registry._load()


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
    so that every part in it has registered; ``recursive``: its sub-packages' modules too;
    ``key``: the order of :meth:`names` and :meth:`items`, a function of a part (ties keep the
    registration order; None: registration order)."""

    def __init__(self, what: str, package: str | None = None, recursive: bool = False,
                 key: Callable[[T], object] | None = None):
        self.what = what
        self.package = package
        self.recursive = recursive
        self.key = key
        self._parts: dict[str, T] = {}
        self._guests: dict[str, str] = {}  # name → the plugin that registered it
        self._origins: dict[str, str] = {}  # name → the module that registered it
        self._loaded = False
        _registries.append(self)

    def register(self, name: str, caller: str | None = None) -> Callable[[T], T]:
        """Decorator registering its class or function under ``name``; sets ``.name`` on a
        class that has no name yet.  Raises DuplicateName when ``name`` is taken, except while a
        plugin loads (:func:`load_plugins`): a plugin never replaces a part of vhpc's own.
        Its part under a taken name is skipped with a line in :func:`plugin_clashes`, and a
        part of vhpc registered after a plugin took its name takes it back.  ``caller``: the
        module registering it (default: the one calling this), for a helper of vhpc's that
        registers on its caller's behalf, so a plugin's part stays a guest.  Raises ValueError
        when ``name`` is empty or not a string."""
        if not name or not isinstance(name, str):
            raise ValueError(f"{self.what}: a registered name must be a non-empty string")
        if caller is None:
            caller = sys._getframe(1).f_globals.get("__name__", "")
        guest = _loading if _loading and caller.split(".")[0] != "vhpc" else None

        def add(part: T) -> T:
            if name in self._parts:
                if guest is not None:  # taken by vhpc (or an earlier plugin): it stays
                    _clashes.append(self._clash(guest, name, self._guests.get(name)))
                    return part
                if name not in self._guests:
                    raise DuplicateName(f"{self.what} {name!r} is registered twice "
                                        f"({self._parts[name]!r} and {part!r})")
                _clashes.append(self._clash(self._guests.pop(name), name, None))  # vhpc's wins
            if isinstance(part, type) and not getattr(part, "name", None):
                part.name = name  # type: ignore[attr-defined]
            self._parts[name] = part
            self._origins[name] = caller
            if guest is not None:
                self._guests[name] = guest
            return part

        return add

    def _clash(self, guest: str, name: str, owner: str | None) -> str:
        """The line saying plugin ``guest``'s part ``name`` is skipped for ``owner``'s (a
        plugin's label; None: vhpc's own)."""
        return (f"{guest} registers {self.what} {name!r}, a name {owner or 'vhpc'} uses: "
                f"{'that plugin' if owner else 'vhpc'}'s part stays, this one is skipped")

    def _evict(self, guest: str) -> None:
        """Remove the parts the plugin ``guest`` registered (it failed to load)."""
        for name in [n for n, g in self._guests.items() if g == guest]:
            del self._guests[name]
            self._parts.pop(name, None)
            self._origins.pop(name, None)

    def unregister(self, name: str) -> None:
        """Remove ``name`` (for tests that register a temporary part)."""
        self._parts.pop(name, None)
        self._origins.pop(name, None)
        self._guests.pop(name, None)

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        if self.package is not None:
            pkg = importlib.import_module(self.package)
            walk = pkgutil.walk_packages if self.recursive else pkgutil.iter_modules
            for info in walk(pkg.__path__, self.package + "."):
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

    def origin(self, name: str) -> str:
        """The dotted name of the module that registered part ``name`` (the module calling
        :meth:`register`, or the ``caller`` it was given).  Raises UnknownName."""
        self.get(name)
        return self._origins[name]

    def providing(self, capability: str) -> T:
        """The part that provides ``capability`` (it is in the part's ``provides``), asked for
        as "the kind that ..." instead of by name: vhpc's own before a plugin's, then in
        registration order.  Raises NoProvider (one line) when no part provides it."""
        self._load()
        own_first = sorted(self._parts.items(), key=lambda item: item[0] in self._guests)
        for _, part in own_first:
            if capability in getattr(part, "provides", ()):
                return part
        raise NoProvider(f"no {self.what} provides {capability!r} (registered: "
                         f"{', '.join(self.names())}): reinstall vhpc, or the plugin that "
                         "provided it")

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._parts

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def names(self) -> list[str]:
        """Registered names, sorted by :attr:`key` (registration order without one)."""
        self._load()
        if self.key is None:
            return list(self._parts)
        return sorted(self._parts, key=lambda name: self.key(self._parts[name]))

    def view(self) -> Mapping[str, T]:
        """This registry as a read-only mapping name → part (live: later registrations show)."""
        return _View(self)

    def items(self) -> Iterator[tuple[str, T]]:
        """(name, part) pairs in the order of :meth:`names`."""
        return iter([(name, self._parts[name]) for name in self.names()])
