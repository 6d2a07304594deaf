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
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

from pydantic import Field, field_validator

from vhpc.core import records
from vhpc.environments.base import Environment, EnvError, RunResult, now
from vhpc.environments.vcluster.environment import program_index
from vhpc.executors.base import EXECUTORS, Executor, ExecutorOptions
from vhpc.executors.slurm.step import MARK, encode

#: Seconds a trial's step may take beyond the trial timeout (environment start: a VM boot).
STEP_MARGIN = 240.0
SACCT_FIELDS = ("JobID", "JobName", "NodeList", "NTasks", "Elapsed", "TotalCPU", "MaxRSS", "State",
                "ExitCode")


class AllocationLost(EnvError):
    """The Slurm allocation ended while the campaign ran (cancelled or out of time)."""


def _tail(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


class SlurmOptions(ExecutorOptions):
    """``--executor slurm:...`` options, passed to salloc(1) as ``--partition --nodes --time
    --account`` (unset: the cluster's defaults).  ``nodes`` is a count in ASCII digits."""

    partition: str | None = Field(None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    nodes: int | None = Field(None, ge=1, le=100_000)
    time: str | None = Field(None, min_length=1, max_length=32, pattern=r"^[0-9:-]+$")
    account: str | None = Field(None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")

    @field_validator("nodes", mode="before")
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

    def __init__(self, campaign_id: str = "", options: SlurmOptions | None = None):
        options = options or SlurmOptions()
        super().__init__(campaign_id, options)
        self.job_name = f"vhpc-{campaign_id}" if campaign_id else "vhpc"
        self.partition, self.time, self.account = options.partition, options.time, options.account
        self.nodes = options.nodes
        self.job_id: str | None = None
        self.nodelist: list[str] = []
        self.cpus_per_node = 1
        self._fps: dict[str, dict[str, Any]] = {}

    # -- allocation ------------------------------------------------------------------------
    def salloc_argv(self) -> list[str]:
        """The salloc(1) command that requests the allocation."""
        argv = ["salloc", "--no-shell", "--exclusive", f"--job-name={self.job_name}"]
        for flag, value in (("--partition", self.partition), ("--nodes", self.nodes),
                            ("--time", self.time), ("--account", self.account)):
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
        out = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True,
                             stdin=subprocess.DEVNULL)
        if out.returncode != 0:
            raise EnvError(f"Slurm does not answer ({_tail(out.stderr) or 'sinfo failed'}): set "
                           "SLURM_CONF to the cluster's slurm.conf, or use --executor local")
        if self.partition and self.partition not in out.stdout.replace("*", "").split():
            raise EnvError(f"executor slurm: no partition {self.partition!r} (partitions: "
                           f"{', '.join(out.stdout.replace('*', '').split())})")

    def __enter__(self):
        self.preflight()
        out = subprocess.run(self.salloc_argv(), capture_output=True, text=True,
                             stdin=subprocess.DEVNULL)
        m = re.search(r"Granted job allocation (\d+)", out.stderr)
        if out.returncode != 0 or not m:
            raise EnvError(f"Slurm refused the allocation ({_tail(out.stderr) or 'salloc failed'}):"
                           " check partition=, nodes=, time=, account= and 'sinfo'")
        self.job_id = m.group(1)
        nodes, _, cpus = subprocess.run(["squeue", "-h", "-j", self.job_id, "-o", "%N %C"],
                                        capture_output=True, text=True).stdout.strip().partition(" ")
        self.nodelist = subprocess.run(["scontrol", "show", "hostnames", nodes],
                                       capture_output=True, text=True).stdout.split()
        # whole nodes (--exclusive): a trial's step gets every CPU of its node
        self.cpus_per_node = max(1, int(cpus or 1) // max(1, len(self.nodelist)))
        return self

    def __exit__(self, *exc):
        if self.job_id:
            subprocess.run(["scancel", self.job_id], capture_output=True)
        return False

    def alive(self) -> bool:
        """True while the allocation is running (squeue(1) state RUNNING)."""
        out = subprocess.run(["squeue", "-h", "-j", str(self.job_id), "-o", "%T"],
                             capture_output=True, text=True)
        return out.stdout.strip() == "RUNNING"

    # -- trials ----------------------------------------------------------------------------
    def run(self, env: Environment, env_spec: Any, argv: list[str], environ: dict[str, str],
            timeout: float, key: str) -> RunResult:
        """Run one trial as a job step; never raises for a failing command.  Raises
        AllocationLost when the allocation is gone (the trial stays unfinished)."""
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
                             error=f"slurm step failed ({why})")
        data = json.loads(line[len(MARK):])
        fields = data["result"]
        fields.update(applied=records.load_applied(fields["applied"]),
                      diagnostics=records.load_diagnostics(fields["diagnostics"]))
        result = RunResult(**fields)
        if "fingerprint" in data:
            self._fps[env.name] = {**data["fingerprint"], "slurm_node": data["slurm"]["node"],
                                   "slurm_job": self.job_id}
        return self._account(result, data["slurm"])

    def _srun(self, argv: list[str], limit: float) -> tuple[str, str, int | None, bool]:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True)
        try:
            out, err = proc.communicate(timeout=limit)
            return out, err, proc.returncode, False
        except subprocess.TimeoutExpired:
            killed = True
        except BaseException:
            self._stop(proc)
            raise
        self._stop(proc)
        out, err = proc.communicate()
        return out, err, None, killed

    @staticmethod
    def _stop(proc: subprocess.Popen) -> None:
        # two SIGINTs within a second make srun cancel its step (srun(1), SIGNALS)
        for _ in range(2):
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                time.sleep(0.3)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _check_alive(self) -> None:
        if not self.alive():
            raise AllocationLost(
                f"the Slurm allocation {self.job_id} ended under the campaign (cancelled or out "
                f"of time); finished trials are stored: continue with vhpc compare --resume "
                f"{self.campaign_id or 'ID'}")

    @staticmethod
    def _mpi_ranks(env: Environment, argv: list[str]) -> int:
        """Rank count when ``argv`` is an mpirun command of the native environment, else 0."""
        if (getattr(env, "kind", "") != "native" or not argv or "mpirun" not in argv[0]
                or "mpich" in argv[0]):  # MPICH keeps mpirun (Hydra) inside a single step
            return 0
        if "-np" in argv and program_index(argv) is not None:
            return int(argv[argv.index("-np") + 1])
        return 0

    def _run_mpi(self, ranks: int, argv: list[str], environ: dict[str, str],
                 timeout: float) -> RunResult:
        """An MPI benchmark as its own srun MPI job step (PMIx) over up to ``nodes`` nodes."""
        program = argv[program_index(argv):]  # the launcher's own options dropped
        nodes = max(1, min(ranks, len(self.nodelist) or 1))
        step = ["srun", f"--jobid={self.job_id}", f"--ntasks={ranks}", f"--nodes={nodes}",
                "--mpi=pmix", "--overlap", "--overcommit", f"--time={int(timeout // 60) + 1}",
                "--export=ALL," + ",".join(f"{k}={v}" for k, v in environ.items())
                if environ else "--export=ALL", *program]
        started, t0 = now(), time.monotonic()
        out, err, rc, killed = self._srun(step, timeout)
        result = RunResult(None if killed else rc, out, err, started, time.monotonic() - t0,
                           timed_out=killed)
        if rc not in (0, None) and not killed:
            self._check_alive()
        result.applied = records.AppliedPlacement(launcher="srun --mpi=pmix", ranks=ranks,
                                                  nodes=nodes)
        step_id = self._last_step()
        return self._account(result, {"job_id": self.job_id, "step_id": step_id,
                                      "node": None})

    def _last_step(self) -> str | None:
        rows = self.sacct(self.job_id)
        steps = [r["JobID"].split(".", 1)[1] for r in rows
                 if "." in r["JobID"] and r["JobID"].split(".", 1)[1].isdigit()]
        return max(steps, key=int) if steps else None

    def _account(self, result: RunResult, slurm: dict[str, Any]) -> RunResult:
        step = f"{self.job_id}.{slurm.get('step_id')}" if slurm.get("step_id") else None
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
        """sacct(1) rows of ``job`` (``J`` or ``J.S``) as dicts of :data:`SACCT_FIELDS`; retried
        briefly because a finished step reaches slurmdbd a moment later."""
        if not job:
            return []
        for _ in range(tries):
            out = subprocess.run(["sacct", "-n", "-P", "-j", job, "-o", ",".join(SACCT_FIELDS)],
                                 capture_output=True, text=True)
            rows = [dict(zip(SACCT_FIELDS, ln.split("|"))) for ln in out.stdout.splitlines()
                    if ln.strip()]
            done = [r for r in rows if r["JobID"] == job or "." not in job]
            if done and all(r["State"] not in ("RUNNING", "PENDING") for r in done):
                return done
            time.sleep(0.3)
        return done

    def fingerprint(self, env: Environment) -> dict[str, Any]:
        """The fingerprint the compute node reported for ``env`` (its first step).  Raises
        EnvError when no step of ``env`` has reported one yet."""
        if env.name not in self._fps:
            raise EnvError(f"{env.name}: no fingerprint from a compute node yet")
        return self._fps[env.name]
