"""Per-trial diagnostics: resource usage, page faults, NUMA statistics and hardware counters.

Each value is recorded when the host or guest exposes it and marked unavailable otherwise,
with the reason — never invented.

* Hardware counters come from ``perf stat -x,`` (perf-stat(1) CSV output:
  ``value,unit,event,run-time,percentage,...``; ``<not supported>`` / ``<not counted>`` when
  the PMU lacks the event).  CPI = cycles / instructions; MPKI = LLC misses per 1000
  instructions (Cheng and Chen, 3PGCIC 2013, Sec. III-B, use both to classify memory
  intensity).
* ``/proc/vmstat`` deltas (pgfault, pgmajfault, numa_hit, numa_miss, numa_local,
  numa_other, ...) and ``/proc/PID/stat`` minflt/majflt (proc(5) fields 10 and 12).
"""

from __future__ import annotations

import functools
import resource
import shutil
import subprocess
from pathlib import Path

from vhpc.core.records import PerfCounters
from vhpc.host import probes

PERF_EVENTS = ("cycles", "instructions", "LLC-load-misses")
VMSTAT_KEYS = ("pgfault", "pgmajfault", "numa_hit", "numa_miss", "numa_foreign",
               "numa_local", "numa_other", "numa_pages_migrated", "thp_fault_alloc")


def parse_perf_csv(text: str) -> dict[str, float | None]:
    """``perf stat -x,`` output → {event: count or None when not supported/counted}."""
    out: dict[str, float | None] = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) < 3 or line.startswith("#"):
            continue
        value, event = parts[0].strip(), parts[2].strip()
        if not event:
            continue
        event = event.split(":")[0] if event.endswith((":u", ":k", ":G", ":H")) else event
        try:
            out[event] = float(value)
        except ValueError:
            out[event] = None
    return out


def derive(counts: dict[str, float | None]) -> dict[str, float | None]:
    """CPI and MPKI from counter values (None when an input is missing or zero)."""
    cyc, ins = counts.get("cycles"), counts.get("instructions")
    miss = counts.get("LLC-load-misses", counts.get("cache-misses"))
    cpi = cyc / ins if cyc and ins else None
    mpki = 1000.0 * miss / ins if miss is not None and ins else None
    return {"cpi": cpi, "mpki": mpki}


#: How :func:`perf_status` begins a reason that may pass (perf did not start or timed out):
#: never remembered for the next process.
PERF_FAILED = "perf stat failed"


@functools.lru_cache(maxsize=1)
def perf_status() -> tuple[bool, str]:
    """(usable, reason): whether ``perf stat`` counts cycles and instructions on this host.
    Asked once per boot, ``perf_event_paranoid`` setting and perf build
    (:func:`vhpc.host.probes.remembered`): a ``perf`` start cost each campaign 20-75 ms."""
    perf = shutil.which("perf")
    if perf is None:
        return False, "perf is not installed (apt-get install linux-perf)"
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            paranoid = f.read().strip()
    except OSError:
        paranoid = None
    boot = probes.boot_id()
    if boot is None:
        return _probe_perf()
    ok, why = probes.remembered("perf_status", [boot, paranoid, probes.tool_key(perf)],
                                lambda: list(_probe_perf()),
                                keep=lambda v: not str(v[1]).startswith(PERF_FAILED))
    return bool(ok), str(why)


def _probe_perf() -> tuple[bool, str]:
    """:func:`perf_status`'s probe: ``perf stat`` of ``true``, counting cycles and instructions."""
    try:
        out = subprocess.run(["perf", "stat", "-x,", "-e", "cycles,instructions", "--", "true"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{PERF_FAILED}: {exc}"
    counts = parse_perf_csv(out.stderr)
    if counts.get("cycles") is None or counts.get("instructions") is None:
        return False, "the host PMU does not expose cycles/instructions to perf (<not supported>)"
    return True, "perf stat counts cycles and instructions"


def perf_wrap(argv: list[str], outfile: str) -> list[str]:
    """``argv`` run under ``perf stat`` writing CSV counts to ``outfile``."""
    return ["perf", "stat", "-x,", "-o", outfile, "-e", ",".join(PERF_EVENTS), "--"] + list(argv)


def perf_result(outfile: str) -> PerfCounters:
    """Counts and derived CPI/MPKI from a perf CSV file, as a :class:`~vhpc.core.records.PerfCounters`
    record (with ``unavailable`` = why, when there are none)."""
    try:
        counts = parse_perf_csv(Path(outfile).read_text())
    except OSError as exc:
        return PerfCounters(unavailable=f"no perf output: {exc.strerror}")
    if not counts:
        return PerfCounters(unavailable="perf wrote no counts")
    return PerfCounters(counts=counts, **derive(counts))


def parse_vmstat(text: str) -> dict[str, int]:
    """``/proc/vmstat`` text → {key: value} for :data:`VMSTAT_KEYS` present."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key in VMSTAT_KEYS:
            out[key] = int(value)
    return out


def delta(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, float] | None:
    """after − before for keys in both (None when either side is unavailable)."""
    if before is None or after is None:
        return None
    return {k: after[k] - before[k] for k in after if k in before}


def process_faults(pid: int) -> dict[str, int] | None:
    """Minor and major faults of process ``pid`` so far (proc(5) stat fields 10, 12)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return {"minflt": int(fields[7]), "majflt": int(fields[9])}


def children_usage() -> dict[str, float]:
    """Cumulative resource usage of reaped children (getrusage(2) RUSAGE_CHILDREN)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"user_s": ru.ru_utime, "sys_s": ru.ru_stime, "minflt": ru.ru_minflt,
            "majflt": ru.ru_majflt, "nvcsw": ru.ru_nvcsw, "nivcsw": ru.ru_nivcsw}


KVM_STATS = ("exits", "io_exits", "mmio_exits", "halt_exits", "irq_exits", "pf_taken",
             "pf_guest", "tlb_flush", "halt_successful_poll")


def kvm_exits(pid: int, debugfs: str = "/sys/kernel/debug/kvm") -> dict[str, int] | None:
    """KVM's per-VM counters for the VM of QEMU process ``pid`` (debugfs directory
    ``<pid>-<fd>``, Documentation/virt/kvm/api.rst "KVM statistics"): exits, io_exits,
    mmio_exits, halt_exits, ...  None when debugfs is not mounted or the VM is not a KVM VM."""
    base = Path(debugfs)
    try:
        dirs = [d for d in base.iterdir() if d.name.startswith(f"{pid}-")]
    except OSError:
        return None
    if not dirs:
        return None
    out: dict[str, int] = {}
    for name in KVM_STATS:
        f = dirs[0] / name
        try:
            out[name] = int(f.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return out or None
