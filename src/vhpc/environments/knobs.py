"""Host knobs that vhpc may change — only when the user asks (``--host-knob NAME=VALUE``) —
and always restores: on normal exit, on errors, on Ctrl-C, and, if vhpc was killed, at its
next start (a journal of original values is written *before* anything is changed).

| knob | file(s) | values |
|---|---|---|
| ``thp`` | /sys/kernel/mm/transparent_hugepage/enabled | always, madvise, never |
| ``thp_defrag`` | /sys/kernel/mm/transparent_hugepage/defrag | always, defer, defer+madvise, madvise, never |
| ``numa_balancing`` | /proc/sys/kernel/numa_balancing | 0, 1 |
| ``hugepages_2m`` | /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages | page count |
| ``hugepages_1g`` | /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages | page count |
| ``governor`` | /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor | a governor the CPU offers |

Files and semantics: Documentation/admin-guide/mm/transhuge.rst, hugetlbpage.rst,
sysctl/kernel.rst (numa_balancing), cpu-freq/cpufreq-stats (scaling_governor) of the Linux
kernel.  KVM's ``ept``/``npt`` (nested vs shadow paging, seed 004 Fig. 12) are module
parameters that need the kvm module reloaded with no VM running: vhpc records them but does
not change them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from vhpc.errors import VhpcError

KNOBS: dict[str, tuple[str, str]] = {
    "thp": ("sys/kernel/mm/transparent_hugepage/enabled", r"always|madvise|never"),
    "thp_defrag": ("sys/kernel/mm/transparent_hugepage/defrag",
                   r"always|defer|defer\+madvise|madvise|never"),
    "numa_balancing": ("proc/sys/kernel/numa_balancing", r"[01]"),
    "hugepages_2m": ("sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", r"\d+"),
    "hugepages_1g": ("sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", r"\d+"),
    "governor": ("sys/devices/system/cpu/cpu*/cpufreq/scaling_governor", r"[a-z]+"),
}


class KnobError(VhpcError, ValueError):
    """A knob name or value is not allowed, or the host refused it; says what to change."""


def parse_knob(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` → (name, value), validated against :data:`KNOBS`.  Raises KnobError."""
    name, sep, value = text.partition("=")
    if not sep or name not in KNOBS:
        raise KnobError(f"host knob {text!r}: use NAME=VALUE with NAME one of {', '.join(KNOBS)}")
    if not re.fullmatch(KNOBS[name][1], value):
        raise KnobError(f"host knob {name}={value!r}: allowed values match {KNOBS[name][1]}")
    return name, value


def _current(path: Path) -> str:
    text = path.read_text().strip()
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else text


class HostKnobs:
    """Context manager applying ``knobs`` ({name: value}) and restoring the originals.

    ``root``: filesystem root (tests use a fake tree); ``journal``: where original values are
    kept until restored.  Raises KnobError when a file is missing or the kernel refuses a
    value (anything applied so far is restored first).
    """

    def __init__(self, knobs: dict[str, str], journal: Path, root: str | Path = "/"):
        self.knobs = dict(knobs)
        self.root = Path(root)
        self.journal = Path(journal)
        self.saved: dict[str, str] = {}

    def _files(self, name: str) -> list[Path]:
        pattern = KNOBS[name][0]
        files = sorted(self.root.glob(pattern)) if "*" in pattern else [self.root / pattern]
        files = [f for f in files if f.exists()]
        if not files:
            raise KnobError(f"host knob {name}: {pattern} does not exist on this host")
        return files

    def __enter__(self):
        recover(self.journal)
        if not self.knobs:
            return self
        for name in self.knobs:
            for f in self._files(name):
                self.saved[str(f)] = _current(f)
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        self.journal.write_text(json.dumps(self.saved))
        try:
            for name, value in self.knobs.items():
                for f in self._files(name):
                    try:
                        f.write_text(value)
                    except OSError as exc:
                        raise KnobError(f"host knob {name}={value}: the kernel refused it "
                                        f"({exc.strerror}); run as root or pick another value") from None
                if name.startswith("hugepages"):
                    got = int(_current(self._files(name)[0]))
                    if got < int(value):
                        raise KnobError(f"host knob {name}={value}: only {got} pages could be "
                                        "reserved (memory fragmented): ask for fewer")
        except BaseException:
            self.restore()
            raise
        return self

    def restore(self) -> None:
        """Write the original values back and delete the journal."""
        restore_values(self.saved)
        self.saved = {}
        self.journal.unlink(missing_ok=True)

    def __exit__(self, *exc):
        self.restore()
        return False


def restore_values(saved: dict[str, str]) -> list[str]:
    """Write saved values back (best effort); returns the files that could not be restored."""
    failed = []
    for path, value in saved.items():
        try:
            Path(path).write_text(value)
        except OSError:
            failed.append(path)
    return failed


def recover(journal: Path) -> dict[str, str]:
    """Restore knobs left changed by a vhpc that was killed; returns what was restored."""
    journal = Path(journal)
    if not journal.exists():
        return {}
    try:
        saved = json.loads(journal.read_text())
    except (OSError, ValueError):
        saved = {}
    restore_values(saved)
    journal.unlink(missing_ok=True)
    return saved


def journal_path() -> Path:
    """Default journal: ``$VHPC_CACHE/host-knobs.journal.json``."""
    from vhpc.environments.guestimage import cache_dir

    return cache_dir() / "host-knobs.journal.json"


__all__ = ["KNOBS", "KnobError", "HostKnobs", "parse_knob", "recover", "journal_path",
           "restore_values"]
