"""Host probes remembered across vhpc processes.

A few facts of the host cost a process start to learn and change only when the host does:
whether ``perf stat`` counts cycles here (:func:`vhpc.host.counters.perf_status`, 20-75 ms a
``perf`` start on a 2-core host) and libvirt's version (:func:`vhpc.host.firmware.
libvirt_version`, 20-65 ms a ``virsh`` start).  Every campaign asked both again before its
first trial; :func:`remembered` keeps each answer in the cache folder
(:func:`vhpc.core.paths.cache_dir`, ``host-probes.json``) beside the key it holds for: the
boot (``/proc/sys/kernel/random/boot_id``, proc(5)), the settings it depends on, and the path,
size and modification time of the tool that was run.  A different key, a cache vhpc may not
believe (:func:`vhpc.core.paths.read_cache_text`) or any error reading it probes again.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable

from vhpc.core.errors import VhpcError
from vhpc.core.paths import cache_dir, read_cache_text, write_atomic

#: The cache file's name in the cache folder, and the most bytes of it that are read.
FILE = "host-probes.json"
MAX_BYTES = 64 * 1024


def boot_id() -> str | None:
    """This boot's random id (proc(5) ``/proc/sys/kernel/random/boot_id``); None when unreadable."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or None
    except OSError:
        return None


def tool_key(path: str | None) -> list[Any] | None:
    """``[real path, size, modification time in ns]`` of the tool at ``path``: a new build or
    version of it gives another key.  None when there is no such file."""
    if not path:
        return None
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    return [real, st.st_size, st.st_mtime_ns]


def remembered(name: str, key: Any, probe: Callable[[], Any],
               keep: Callable[[Any], bool] = lambda value: True) -> Any:
    """The value of probe ``name`` for ``key`` (JSON values only): the stored one when the cache
    holds ``name`` with an equal key, else ``probe()``'s, stored for the next process when
    ``keep(value)`` (a probe that timed out is asked again next time).  A cache that cannot be
    read, believed or written costs the probe, never an error."""
    try:
        path = cache_dir() / FILE
    except (OSError, VhpcError):
        return probe()
    try:
        data = json.loads(read_cache_text(path, MAX_BYTES) or "{}")
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    entry = data.get(name)
    if isinstance(entry, dict) and entry.get("key") == key and "value" in entry:
        return entry["value"]
    value = probe()
    if not keep(value):
        return value
    data[name] = {"key": key, "value": value}
    try:
        write_atomic(path, json.dumps(data))
    except (OSError, VhpcError):
        pass
    return value
