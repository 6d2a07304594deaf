"""The ``slurm`` executor: each trial is a job step inside one Slurm allocation.

Entering the executor asks Slurm for an allocation of whole nodes (``salloc --no-shell
--exclusive``, salloc(1): the job holds the nodes, no shell runs); every trial then runs as
``srun --jobid=J --nodes=1 --ntasks=1 --cpus-per-task=<CPUs of a node>`` (srun(1)) of :mod:`vhpc.executors.slurm.step`, which builds the trial's environment on
the compute node (a VM boots there), runs the benchmark and returns the result as JSON.  The
campaign process stays the only writer of the store.  MPI benchmarks of the ``native``
environment run as an MPI job of their own: ``srun --ntasks=R --mpi=pmix`` (PMIx, as Debian's
Open MPI and Slurm offer it) over up to ``nodes`` nodes, without ``mpirun``.

Each trial stores ``applied["slurm"]`` = job id, step id, node names, and
``diagnostics["sacct"]`` = the step's accounting row (sacct(1): Elapsed, TotalCPU, MaxRSS,
State, ExitCode).  When the allocation ends under the campaign (scancel, time limit) the
trial in flight is left unfinished and :class:`AllocationLost` is raised: ``--resume`` gets a
new allocation and runs exactly the missing trials.

Leaks and impossible requests: the allocation carries a time limit derived from the plan
(unless ``time=`` is given; capped at the partition's limit) and vhpc's pid, host and
campaign in its comment (``--comment``), so a killed vhpc's allocation ends by itself and
``--resume`` cancels it first (same job name, i.e. the same campaign, which only one live
vhpc can hold).  A request the cluster cannot meet (more nodes than the partition has, no
node up) is refused by :meth:`SlurmExecutor.preflight` before anything is stored; a
controller that does not answer is named as such, never as a lost allocation.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from typing import Any

from pydantic import Field, field_validator

from vhpc.core import records
from vhpc.environments.base import Environment, EnvError, RunResult, now
from vhpc.benchmarks.mpilaunch import program_index
from vhpc.host.doctor import Component
from vhpc.executors.base import EXECUTORS, Executor, ExecutorOptions
from vhpc.executors.slurm.calls import salloc_waiting, slurm_call
from vhpc.executors.slurm.nodes import (partition_hugepages, partition_nodes, slurm_minutes,
                                        usable as nodes_usable)
from vhpc.host.owned import die_with_parent
from vhpc.executors.slurm.guests import NodeLink, RemoteVm
from vhpc.executors.slurm.step import (MARK, JobGuard, cancel_srun, encode,
                                       result_from_fields)

#: Seconds a trial's step may take beyond the trial timeout (environment start: a VM boot).
STEP_MARGIN = 240.0
#: Most minutes a derived time limit asks for (a year); ``time=`` overrides the derivation.
MAX_MINUTES = 365 * 24 * 60
#: Minutes added to a derived time limit (allocation start, reports, slack).
SLACK_MINUTES = 10
#: What Slurm's clients print when the controller does not answer.
UNREACHABLE = ("Unable to contact slurm controller", "Unable to establish connection",
               "Socket timed out", "Connection refused", "connect failure",
               "Zero Bytes were transmitted or received")
SACCT_FIELDS = ("JobID", "JobName", "NodeList", "NTasks", "Elapsed", "TotalCPU", "MaxRSS", "State",
                "ExitCode")


class AllocationLost(EnvError):
    """The Slurm allocation ended while the campaign ran (cancelled or out of time)."""


class ControllerUnreachable(AllocationLost):
    """Slurm's controller does not answer (slurmctld down or unreachable)."""


class NodeLost(AllocationLost):
    """A node of the allocation stopped answering during a trial (its slurmd died, the node
    went down): that trial is stored failed naming the node, and the campaign stops before
    burning the next trials against it (``--resume`` runs them)."""


#: Seconds a probe step may take to start ``true`` on a node before the node counts as lost
#: (Slurm's own MessageTimeout default is 10 s, slurm.conf(5)).
PROBE_S = 20.0
#: Node names srun(1) blames in its errors ("srun: error: vhpc2: task 1: Killed", "Task launch
#: for StepId=... failed on node vhpc2: ...").
BLAMED = re.compile(r"(?:srun: error: ([\w.-]+): task|failed on node ([\w.-]+))")


def unreachable(stderr: str) -> bool:
    """True when a Slurm client's stderr says the controller could not be reached."""
    return any(s.lower() in stderr.lower() for s in UNREACHABLE)


def _tail(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


class SlurmOptions(ExecutorOptions):
    """``--executor slurm:...`` options, passed to salloc(1) as ``--partition --nodes --time
    --account`` (unset: the cluster's defaults); ``ranks_per_node`` (default 1): MPI ranks of
    a native job on each node (R ranks run on ⌈R / ranks_per_node⌉ nodes); ``wait`` (minutes,
    default a day): how long a pending allocation is waited for before vhpc gives up.  Counts
    are ASCII digits."""

    partition: str | None = Field(None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    nodes: int | None = Field(None, ge=1, le=100_000)
    time: str | None = Field(None, min_length=1, max_length=32, pattern=r"^[0-9:-]+$")
    account: str | None = Field(None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    ranks_per_node: int = Field(1, ge=1, le=4096)
    wait: int = Field(1440, ge=1, le=365 * 24 * 60)

    @field_validator("nodes", "ranks_per_node", "wait", mode="before")
    @classmethod
    def _ascii_count(cls, v):
        if isinstance(v, str) and not re.fullmatch(r"[0-9]+", v):
            raise ValueError("must be a positive integer in ASCII digits")
        return v


@EXECUTORS.register("slurm")
class SlurmExecutor(Executor):
    """Trials as job steps of one allocation.

    campaign_id names the job (``vhpc-<id>``); ``options``: :class:`SlurmOptions`.  Raises
    EnvError (one line) when Slurm's commands are missing or the allocation is refused.
    """

    options = SlurmOptions
    runs_here = False
    summary = "each trial a job step in one allocation (docs/scale-out.md)"
    components = (Component("Slurm client", "--executor slurm", "cmd:salloc", "slurm-client",
                            "slurm"),)

    def __init__(self, campaign_id: str = "", options: SlurmOptions | None = None):
        options = options or SlurmOptions()
        super().__init__(campaign_id, options)
        self.job_name = f"vhpc-{campaign_id}" if campaign_id else "vhpc"
        self.partition, self.time, self.account = options.partition, options.time, options.account
        self.nodes = options.nodes
        self.ranks_per_node = options.ranks_per_node
        self.wait_minutes = options.wait
        #: guest hosts of the environments whose guests span nodes, by environment name
        self._guest_hosts: dict[str, list[NodeLink]] = {}
        self.job_id: str | None = None
        #: the highest step id of this allocation accounted so far (:meth:`_last_step`)
        self._step_seen = -1
        self.nodelist: list[str] = []
        self.cpus_per_node = 1
        self._fps: dict[str, dict[str, Any]] = {}
        #: nodes found lost after a failed trial: the next trial stops the campaign
        self.lost: list[str] = []
        self._guard: JobGuard | None = None  # scancels the allocation should vhpc die

    @classmethod
    def node_count(cls, options: SlurmOptions) -> int:
        """``nodes=`` (1 when left to the cluster's default)."""
        return options.nodes or 1

    @classmethod
    def node_cpus(cls, options: SlurmOptions) -> int | None:
        """The fewest CPUs of a node of the partition (:func:`partition_nodes`); None when
        sinfo is missing or does not answer."""
        counts = [int(r[2]) for r in partition_nodes(options.partition) if r[2].isdigit()]
        return min(counts) if counts else None

    @classmethod
    def node_hugepages(cls, options: SlurmOptions) -> dict[str, dict[int, int]] | None:
        """Free hugepages of each usable node of the partition, read there (nodes.py)."""
        return partition_hugepages(options.partition, options.account) or None

    # -- allocation ------------------------------------------------------------------------
    def comment(self) -> str:
        """The allocation's job comment: who holds it (vhpc's pid and host) and why."""
        return (f"vhpc pid={os.getpid()} host={socket.gethostname()} "
                f"campaign={self.campaign_id or '-'}")

    def time_limit(self) -> str | None:
        """``time=`` as given, else minutes derived from :attr:`plan_seconds` (the trials still
        to run: measured run times where the store has them, else timeouts; each unmeasured
        trial with :data:`STEP_MARGIN`) plus slack, capped at the partition's limit (``sinfo
        %l``) and :data:`MAX_MINUTES`; None when nothing is known."""
        if self.time:
            return self.time
        if not self.plan_seconds:
            return None
        unmeasured = max(0, self.plan_trials - self.plan_measured)
        minutes = math.ceil((self.plan_seconds + unmeasured * STEP_MARGIN) / 60) + \
            SLACK_MINUTES
        cap = min([m for m in (self._partition_minutes(), MAX_MINUTES) if m], default=MAX_MINUTES)
        return str(min(minutes, cap))

    def _partition_minutes(self) -> int | None:
        out = slurm_call(["sinfo", "-h", "-o", "%P %l"] + (
            ["-p", self.partition] if self.partition else []))
        rows = [ln.split() for ln in out.stdout.splitlines() if len(ln.split()) == 2]
        pick = [r for r in rows if r[0].endswith("*")] or rows  # the default partition
        return slurm_minutes(pick[0][1]) if pick else None

    def salloc_argv(self) -> list[str]:
        """The salloc(1) command that requests the allocation (job name, comment with vhpc's
        pid, time limit from the plan).  ``--no-kill``: a node that fails does not end the
        job (salloc(1)); vhpc finds the lost node itself (:meth:`_lost_note`), stores that
        trial failed naming it and stops before the next trial."""
        argv = ["salloc", "--no-shell", "--exclusive", "--no-kill", f"--job-name={self.job_name}",
                f"--comment={self.comment()}"]
        for flag, value in (("--partition", self.partition), ("--nodes", self.nodes),
                            ("--time", self.time_limit()), ("--account", self.account)):
            if value:
                argv.append(f"{flag}={value}")
        return argv

    def preflight(self) -> None:
        """Check, before a campaign is stored, that Slurm's commands are installed and the
        controller answers (``sinfo``).  Raises EnvError (one line, what to change)."""
        missing = [c for c in ("salloc", "srun", "sacct", "squeue", "scancel", "sinfo")
                   if shutil.which(c) is None]
        if missing:
            raise EnvError(f"the slurm executor needs {', '.join(missing)}: apt-get install "
                           "slurm-client and point SLURM_CONF at the cluster's slurm.conf")
        out = slurm_call(["sinfo", "-h", "-o", "%P"])
        if out.returncode != 0:
            if unreachable(out.stderr):
                raise EnvError(f"the Slurm controller is unreachable ({_tail(out.stderr)}): "
                               "start slurmctld or check SlurmctldHost in SLURM_CONF, or use "
                               "--executor local")
            raise EnvError(f"Slurm does not answer ({_tail(out.stderr) or 'sinfo failed'}): set "
                           "SLURM_CONF to the cluster's slurm.conf, or use --executor local")
        if self.partition and self.partition not in out.stdout.replace("*", "").split():
            raise EnvError(f"executor slurm: no partition {self.partition!r} (partitions: "
                           f"{', '.join(out.stdout.replace('*', '').split())})")
        self._check_capacity()

    def _check_capacity(self) -> None:
        """Refuse a request the partition cannot meet: more nodes than it has, or no node of
        it able to run jobs (all down, drained or in maintenance).  Raises EnvError."""
        nodes = {r[0]: r for r in partition_nodes(self.partition)}
        if not nodes:  # sinfo did not answer: salloc will say what is wrong
            return
        where = f"partition {self.partition}" if self.partition else "the default partition"
        if self.nodes and self.nodes > len(nodes):
            raise EnvError(f"executor slurm: nodes={self.nodes} but {where} has "
                           f"{len(nodes)} node(s): ask for at most {len(nodes)}")
        usable = nodes_usable(list(nodes.values()))
        if nodes and len(usable) < (self.nodes or 1):
            raise EnvError(f"executor slurm: {len(usable)} of the {len(nodes)} node(s) of {where} "
                           f"can run jobs now ({', '.join(sorted({r[3] for r in nodes.values()}))}): "
                           f"need {self.nodes or 1}; see 'sinfo -N'")

    def cancel_leaked(self) -> list[str]:
        """Cancel allocations of this campaign left by a vhpc that is gone (same job name; this
        process owns the campaign, so any other is a leftover).  Returns the job ids."""
        if not self.campaign_id:
            return []
        out = slurm_call(["squeue", "-h", f"--name={self.job_name}", "-o", "%i|%k"])
        jobs = [ln.split("|", 1)[0].strip() for ln in out.stdout.splitlines() if ln.strip()]
        jobs = [j for j in jobs if j.isascii() and j.isdigit()]
        if jobs:
            slurm_call(["scancel", *jobs])
            print(f"vhpc: cancelled Slurm allocation(s) {', '.join(jobs)} left by an earlier "
                  f"run of campaign {self.campaign_id}", file=sys.stderr)
        return jobs

    def __enter__(self):
        self.preflight()
        self.cancel_leaked()
        out = salloc_waiting(self.salloc_argv(), self.job_name, self.wait_minutes,
                             bool(self.campaign_id))
        m = re.search(r"Granted job allocation (\d+)", out.stderr)
        if out.returncode != 0 and unreachable(out.stderr):
            raise ControllerUnreachable(f"the Slurm controller is unreachable "
                                        f"({_tail(out.stderr)}): start slurmctld, then "
                                        f"continue with {self.resume_hint}")
        if out.returncode != 0 or not m:
            raise EnvError(f"Slurm refused the allocation ({_tail(out.stderr) or 'salloc failed'}):"
                           " check partition=, nodes=, time=, account= and 'sinfo'")
        self.job_id = m.group(1)
        self._guard = JobGuard(self.job_id)
        nodes, _, cpus = slurm_call(["squeue", "-h", "-j", self.job_id, "-o", "%N %C"]
                                    ).stdout.strip().partition(" ")
        self.nodelist = slurm_call(["scontrol", "show", "hostnames", nodes]).stdout.split()
        # whole nodes (--exclusive): a trial's step gets every CPU of its node
        self.cpus_per_node = max(1, int(cpus or 1) // max(1, len(self.nodelist)))
        return self

    def __exit__(self, *exc):
        try:  # a second SIGTERM meanwhile: the job is still cancelled (or by the guard)
            for links in self._guest_hosts.values():
                for link in links:
                    link.close()
            self._guest_hosts.clear()
        finally:
            if self.job_id:
                slurm_call(["scancel", self.job_id])
            if self._guard is not None:
                self._guard.release()
        return False

    def alive(self) -> bool:
        """True while the allocation is running (squeue(1) state RUNNING).  Raises
        ControllerUnreachable when squeue cannot reach the controller."""
        out = slurm_call(["squeue", "-h", "-j", str(self.job_id), "-o", "%T"])
        if out.returncode != 0 and unreachable(out.stderr):
            raise ControllerUnreachable(
                f"the Slurm controller is unreachable ({_tail(out.stderr)}) while allocation "
                f"{self.job_id} ran; finished trials are stored: when slurmctld answers again, "
                f"continue with {self.resume_hint}")
        return out.stdout.strip() == "RUNNING"

    # -- trials ----------------------------------------------------------------------------
    def run(self, env: Environment, env_spec: Any, argv: list[str], environ: dict[str, str],
            timeout: float, key: str) -> RunResult:
        """Run one trial as a job step, killed after ``timeout`` seconds; never raises for a
        failing command.  Raises
        AllocationLost when the allocation is gone (the trial stays unfinished), and NodeLost
        when an earlier trial lost a node (this trial stays unfinished: ``--resume`` runs it)."""
        if self.lost:
            raise NodeLost(
                f"node {', '.join(self.lost)} of the Slurm allocation {self.job_id} stopped "
                "answering during a trial (stored failed, naming the node); the trials after it "
                f"are not run against it: when the node is back, continue with "
                f"{self.resume_hint}")
        if env.spans_nodes:
            return self._run_spanning(env, env_spec, argv, environ, timeout, key)
        mpi = self._mpi_ranks(env, argv)
        if mpi:
            return self._run_mpi(mpi, argv, environ, timeout)
        payload = {"env": env_spec.model_dump(), "argv": argv, "environ": environ,
                   "timeout": timeout, "key": key, "fingerprint": env.name not in self._fps}
        step = ["srun", f"--jobid={self.job_id}", "--nodes=1", "--ntasks=1", "--overlap",
                f"--cpus-per-task={self.cpus_per_node}",
                f"--job-name={key or 'trial'}", sys.executable, "-m", "vhpc.executors.slurm.step",
                encode(payload)]
        started, t0 = now(), time.monotonic()
        out, err, rc, killed = self._srun(step, timeout + STEP_MARGIN)
        line = next((ln for ln in reversed(out.splitlines()) if ln.startswith(MARK)), None)
        if line is None:
            self._check_alive()
            why = "step timed out" if killed else f"srun exit {rc}: {_tail(err)}"
            return RunResult(None, out, err, started, time.monotonic() - t0,
                             error=self._lost_note(err) + f"slurm step failed ({why})")
        data = json.loads(line[len(MARK):])
        result = result_from_fields(data["result"])
        if "fingerprint" in data:
            self._fps[env.name] = {**data["fingerprint"], "slurm_node": data["slurm"]["node"],
                                   "slurm_job": self.job_id}
        return self._account(result, data["slurm"])

    def node_address(self, node: str) -> str:
        """``node``'s address as Slurm reaches it (``NodeAddr``, scontrol(1)); the node name
        when Slurm does not say."""
        out = slurm_call(["scontrol", "show", "node", node]).stdout
        m = re.search(r"\bNodeAddr=(\S+)", out)
        return m.group(1) if m else node

    def _attach(self, env: Environment, env_spec: Any) -> list[NodeLink]:
        """Start a guest host (executors/slurm/guests.py) on each node that holds guests of
        ``env`` and hand ``env`` its remote members.  Raises EnvError naming the node that
        failed (the others are stopped)."""
        shares = env.node_shares()
        if len(shares) > len(self.nodelist):
            raise EnvError(f"{env.name}: its guests need {len(shares)} nodes, allocation "
                           f"{self.job_id} has {len(self.nodelist)}")
        seed = getattr(env, "seed", None)  # an image cluster's key pair: sent on stdin
        links: list[NodeLink] = []
        try:
            for node, share in zip(self.nodelist, shares):
                argv = ["srun", f"--jobid={self.job_id}", "--nodes=1", "--ntasks=1", "--overlap",
                        f"--nodelist={node}", f"--cpus-per-task={self.cpus_per_node}",
                        f"--job-name=guests-{env.name}"[:120], sys.executable, "-m",
                        "vhpc.executors.slurm.guests", encode({**share, "seeded": bool(seed)})]
                links.append(NodeLink(argv, node, self.node_address(node), die_with_parent,
                                      seed))
        except EnvError:
            for link in links:
                link.close(10.0)
            raise
        given = env_spec.options.boot_timeout  # the guests' own where the node says (an image)
        members = [RemoteVm(link, i, name, float(link.info.get("boot_timeout") or given))
                   for link in links for i, name in enumerate(link.info["guests"])]
        hub = links[0]
        env.attach_nodes(members, hub.address,
                         lambda n: hub.call("ports", 60.0, host=hub.address, n=n))
        return links

    def prepare(self, env: Environment, env_spec: Any) -> str | None:
        """Before a trial of ``env`` (and its kernel build or inputs' copy, which an image
        cluster makes in its guests on the nodes): for an environment whose guests run on
        the nodes, its guest hosts, started once per environment (kept for its later trials,
        so warm sessions stay warm; started afresh when one ended).  Returns None, or the
        error of a node that failed (its trial is stored failed naming it).  Raises
        AllocationLost when the allocation is gone."""
        if not env.spans_nodes:
            return None
        links = self._guest_hosts.get(env.name)
        if links is not None and all(link.alive() for link in links):
            return None
        for link in links or []:
            link.close(10.0)
        try:
            self._check_alive()
            self._guest_hosts[env.name] = self._attach(env, env_spec)
        except EnvError as exc:
            self._guest_hosts.pop(env.name, None)
            if isinstance(exc, AllocationLost):
                raise
            self._check_alive()
            return str(exc)
        return None

    def _run_spanning(self, env: Environment, env_spec: Any, argv: list[str],
                      environ: dict[str, str], timeout: float, key: str) -> RunResult:
        """A trial of an environment whose guests run on several nodes: its guest hosts
        (:meth:`prepare`), the trial itself driven from here (VclusterEnvironment.run).  A
        node that fails gives a failed trial naming it; the next trial starts fresh guest
        hosts."""
        started, t0 = now(), time.monotonic()
        error = self.prepare(env, env_spec)
        if error is not None:
            return RunResult(None, "", "", started, time.monotonic() - t0, error=error)
        links = self._guest_hosts[env.name]
        result = env.run(argv, environ, timeout=timeout, key=key)
        if result.error and not all(link.alive() for link in links):
            self._check_alive()
            result.error = self._lost_note("") + result.error
        if env.name not in self._fps:
            try:
                self._fps[env.name] = {**env.fingerprint(), "slurm_job": self.job_id,
                                       "slurm_nodes": [link.node for link in links]}
            except EnvError:
                pass
        result.applied = records.extended(
            result.applied, records.AppliedPlacement,
            slurm={"job_id": self.job_id, "nodes": [link.node for link in links],
                   "guest_hosts": [{"node": link.node, "address": link.address,
                                    "step_id": link.info.get("step_id"),
                                    "pid": link.info.get("pid")} for link in links]})
        return result

    def _srun(self, argv: list[str], limit: float) -> tuple[str, str, int | None, bool]:
        """(stdout, stderr, exit status, timed out) of the step ``argv`` (an srun command with
        ``--job-name``), cancelled after ``limit`` seconds and on any exception (SIGTERM,
        SIGINT: :func:`cancel_srun`); srun dies with vhpc (PR_SET_PDEATHSIG)."""
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True, preexec_fn=die_with_parent)
        try:
            out, err = proc.communicate(timeout=limit)
            return out, err, proc.returncode, False
        except subprocess.TimeoutExpired:
            killed = True
        except BaseException:
            cancel_srun(proc, argv)
            raise
        cancel_srun(proc, argv)
        out, err = proc.communicate()
        return out, err, None, killed

    def _lost_note(self, stderr: str) -> str:
        """After a failed step: probe the allocation's nodes (those srun blamed first) and
        return "node N lost: ... " naming the ones that no longer start a step, remembered in
        :attr:`lost` so the next trial stops the campaign; "" when every node answers."""
        blamed = [a or b for a, b in BLAMED.findall(stderr or "")]
        order = list(dict.fromkeys([n for n in blamed if n in self.nodelist] + self.nodelist))
        down = self.nodes_down()
        lost = [n for n in order if n in down or not self.node_answers(n)]
        self.lost = lost
        if not lost:
            return ""
        why = ", ".join(f"{n}: {down[n]}" if n in down else
                        f"{n}: a probe step did not start there within {PROBE_S:.0f} s"
                        for n in lost)
        return f"node {', '.join(lost)} lost ({why}: slurmd dead or node down); "

    def nodes_down(self) -> dict[str, str]:
        """Nodes of the allocation that slurmctld already counts out, with the state sinfo(1)
        gives them (``down``, ``fail``, ``failing``; a ``*`` suffix: not responding): these
        need no probe step (it would wait :data:`PROBE_S` for nothing).  A drained or draining
        node still runs the allocation's steps and is probed like the others.  {} when sinfo
        does not answer."""
        if not self.nodelist:
            return {}
        out = slurm_call(["sinfo", "-h", "-N", "-n", ",".join(self.nodelist), "-o", "%N %T"])
        down = {}
        for line in out.stdout.splitlines() if out.returncode == 0 else []:
            node, _, state = line.strip().partition(" ")
            if node in self.nodelist and (state.endswith("*") or state.rstrip("*~#!%$@^-+")
                                          in ("down", "fail", "failing")):
                down[node] = f"slurmctld says {state}"
        return down

    def node_answers(self, node: str) -> bool:
        """True when a probe step (``srun -w NODE true`` in the allocation, srun(1)) starts
        and ends on ``node`` within :data:`PROBE_S` seconds."""
        probe = ["srun", f"--jobid={self.job_id}", "--overlap", f"--nodelist={node}", "--nodes=1",
                 "--ntasks=1", "--time=1", "--job-name=vhpc-probe", "true"]
        out, err, rc, killed = self._srun(probe, PROBE_S)
        return rc == 0 and not killed

    def _check_alive(self) -> None:
        if not self.alive():
            raise AllocationLost(
                f"the Slurm allocation {self.job_id} ended under the campaign (cancelled or out "
                f"of time); finished trials are stored: continue with {self.resume_hint}")

    @staticmethod
    def _mpi_ranks(env: Environment, argv: list[str]) -> int:
        """Rank count when ``argv`` is an mpirun command of the native environment, else 0."""
        if (not env.mpi_job_step or not argv or "mpirun" not in argv[0]
                or "mpich" in argv[0]):  # MPICH keeps mpirun (Hydra) inside a single step
            return 0
        if "-np" in argv and program_index(argv) is not None:
            return int(argv[argv.index("-np") + 1])
        return 0

    def _run_mpi(self, ranks: int, argv: list[str], environ: dict[str, str],
                 timeout: float) -> RunResult:
        """An MPI benchmark as its own srun MPI job step (PMIx) over ⌈ranks / ranks_per_node⌉
        nodes (at most the allocation's), bound as mpirun would bind it on one node: each
        rank ``--cpus-per-task`` = the PE count of ``--map-by slot:PE=T``, ``--cpu-bind=cores``
        when the launch binds to cores (srun(1)).  Each rank's node, CPU and mask are read
        back from its ``VHPC-RANK`` line (the kernels add ``node=$SLURMD_NODENAME``)."""
        program = argv[program_index(argv):]  # the launcher's own options dropped
        nodes = max(1, min(-(-ranks // self.ranks_per_node), len(self.nodelist) or 1))
        bind = []
        mapping = argv[argv.index("--map-by") + 1] if "--map-by" in argv else ""
        if "PE=" in mapping:
            bind.append(f"--cpus-per-task={mapping.split('PE=', 1)[1].split(':')[0]}")
        if "--bind-to" in argv and argv[argv.index("--bind-to") + 1] == "core":
            bind.append("--cpu-bind=cores")
        step = ["srun", f"--jobid={self.job_id}", f"--ntasks={ranks}", f"--nodes={nodes}",
                "--mpi=pmix", "--overlap", "--overcommit", *bind,
                f"--job-name={os.path.basename(program[0])}"[:120],  # Slurm's default, named
                f"--time={int(timeout // 60) + 1}",
                "--export=ALL," + ",".join(f"{k}={v}" for k, v in environ.items())
                if environ else "--export=ALL", *program]
        started, t0 = now(), time.monotonic()
        out, err, rc, killed = self._srun(step, timeout)
        result = RunResult(None if killed else rc, out, err, started, time.monotonic() - t0,
                           timed_out=killed)
        if rc != 0:  # failed or timed out: a node that died under the step is named
            self._check_alive()
            note = self._lost_note(err)
            if note:
                why = "timed out" if killed else f"srun exit {rc}: {_tail(err)}"
                result.error = note + f"MPI step failed ({why})"
        result.applied = records.AppliedPlacement(
            launcher=" ".join(["srun --mpi=pmix", f"--nodes={nodes}", *bind]), mpi_ranks=ranks,
            slurm_nodes=nodes)
        step_id = self._last_step()
        return self._account(result, {"job_id": self.job_id, "step_id": step_id,
                                      "node": None})

    def _last_step(self) -> str | None:
        """Id of the allocation's newest step in accounting: the MPI step just run (or a lost-node
        probe run after it).  A finished step reaches slurmdbd a moment later, so this waits
        briefly (10 x 0.3 s) for a step above the last one accounted; the allocation's own row
        stays RUNNING throughout and is not waited for."""
        ids: list[int] = []
        for _ in range(10):
            ids = [int(r["JobID"].split(".", 1)[1]) for r in self.sacct(self.job_id)
                   if "." in r["JobID"] and r["JobID"].split(".", 1)[1].isdigit()]
            if ids and max(ids) > self._step_seen:
                break
            time.sleep(0.3)
        return str(max(ids)) if ids else None

    def _account(self, result: RunResult, slurm: dict[str, Any]) -> RunResult:
        step = f"{self.job_id}.{slurm.get('step_id')}" if slurm.get("step_id") else None
        if step and str(slurm["step_id"]).isdigit():
            self._step_seen = max(self._step_seen, int(slurm["step_id"]))
        rows = self.sacct(step) if step else []
        row = rows[0] if rows else {}
        nodes = row.get("NodeList") or slurm.get("node")
        result.applied = records.extended(
            result.applied, records.AppliedPlacement,
            slurm={"job_id": self.job_id, "step_id": slurm.get("step_id"), "nodes": nodes})
        result.diagnostics = records.extended(
            result.diagnostics, records.Diagnostics,
            sacct=row or {"unavailable": f"no accounting row for {step} (is slurmdbd running?)"})
        return result

    @staticmethod
    def sacct(job: str | None, tries: int = 10) -> list[dict[str, str]]:
        """sacct(1) rows of ``job`` (``J`` or ``J.S``) as dicts of :data:`SACCT_FIELDS`.  For a
        step, retried (``tries`` x 0.3 s) until it is listed and no longer RUNNING or PENDING:
        a finished step reaches slurmdbd a moment later.  A whole job's rows are returned as
        listed (a running allocation's own row stays RUNNING)."""
        if not job:
            return []
        done: list[dict[str, str]] = []
        for attempt in range(tries):
            if attempt:
                time.sleep(0.3)
            out = slurm_call(["sacct", "-n", "-P", "-j", job, "-o", ",".join(SACCT_FIELDS)])
            rows = [dict(zip(SACCT_FIELDS, ln.split("|"))) for ln in out.stdout.splitlines()
                    if ln.strip()]
            if "." not in job:
                return rows
            done = [r for r in rows if r["JobID"] == job]
            if done and all(r["State"] not in ("RUNNING", "PENDING") for r in done):
                return done
        return done

    def fingerprint(self, env: Environment) -> dict[str, Any]:
        """The fingerprint the compute node reported for ``env`` (its first step).  Raises
        EnvError when no step of ``env`` has reported one yet."""
        if env.name not in self._fps:
            raise EnvError(f"{env.name}: no fingerprint from a compute node yet")
        return self._fps[env.name]
