"""Like with like, checked when a campaign is planned (``--dry-run`` too, nothing started): every
benchmark's parameters must fit each environment (:meth:`~vhpc.benchmarks.base.Benchmark.bounds`:
ranks within its CPUs, atoms within its memory), and a benchmark that declares its resolved
problem (:meth:`~vhpc.benchmarks.base.Benchmark.problem`: ranks, atoms, steps) must resolve to
the same problem in every environment, since its overhead is the ratio of two runs of one
problem: timesteps/s of 4,000 atoms on 2 ranks against 2,048 atoms on 1 rank is no overhead.

What an environment offers is read from its spec and the host's facts, never by starting it:
``native``: its ``cpus=`` (or the CPUs of its ``nodes=``, else every usable CPU) and the host's
memory; ``vm``: ``vcpus`` and ``memory``; ``vcluster``: its ranks (``vms`` x ``ranks_per_vm``, or
x ``vcpus``) and ``vms`` x ``memory``.  A kind this module does not know (``ssh``: its CPUs are
read when it runs), and ``native`` under an executor spanning several nodes, are not checked
here (the trials' check keys still keep unlike problems apart).
"""

from __future__ import annotations

from typing import Any

from vhpc.benchmarks.apps.common import VERSION_PROBES
from vhpc.benchmarks.base import BenchmarkError


def offered(env: Any, host: Any) -> tuple[int, int | None] | None:
    """(CPUs, memory in bytes or None when unknown) that environment spec ``env`` offers a
    benchmark on ``host`` (:class:`~vhpc.environments.options.HostFacts`), read from its
    options (module docstring): guests by their ``vcpus``/``memory`` (and ``vms``,
    ``ranks_per_vm``), an environment on this host (its kind's ``llc_owner`` is None) by its
    ``cpus``/``nodes`` and the host's memory; None for one whose size is only known once it
    runs."""
    opts, topo = env.options, host.topology
    if getattr(opts, "vcpus", None):  # guests: vm, vcluster
        vms = int(getattr(opts, "vms", 1) or 1)
        per_vm = getattr(opts, "ranks_per_vm", None) or opts.vcpus
        return vms * per_vm, vms * (int(opts.memory) << 20)
    if env.part.llc_owner is not None or int(getattr(host, "compute_nodes", 1) or 1) > 1:
        return None  # another host's CPUs (ssh), or the executor's nodes
    host_mem = (sum(n.memory_bytes or 0 for n in topo.nodes)
                if topo.memory_known and all(n.memory_bytes for n in topo.nodes
                                             if not n.memory_only) else None)
    if getattr(opts, "cpus", None):
        return len(opts.cpus), host_mem
    if getattr(opts, "nodes", None):
        return sum(len(topo.pus_of_node(n)) for n in opts.nodes if n in topo.node_ids), host_mem
    return len(host.cpus), host_mem


def check(spec: Any, host: Any) -> None:
    """Refuse ``spec`` (a :class:`~vhpc.spec.parse.CampaignSpec`) on ``host`` when a benchmark's
    parameters exceed what an environment holds, or when a benchmark's resolved problem differs
    between environments (module docstring).  Raises BenchmarkError: one line naming the
    benchmark, the environments, the two problems and the parameter to give."""
    sizes = {e.name: offered(e, host) for e in spec.environments}
    for b in spec.benchmarks:
        bench = spec.benchmark(b.name)
        params = bench.resolve(b.params)
        problems: dict[str, dict[str, Any]] = {}
        for e in spec.environments:
            size = sizes[e.name]
            if size is None:
                continue
            try:
                bench.bounds(params, *size)
            except BenchmarkError as exc:
                raise BenchmarkError(f"{exc} (environment {e.name})") from None
            problem = bench.problem(params, size[0])
            if problem is not None:
                problems[e.name] = problem
        _refuse_unlike(b.label, problems, spec.baseline)


def _refuse_unlike(label: str, problems: dict[str, dict[str, Any]], baseline: str) -> None:
    """Raise BenchmarkError when two environments' resolved problems differ."""
    if len(problems) < 2:
        return
    ref_env = baseline if baseline in problems else next(iter(problems))
    ref = problems[ref_env]
    for name, problem in problems.items():
        if problem != ref:
            diff = ", ".join(f"{k} {ref[k]} in {ref_env} but {problem[k]} in {name}"
                             for k in ref if problem.get(k) != ref[k])
            hint = ("give ranks= explicitly" if ref.get("ranks") != problem.get("ranks")
                    else "give the same parameters")
            raise BenchmarkError(f"{label}: {diff}: not the same problem, so no overhead can be "
                                 f"computed; {hint} so that every environment runs the same "
                                 "problem")


def check_app_versions(spec: Any, envs: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Refuse a campaign that runs an application (LAMMPS, GROMACS:
    :data:`~vhpc.benchmarks.apps.common.VERSION_PROBES`) in environments where different
    versions of it are installed, or where it is missing, unless the campaign file says
    ``allow_app_versions: true``: its overhead would be the ratio of two programs.  ``envs``:
    the prepared environments by name (an image's guest is booted by its preflight; its
    versions are read over ssh).  Environments whose versions are unknown (None) are not
    compared.  Returns {application: {environment: version}}.  Raises BenchmarkError naming
    each environment's version."""
    apps = sorted({b.name for b in spec.benchmarks} & {p[0] for p in VERSION_PROBES})
    if not apps:
        return {}
    seen = {name: env.app_versions() for name, env in envs.items()}
    found: dict[str, dict[str, str]] = {}
    for app in apps:
        versions = {name: (v or {}).get(app, "") for name, v in seen.items() if v is not None}
        found[app] = versions
        if len(set(versions.values())) > 1 and not spec.allow_app_versions:
            listed = ", ".join(f"{name} has {v or 'none installed'}"
                               for name, v in versions.items())
            raise BenchmarkError(f"{app}: {listed}: an overhead compares one program; install "
                                 "the same version everywhere, or set allow_app_versions: true "
                                 "in the campaign file to compare them anyway")
    return found
