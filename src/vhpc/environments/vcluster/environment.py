"""The ``vcluster`` environment: several ``vm`` guests on one host as one machine.

Options (``-e vcluster:k=v,...``): ``vms`` (count, default 2), ``vcpus`` and ``memory`` (MiB)
per VM, ``policy`` (``partition``, the default: the VMs spread over the host's sockets as
:func:`vhpc.placement.plan_partition` places them, each VM's vCPUs pinned inside its socket and
its memory bound to that socket's node; or any ``vm`` policy, which each VM applies to its own
disjoint share), ``net`` (``virtio``: the guests' private network; ``ivshmem``: the same plus
one shared-memory device in every guest), ``ranks_per_vm`` (MPI slots per guest, default
``vcpus``), ``accel``, ``kernel``, ``boot_timeout``, ``strict``, ``name``.

Each guest is a :class:`~vhpc.environments.vm.environment.VmEnvironment` (same boot, pinning, pause,
read-back and strict mode) with extra QEMU and kernel arguments from
:mod:`vhpc.environments.vcluster.network`.  The guests boot in order (VM 0 listens for the others'
network links).  A benchmark's command runs in guest 0; an MPI launcher there (``mpirun``,
``mpiexec``, Debian's ``.openmpi``/``.mpich`` names) gets a hostfile with ``ranks_per_vm`` slots
per guest and starts remote ranks through ``/run/vhpc-rsh``, which asks the guest agent's exec
service on the target guest to run the command (guest/peer.c): no ssh, no key, no password.
Every rank runs under ``/run/vhpc-rank``, which logs the guest and CPU it ran on; after the
trial these logs are read from every guest and joined with the host-side read-back of that
vCPU's thread.  A rank in another guest than planned (rank *r* in guest ``r // ranks_per_vm``)
is a placement mismatch.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable

import vhpc.placement
from vhpc.core import records
import vhpc.topology
from vhpc.benchmarks.mpilaunch import program_index, rank_lines
from vhpc.environments.vcluster import network as vclusternet
from vhpc.environments.vcluster.network import HOSTFILE
from vhpc.environments.base import EnvError, Environment, RunResult, now
from vhpc.environments.vcluster.options import VclusterOptions
from vhpc.environments.vm.environment import VmEnvironment
from vhpc.environments.vm.options import VmOptions

RANK_LOG = "/tmp/vhpc-ranks.log"


def plan_cluster(topo: vhpc.topology.Topology, vms: int, vcpus: int, memory: int,
                 policy: str = "partition") -> list[vhpc.placement.Placement]:
    """One Placement per VM.  ``partition``: ``vms`` spread evenly over the host's packages
    (a multiple of the package count: that many VMs per socket; a divisor: one VM per group
    of sockets), via :func:`plan_partition`; another policy: each VM takes its own disjoint
    share of it (``vm_index``/``vms``).  Raises PlacementError saying what to change."""
    npk = len(topo.packages)
    if policy == "partition":
        if vms % npk == 0:
            return vhpc.placement.plan_partition(topo, vms // npk, vcpus, memory,
                                                 check_memory=False)
        if npk % vms == 0:
            return vhpc.placement.plan_partition(topo, 1, vcpus, memory, sockets_per_vm=npk // vms,
                                                 check_memory=False)
        raise vhpc.placement.PlacementError(
            f"vms={vms} cannot partition the host's {npk} sockets evenly: use a multiple or a "
            f"divisor of {npk}, or another policy")
    reqs = [vhpc.placement.PlacementRequest(vcpus=vcpus, memory_mib=memory, policy=policy,
                                            vm_index=i, vms=vms, exclusive=policy != "float",
                                            check_memory=False) for i in range(vms)]
    return vhpc.placement.plan_vms(topo, reqs)


def node_guests(name: str, first: int, count: int, policy: str, member: dict[str, Any],
                vms: int | None = None, seed: dict[str, str] | None = None) -> list[VmEnvironment]:
    """The guests ``first`` .. ``first + count - 1`` of vcluster ``name`` that one compute node
    holds (the node side of a cluster spanning an executor's nodes), placed on this node's own
    topology with ``policy`` (:func:`plan_cluster`); ``member``: the guests' VmOptions fields.
    With ``image`` among them, each is the image guest of :func:`images.member` (``vms``: the
    cluster's guests on all nodes; ``seed``: the cluster's :func:`images.cluster_seed`).
    Nothing is booted.  Raises PlacementError/HostError/ValueError when the node cannot hold
    them (ValueError also for an image cluster without ``seed``)."""
    from vhpc.environments.options import HostFacts

    options = VmOptions.model_validate(member)
    facts = HostFacts.live()
    plans = plan_cluster(facts.topology, count, options.vcpus, options.memory, policy)
    if options.image:
        from vhpc.environments.vcluster import images

        if not seed:
            raise ValueError("an image cluster's guest host needs the cluster's seed")
        return [images.member(name, first + k, vms or first + count, options, p,
                              facts.topology, seed) for k, p in enumerate(plans)]
    return [VmEnvironment(f"{name}/vm{first + k}", options, p, facts.topology)
            for k, p in enumerate(plans)]


def launcher_env(vms: int, ranks_per_vm: int) -> dict[str, str]:
    """Environment for a launcher in guest 0: Open MPI (MCA parameters in the environment,
    mpirun(1)) and Hydra (``HYDRA_*``, mpiexec.hydra(1)) both read the hostfile and start
    remote daemons with /run/vhpc-rsh; traffic stays on the private segment (``vms`` and
    ``ranks_per_vm`` are in the hostfile, written at session start)."""
    return {
        "OMPI_MCA_plm_rsh_agent": "/run/vhpc-rsh",
        "OMPI_MCA_orte_default_hostfile": HOSTFILE,
        "OMPI_MCA_btl_tcp_if_include": vclusternet.SUBNET,
        "OMPI_MCA_oob_tcp_if_include": vclusternet.SUBNET,
        "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "HYDRA_HOST_FILE": HOSTFILE + ".hydra",
        "HYDRA_LAUNCHER": "ssh", "HYDRA_LAUNCHER_EXEC": "/run/vhpc-rsh",
        "UCX_NET_DEVICES": "eth0",  # Debian's MPICH is ch4:ucx: its TCP transport on the segment
    }


def parse_rank_log(text: str, guest: int) -> list[dict[str, Any]]:
    """Lines of /run/vhpc-rank's log (``rank=R host=H pid=P cpu=C allowed=LIST rc=X``) as
    dicts with ``vm`` = ``guest``; malformed lines are skipped."""
    out = []
    for line in text.splitlines():
        kv = dict(w.split("=", 1) for w in line.split() if "=" in w)
        try:
            out.append({"rank": int(kv["rank"]), "vm": guest, "guest": kv.get("host"),
                        "vcpu": int(kv["cpu"]), "guest_cpus_allowed": kv.get("allowed"),
                        "rc": int(kv.get("rc", 0))})
        except (KeyError, ValueError):
            continue
    return out


class VclusterEnvironment(Environment):
    """Several QEMU guests on a private network, one MPI job across them (module docstring).

    Raises ValueError/PlacementError from the constructor for bad options or an impossible
    plan.  Attributes: members (one VmEnvironment per guest), placements, net (ClusterNet or
    None before start), total_ranks, orphans (what :func:`reap_orphans` removed at start).
    """

    spans_nodes = True

    def __init__(self, name: str, options: VclusterOptions,
                 placements: list[vhpc.placement.Placement], topo: vhpc.topology.Topology,
                 spread: bool = False):
        super().__init__(name)
        o = options
        self.ranks_per_vm = o.vcpus if o.ranks_per_vm is None else o.ranks_per_vm
        self.vms, self.vcpus, self.memory, self.policy = o.vms, o.vcpus, o.memory, o.policy
        self.transport = o.net
        self.strict = o.strict
        self.topo = topo
        self.placements = placements
        self.image = o.image
        member = VmOptions(vcpus=o.vcpus, memory=o.memory, accel=o.accel, kernel=o.kernel,
                           boot_timeout=o.boot_timeout, strict=o.strict,
                           **({"image": o.image, "format": o.format, "boot": o.boot}
                              if o.image else {}))
        self.member_options = member
        #: whether the guests boot on an executor's compute nodes (attach_nodes), not here
        self.spread = spread
        self.seed: dict[str, str] | None = None
        if o.image:  # the user's image in every guest (vcluster/images.py)
            from vhpc.environments.vcluster import images

            self.seed = images.cluster_seed()
            self.members = images.members(name, member, self.placements, topo, self.seed)
        else:
            self.members = [VmEnvironment(f"{name}/vm{i}", member, p, topo)
                            for i, p in enumerate(self.placements)]
        self._fresh = False  # an image cluster booted by preflight, no trial run in it yet
        self.total_ranks = o.vms * self.ranks_per_vm
        self.net: vclusternet.ClusterNet | None = None
        self.orphans: list[str] = []
        self.guests_per_node = len(placements)
        self.link = o.link
        self._hub: tuple[str, Callable[[int], list[int]]] | None = None

    def node_shares(self) -> list[dict[str, Any]]:
        """What each compute node holding guests builds, in node order (``guests_per_node``
        each, the last one the rest): ``{"name", "first" (global index of its first guest),
        "count", "policy", "member" (the guests' VmOptions fields as given)}``."""
        per = self.guests_per_node
        member = self.member_options.model_dump(mode="json", exclude_unset=True)
        return [{"name": self.name, "first": first, "count": min(per, self.vms - first),
                 "vms": self.vms, "policy": self.policy, "member": member}
                for first in range(0, self.vms, per)]

    def attach_nodes(self, members: list, hub_host: str,
                     ports: Callable[[int], list[int]]) -> None:
        """Run the guests on other nodes: ``members`` (one per guest, in guest order, each
        with the interface of a VmEnvironment member and a ``node`` name, e.g.
        :class:`vhpc.executors.slurm.guests.RemoteVm`) replace the local VMs; the links go to
        guest 0's QEMU at ``hub_host`` on ports ``ports(n)`` picked afresh at every boot, as
        UDP datagrams (``link=dgram``, each guest's own end from its ``free_port()``) or TCP
        (``link=stream``).  Raises ValueError when the count is not ``vms``."""
        if len(members) != self.vms:
            raise ValueError(f"{len(members)} members for {self.vms} guests")
        self.close()
        self.members = list(members)
        self._hub = (hub_host, ports)

    @property
    def accel(self) -> str:
        """The guests' accelerator (``kvm``/``tcg``), as the first guest's."""
        return self.members[0].accel

    def benchmark_cpus(self) -> int:  # MPI ranks across all guests
        """MPI ranks across all guests (guests x ranks per guest)."""
        return self.total_ranks

    def fingerprint(self) -> dict[str, Any]:
        """The first guest's fingerprint with ``kind=vcluster``, the guests, ranks per guest,
        transport, placement policy and each guest's placement and plan, the network as it is (or
        as it would be, created nothing), the orphans removed and, across nodes, each guest's node.
        """
        fp = self.members[0].fingerprint()
        fp.update(kind="vcluster", vms=self.vms, ranks_per_vm=self.ranks_per_vm,
                  transport=self.transport, policy=self.policy,
                  placement="; ".join(f"vm{i}: {vhpc.placement.describe(p)}"
                                      for i, p in enumerate(self.placements)),
                  plan=self.placements[0].to_dict(), plans=[p.to_dict() for p in self.placements],
                  network=(self.net or vclusternet.ClusterNet(  # describe, create nothing
                      self.vms, Path("."), Path(".") if self.transport == "ivshmem" else None,
                      self._shm_node(), self._hub[0] if self._hub else None)).describe(),
                  orphans_removed=self.orphans,
                  nodes=[getattr(m, "node", None) for m in self.members] if self._hub else None)
        return fp

    def _shm_node(self) -> int | None:
        nodes = self.placements[0].host_nodes
        if nodes:
            return nodes[0]
        return self.topo.node_ids[0] if self.topo.node_ids else None

    def _net(self) -> vclusternet.ClusterNet:
        """The private segment (made once), its links (re)assigned to the members: across
        nodes with fresh ports for this boot."""
        if self.net is None and self._hub is not None:
            self.net = vclusternet.ClusterNet.across_nodes(self.vms, self._hub[0])
        if self.net is None:
            self.orphans = vclusternet.reap_orphans()
            for line in self.orphans:
                print(f"vhpc: {line} (left by a killed vhpc)", file=sys.stderr)
            self.net = vclusternet.ClusterNet.create(self.vms, self.transport == "ivshmem",
                                                     self._shm_node())
        if self._hub is not None:
            self.net.ports = tuple(self._hub[1](self.vms - 1))
            if self.link == "dgram":
                self.net.leaves = tuple((m.address, m.free_port()) for m in self.members[1:])
        for i, m in enumerate(self.members):
            m.extra_args = self.net.qemu_args(i)
            m.append = self.net.kernel_args(i)
        return self.net

    def start(self) -> None:
        """Boot every guest that is not running (VM 0 first: it listens for the others'
        links), then write the hostfiles into guest 0.  Raises EnvError; on failure every
        guest is stopped."""
        if all(m.guest is not None and m.guest.alive() for m in self.members):
            return
        if self.spread and self._hub is None:
            raise EnvError(f"{self.name}: its guests boot on the executor's compute nodes, and "
                           "none is attached yet")
        self.close_guests()
        net = self._net()
        net.clear_sockets()
        try:
            for i, m in enumerate(self.members):
                self.stage(f"vm{i}: booting")
                m.start()
                m.pause()  # a booted guest waits while the others boot
            self._same_image()
            self._write_hostfiles()
        except EnvError:
            self.close_guests()
            raise
        self._fresh = True

    def _same_image(self) -> None:
        """Across nodes: every guest booted the same image (the SHA-256 each node read of the
        file at ``image=``'s path).  Raises EnvError naming two nodes that differ."""
        known = [(m.node, m.image_sha256) for m in self.members
                 if getattr(m, "image_sha256", None)]
        for node, sha in known[1:]:
            if sha != known[0][1]:
                raise EnvError(f"{self.name}: image={self.image} differs between node "
                               f"{known[0][0]} (sha256 {known[0][1][:12]}) and node {node} "
                               f"(sha256 {sha[:12]}): put the same file at that path on "
                               "every node")

    def preflight(self) -> None:
        """With ``image=``: check the image and boot the cluster once (the session the first
        trial uses) before a campaign stores anything, as ``vm:image=`` does; a cluster spread
        over an executor's nodes only checks the image here (each node's guest host checks
        it again and boots it at the first trial).  Raises EnvError (one line, then a
        console's last lines) after stopping every guest."""
        if not self.image:
            return
        if self.spread:
            self.stage("checking the image (qemu-img check, SHA-256)")
            self.members[0].check_image()
            return
        for i, m in enumerate(self.members):  # each guest's stages, named by its guest
            m.stage_hook = lambda what, i=i: self.stage(f"vm{i}: {what}")
        try:
            self.start()
        except EnvError:
            self.close()
            raise

    def app_versions(self):
        """With ``image=``: the applications' versions in the first guest (every guest boots
        the same image); else this host's, whose files vhpc's own guests share."""
        if not self.image:
            return super().app_versions()
        if self.spread and self._hub is None:
            return None  # not booted before the allocation: the nodes' guests record theirs
        return self.members[0].app_versions()

    def kernel_dir(self, local, impl: str, binary: str):
        """vhpc's kernels as the guests see them: the host's build for vhpc's own guests; with
        ``image=``, built in every guest by its own compiler at the same path there."""
        if not self.image or local is None or not binary:
            return local
        self.start()
        self.resume()
        return [m.kernel_dir(local, impl, binary) for m in self.members][0]

    def stage_files(self, paths: list[str]):
        """With ``image=``: the inputs copied into every guest (the same path in each: named
        by their contents' hash); None for vhpc's own guests, which see the host's files."""
        if not self.image:
            return None
        self.start()
        self.resume()
        return [m.stage_files(paths) for m in self.members][0]

    def _write_hostfiles(self) -> None:
        names = [vclusternet.hostname(i) for i in range(self.vms)]
        ompi = "".join(f"{n} slots={self.ranks_per_vm}\n" for n in names)
        hydra = "".join(f"{n}:{self.ranks_per_vm}\n" for n in names)
        g0 = self.members[0]
        g0.resume()
        reply = g0.guest.request("run", 60.0, argv=[
            "sh", "-c", 'printf "%s" "$1" > "$3" && printf "%s" "$2" > "$3.hydra"', "sh",
            ompi, hydra, HOSTFILE], env={}, timeout=30.0)
        if reply.get("rc") != 0:
            raise EnvError(f"cannot write the hostfile in guest 0: {reply.get('stderr', '')[-200:]}")

    def close_guests(self) -> None:
        """Stop every guest (the network's work directory, and an image's overlays, stay for
        the next session)."""
        for m in self.members:
            m.stop() if self.image else m.close()

    def close(self) -> None:
        """Stop every guest and remove the private network's sockets and the shared file (and
        an image's overlays)."""
        for m in self.members:
            m.close()
        if self.net is not None:
            self.net.remove()
            self.net = None

    def new_session(self) -> None:
        """End the session; an image cluster that has run no trial since its boot (the
        preflight's) is fresh already and is kept."""
        if self.image and self._fresh and all(m.guest is not None and m.guest.alive()
                                              for m in self.members):
            return
        self.close_guests()

    def pause(self) -> None:
        """Pause every guest (QMP ``stop``)."""
        for m in self.members:
            m.pause()

    def resume(self) -> None:
        """Resume every guest."""
        for m in self.members:
            m.resume()

    def _each_guest(self, argv: list[str]) -> None:
        for m in self.members:
            if m.guest is not None:
                m.guest.request("run", 60.0, argv=argv, env={}, timeout=30.0)

    def run(self, argv, env=None, timeout=600.0, key: str = "") -> RunResult:
        """Run ``argv`` in guest 0 (booting the cluster if needed); an MPI launcher command
        spans the guests (module docstring).  The result's ``applied`` has every VM's
        read-back (``vms``), every rank's guest, vCPU and host CPU (``ranks``) and all
        mismatches; under ``strict`` a mismatch fails the trial."""
        started, t0 = now(), time.monotonic()
        try:
            self.start()
            self.resume()
            self._each_guest(["rm", "-f", RANK_LOG])
        except (EnvError, OSError) as exc:
            self.close_guests()
            return RunResult(None, "", "", started, time.monotonic() - t0, error=str(exc))
        self._fresh = False
        argv, env = list(argv), dict(env or {})
        prog = program_index(argv)
        if prog is not None and self.image:  # ranks over ssh; they print where they ran
            from vhpc.environments.vcluster.images import launcher_env as image_env

            env.update(image_env())
        elif prog is not None:
            argv.insert(prog, "/run/vhpc-rank")
            env.update(launcher_env(self.vms, self.ranks_per_vm))
        result = self.members[0].run(argv, env, timeout=timeout, key=key)
        if result.error and self.members[0].guest is None:  # guest 0 failed: reboot all next time
            self.close_guests()
        vms = [result.applied] + [m.applied() for m in self.members[1:]]
        ranks = [] if prog is None or result.error else (
            self._image_ranks(result.stdout) if self.image else self._ranks())
        mismatches = [f"vm{i}: {x}" for i, a in enumerate(vms) if a is not None
                      for x in a.mismatches]
        mismatches += self._rank_mismatches(  # an image's command may print no rank lines
            ranks, argv, prog if ranks or not self.image else None)
        result.applied = records.AppliedPlacement(
            accel=getattr(result.applied, "accel", None), vms=[a.model_dump() if a else None for a in vms],
            ranks=ranks, mismatches=mismatches, transport=self.transport)
        if self.strict and mismatches and result.error is None:
            result.error = "placement mismatch (strict): " + "; ".join(mismatches)
        elif result.error and result.error.startswith("placement mismatch (strict)"):
            result.error = "placement mismatch (strict): " + "; ".join(mismatches)
        return result

    def _ranks(self) -> list[dict[str, Any]]:
        """Every rank's guest and vCPU (from the guests' rank logs) with the host CPU that
        vCPU's thread is allowed on and last ran on (host read-back)."""
        ranks = []
        for i, m in enumerate(self.members):
            if m.guest is None:
                continue
            try:
                reply = m.guest.request("read", 30.0, path=RANK_LOG)
            except (EnvError, OSError):
                continue
            threads = {v["vcpu"]: v for v in m.guest.read_affinity()}
            for r in parse_rank_log(reply.get("data", ""), i):
                t = threads.get(r["vcpu"], {})
                r.update(host_cpus_allowed=t.get("allowed"), host_cpu=t.get("last_cpu"),
                         node=getattr(m, "node", None))
                ranks.append(r)
        return sorted(ranks, key=lambda r: r["rank"])

    def _image_ranks(self, stdout: str) -> list[dict[str, Any]]:
        """In an image cluster (no /run/vhpc-rank there): every rank's guest and vCPU from the
        ``VHPC-RANK`` line it printed (its host name is a guest's cluster name,
        :func:`vclusternet.hostname`), with the host CPU that vCPU's thread is allowed on and
        last ran on (read back on the guest's node); a rank on another host is left out (the
        count of ranks reported then falls short)."""
        guests = {vclusternet.hostname(i): i for i in range(len(self.members))}
        threads: dict[int, dict[int, dict]] = {}
        ranks = []
        for r in rank_lines(stdout):
            i = guests.get(r["host"].split(".")[0])
            if i is None:
                continue
            m = self.members[i]
            if i not in threads:
                try:
                    threads[i] = {v["vcpu"]: v for v in m.guest.read_affinity()} if m.guest else {}
                except (EnvError, OSError):
                    threads[i] = {}
            t = threads[i].get(r["cpu"], {})
            ranks.append({"rank": r["rank"], "vm": i, "guest": r["host"], "vcpu": r["cpu"],
                          "guest_cpus_allowed": vhpc.topology.format_list(r["cpus"]),
                          "host_cpus_allowed": t.get("allowed"), "host_cpu": t.get("last_cpu"),
                          "node": getattr(m, "node", None)})
        return ranks

    def _rank_mismatches(self, ranks: list[dict], argv: list[str], prog: int | None) -> list[str]:
        if prog is None:
            return []
        np = next((argv[k + 1] for k in range(1, prog) if argv[k] in ("-np", "-n", "--np")), None)
        out = []
        if np is not None and np.isdigit() and len(ranks) != int(np):
            out.append(f"{len(ranks)} of {np} ranks reported where they ran")
        if np is not None and np.isdigit() and int(np) > self.total_ranks:
            return out  # oversubscribed: no planned guest per rank
        for r in ranks:
            want = r["rank"] // self.ranks_per_vm
            if r["vm"] != want:
                out.append(f"rank {r['rank']} ran in vm{r['vm']}, planned vm{want}")
        return out
