"""SQLite store: campaigns, environments (with fingerprints), trials (raw output kept), samples.

Every planned trial is inserted as ``pending`` when the campaign is created; executing a trial
is one transaction that writes its outcome and samples together, so a killed campaign resumes
from the first trial not ``done``/``failed`` and nothing is lost or duplicated.  Raw stdout and
stderr are kept so samples can be re-derived by a fixed parser without re-running.
"""

from __future__ import annotations

import functools
import json
import math
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from vhpc.core import records
from vhpc.core.metrics import EnvInfo, Observation, ObservationColumns, Sample
from vhpc.core.locks import FileLock, Owner, held
from vhpc.core.records import AppliedPlacement, Diagnostics
from vhpc.storefile import (FLAG, ID, INT, REAL, TEXT, VERSION, Connection, StoreError,
                            check_is_store, column, columns, damaged, describe_sqlite_error,
                            json_column, valid_id)

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS campaigns (
    id TEXT PRIMARY KEY, created REAL NOT NULL, finished REAL, status TEXT NOT NULL,
    command TEXT, spec_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS environments (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id), name TEXT NOT NULL, kind TEXT NOT NULL,
    accel TEXT, fingerprint_json TEXT NOT NULL DEFAULT '{}', PRIMARY KEY (campaign_id, name));
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY, campaign_id TEXT NOT NULL REFERENCES campaigns(id),
    seq INTEGER NOT NULL, round INTEGER NOT NULL, warmup INTEGER NOT NULL,
    environment TEXT NOT NULL, benchmark TEXT NOT NULL, params TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending', attempts INTEGER NOT NULL DEFAULT 0,
    session INTEGER, session_index INTEGER, returncode INTEGER, timed_out INTEGER,
    error TEXT, stdout TEXT, stderr TEXT, started REAL, ended REAL, applied_json TEXT,
    diagnostics_json TEXT, reboot INTEGER NOT NULL DEFAULT 0,
    UNIQUE (campaign_id, seq));
CREATE TABLE IF NOT EXISTS samples (
    id INTEGER PRIMARY KEY, trial_id INTEGER NOT NULL REFERENCES trials(id),
    metric TEXT NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL,
    higher_is_better INTEGER NOT NULL, valid INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS trials_campaign ON trials (campaign_id, status);
CREATE INDEX IF NOT EXISTS samples_trial ON samples (trial_id);
CREATE TABLE IF NOT EXISTS owners (
    campaign_id TEXT PRIMARY KEY REFERENCES campaigns(id), pid INTEGER NOT NULL,
    host TEXT NOT NULL, since REAL NOT NULL);
CREATE TABLE IF NOT EXISTS leftovers (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id), environment TEXT NOT NULL,
    record_json TEXT NOT NULL, PRIMARY KEY (campaign_id, environment));
"""

#: The typed columns of a trial row, read through :func:`vhpc.storefile.column`.
TRIAL_COLUMNS = {"id": (INT, False), "seq": (INT, False), "round": (INT, False),
                 "warmup": (FLAG, False), "environment": (TEXT, False),
                 "benchmark": (TEXT, False), "params": (TEXT, False), "status": (TEXT, False),
                 "session_index": (INT, True), "returncode": (INT, True), "error": (TEXT, True),
                 "stdout": (TEXT, True), "stderr": (TEXT, True), "started": (REAL, True),
                 "ended": (REAL, True), "reboot": (FLAG, False)}
#: The typed columns of a campaign row (``campaigns`` lists id, created, status, command).
CAMPAIGN_COLUMNS = {"id": (ID, False), "created": (REAL, False), "status": (TEXT, False),
                    "command": (TEXT, True)}
#: The typed columns of an environment row (its fingerprint is JSON, :func:`json_column`).
ENV_COLUMNS = {"name": (TEXT, False), "kind": (TEXT, False), "accel": (TEXT, True)}

#: Trial states.  ``done``: ran and parsed (samples may be invalid); ``failed``: did not
#: complete (non-zero exit without result, timeout, guest failure, parse error).
PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"


_F = TypeVar("_F", bound=Callable[..., Any])


def _guard(fn: _F) -> _F:
    """Turn sqlite3 errors raised by a Store method into one-line StoreErrors."""

    @functools.wraps(fn)
    def wrapper(self: "Store", *args: Any, **kw: Any) -> Any:
        try:
            return fn(self, *args, **kw)
        except sqlite3.Error as exc:
            raise describe_sqlite_error(self.path, exc) from None

    return wrapper  # type: ignore[return-value]


@dataclass(frozen=True)
class TrialRow:
    """One trial: planned (``campaign.plan``: id None, status ``pending``) or as stored (see the
    trials table).  ``fresh``: the environment starts a new session (VM reboot) before this
    trial; it follows from the protocol and is set by ``campaign.plan`` only (rows read back
    from the store carry False; the campaign re-derives it from the plan)."""

    id: int | None
    seq: int
    round: int
    warmup: bool
    environment: str
    benchmark: str
    params: str
    status: str = "pending"
    session_index: int | None = None
    returncode: int | None = None
    error: str | None = None
    stdout: str | None = None
    stderr: str | None = None
    started: float | None = None
    ended: float | None = None
    applied: AppliedPlacement | None = None
    diagnostics: Diagnostics | None = None
    reboot: bool = False
    fresh: bool = False


def finite_samples(samples: list[Sample], error: str | None) -> tuple[list[Sample], str | None]:
    """``samples`` without those whose value is not a finite number (a benchmark that printed
    ``nan`` or ``inf``: SQLite would store NaN as NULL, and no statistic holds either), and
    ``error`` with a note naming each dropped metric (the trial still finishes)."""
    def finite(s: Sample) -> bool:
        return isinstance(s.value, (int, float)) and math.isfinite(s.value)

    kept = [s for s in samples if finite(s)]
    if len(kept) == len(samples):
        return samples, error
    dropped = ", ".join(f"{s.metric}={s.value}" for s in samples if not finite(s))
    note = f"not a finite number, sample dropped: {dropped}"
    return kept, f"{error}; {note}" if error else note


class Store:
    """A vhpc database at ``path`` (created with the current schema if missing; safe when
    several processes create it at once).

    Every method raises StoreError (one line naming the file and the fix) instead of a raw
    sqlite3 error: damaged or foreign file, unreadable or read-only store, full disk, and a
    database written by a newer vhpc (schema_version too high).
    """

    def __init__(self, path: str | Path, existing: bool = False):
        """Open (``existing=False``: create if missing) the store at ``path``.  With
        ``existing=True`` (read-only commands: list, report, diff) a missing store is a
        StoreError and nothing is created.  Either way a file that is not a vhpc store (not
        SQLite, or SQLite with tables of its own) is refused before anything is written."""
        self.path = Path(path)
        from vhpc.core.paths import make_private, private_results

        fresh = not self.path.exists()
        self.db: Connection
        shared = Store.check(self.path, existing)
        if shared is not None:  # this process holds the file already: the same connection
            self.db = shared.use(self)
            return
        with private_results():  # a new store and its folder: 0600 / 0700 unless shared
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the results folder {self.path.parent} "
                                 f"({exc.strerror}): pick another --out", "cantopen") from None
            self._open()
        if fresh and self.path.exists():
            make_private(self.path)  # -wal and -shm take the database file's mode

    @staticmethod
    def check(path: Path, existing: bool = False) -> Connection | None:
        """Check, creating nothing, that a store may be opened at ``path``: its folder is a
        folder (or missing), and a file there is a vhpc store (or, with ``existing``, is
        there at all).  Returns this process's connection to the file when it holds one
        already (then the file is not opened again), else None.  Raises StoreError (one
        line).  Commands call it before their preflight, so bad input creates nothing."""
        path = Path(path)
        if path.parent.exists() and not path.parent.is_dir():
            raise StoreError(f"--out {path.parent} is not a folder: pick another --out",
                             "cantopen")
        if not path.exists():
            if existing:
                raise StoreError(f"no vhpc store at {path}: check --out (the folder that "
                                 "holds vhpc.db)", "cantopen")
            return None
        shared = Connection.find(path)
        if shared is None:
            check_is_store(path)  # before our first connection: no descriptor to close
        return shared

    @_guard
    def _open(self) -> None:
        self.db = Connection.connect(self.path).use(self)
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    def _setup(self) -> None:
        """WAL mode, the schema and the version row of a connection just opened."""
        self.db.row_factory = sqlite3.Row
        # Switching a fresh file to WAL needs an exclusive lock, and SQLite answers SQLITE_BUSY
        # at once (no busy handler) when another process is doing the same: retry briefly.
        deadline = time.monotonic() + 30
        while True:
            try:
                mode = self.db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        # WAL + NORMAL: commits survive a kill -9, a power loss may undo the last ones (rerun)
        self.db.execute(f"PRAGMA synchronous={'NORMAL' if str(mode).lower() == 'wal' else 'FULL'}")
        # Schema and version row in one write transaction: two processes creating the same
        # fresh store serialise here instead of both inserting the version row.
        with self.transaction() as db:
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            columns = {r[1] for r in db.execute("PRAGMA table_info(trials)")}
            if "reboot" not in columns:  # stores written before sessions were labelled
                db.execute("ALTER TABLE trials ADD COLUMN reboot INTEGER NOT NULL DEFAULT 0")
            db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                       (str(SCHEMA_VERSION),))
            row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = column(self.path, "meta", "schema_version", "value", row[0], VERSION)
        if version > SCHEMA_VERSION:
            raise StoreError(f"{self.path} has schema version {version}, this vhpc reads up to "
                             f"{SCHEMA_VERSION}: upgrade vhpc")

    def close(self) -> None:
        """Let go of the store; its connection closes with the last Store of the file in
        this process (see :class:`Connection`)."""
        self.db.release(self)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic transaction (BEGIN IMMEDIATE … COMMIT, ROLLBACK on error; SQLite may
        already have rolled back itself, e.g. after SQLITE_FULL)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            if self.db.in_transaction:
                try:
                    self.db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            raise
        self.db.execute("COMMIT")

    # -- ownership ---------------------------------------------------------------------------
    def lock_path(self, cid: str) -> Path:
        """The lock file of campaign ``cid``: ``.owner.lock`` in the campaign's results folder
        (``<out>/<cid>/``, where its report goes).  Raises StoreError when ``cid`` is not a
        campaign id (letters, digits, ``_ . -``)."""
        if not valid_id(cid):  # a folder name under --out, never a path elsewhere
            raise StoreError(f"{cid[:60]!r} is not a campaign id (letters, digits, _ . -): "
                             "give one that 'vhpc list' shows")
        return self.path.parent / cid / ".owner.lock"

    @_guard
    def owner(self, cid: str) -> Owner | None:
        """The process recorded as running ``cid`` (it may be dead: see :meth:`is_owned`)."""
        row = self.db.execute("SELECT pid, host, since FROM owners WHERE campaign_id=?",
                              (cid,)).fetchone()
        if row is None:
            return None
        return Owner(column(self.path, "owners", cid, "pid", row[0], INT),
                     column(self.path, "owners", cid, "host", row[1], TEXT),
                     column(self.path, "owners", cid, "since", row[2], REAL))

    def is_owned(self, cid: str) -> bool:
        """True while a live process holds campaign ``cid``'s lock."""
        return held(self.lock_path(cid))

    def _owned_error(self, cid: str) -> StoreError:
        who = self.owner(cid)
        return StoreError(f"campaign {cid} is being run by "
                          f"{who.describe() if who else 'another process'}: wait for it to "
                          f"end, or stop it (kill {who.pid if who else 'PID'}) and resume",
                          "owned")

    def check_not_owned(self, cid: str) -> None:
        """Raise StoreError naming the owner when a live process runs campaign ``cid``."""
        if self.is_owned(cid):
            raise self._owned_error(cid)

    @contextmanager
    def own(self, cid: str, on_takeover: Callable[[Owner], None] | None = None) -> Iterator[Owner]:
        """Hold campaign ``cid`` for this process: an exclusive flock on :meth:`lock_path`
        (released by the kernel however the process ends) and the owner row (pid, host, start).

        Raises StoreError (kind ``owned``) naming the owner when a live process holds it.  A
        lock left by a dead owner is taken over and ``on_takeover`` is called with that owner.
        """
        lock = FileLock(self.lock_path(cid))
        try:
            from vhpc.core.paths import sharing

            lock.path.parent.mkdir(exist_ok=True, mode=0o777 if sharing() else 0o700)
            got = lock.acquire()
        except OSError as exc:
            raise StoreError(f"cannot create the lock {lock.path} ({exc.strerror}): make "
                             f"{self.path.parent} writable or pick another --out",
                             "readonly") from None
        if not got:
            raise self._owned_error(cid)
        try:
            previous = self.owner(cid)
            me = Owner.me()
            self._set_owner(cid, me)
            if previous is not None and on_takeover is not None:
                on_takeover(previous)
            yield me
        finally:
            try:
                self._set_owner(cid, None)
            except StoreError:
                pass  # e.g. a full disk: the flock below is what tells owners apart
            lock.release()

    @_guard
    def _set_owner(self, cid: str, owner: Owner | None) -> None:
        if owner is None:
            self.db.execute("DELETE FROM owners WHERE campaign_id=?", (cid,))
        else:
            self.db.execute("INSERT OR REPLACE INTO owners VALUES (?, ?, ?, ?)",
                            (cid, owner.pid, owner.host, owner.since))

    # -- what a killed run may leave elsewhere (remote trials, connections) ------------------
    @_guard
    def set_leftover(self, cid: str, environment: str, record: dict[str, Any]) -> None:
        """Record what the next start of ``cid`` must clean up if this run dies (an ssh
        environment's connection and trial tag); cleared by :meth:`clear_leftover`."""
        self.db.execute("INSERT OR REPLACE INTO leftovers VALUES (?, ?, ?)",
                        (cid, environment, json.dumps(record)))

    @_guard
    def clear_leftover(self, cid: str, environment: str) -> None:
        """Forget the record of ``environment`` (it closed normally, or was cleaned up)."""
        self.db.execute("DELETE FROM leftovers WHERE campaign_id=? AND environment=?",
                        (cid, environment))

    @_guard
    def leftovers(self, cid: str) -> dict[str, dict[str, Any]]:
        """Environment name → record left by an earlier run of ``cid`` that did not end."""
        return {r[0]: json_column(self.path, "leftovers", f"{cid}/{r[0]}", "record_json", r[1])
                for r in self.db.execute("SELECT environment, record_json FROM leftovers "
                                         "WHERE campaign_id=?", (cid,))}

    def _live_status(self, cid: str, status: str) -> str:
        """``running`` only while a process holds the campaign; else ``interrupted``."""
        return "interrupted" if status == "running" and not self.is_owned(cid) else status

    # -- campaigns -----------------------------------------------------------------------
    @_guard
    def create_campaign(self, cid: str, spec_json: str, command: str,
                        trials: list[dict[str, Any]], environments: list[dict[str, Any]]) -> None:
        """Insert a campaign with all its planned trials (status pending) in one transaction.

        trials: dicts with seq, round, warmup, environment, benchmark, params;
        environments: dicts with name, kind.
        """
        with self.transaction() as db:
            db.execute("INSERT INTO campaigns (id, created, status, command, spec_json) "
                       "VALUES (?, ?, 'running', ?, ?)", (cid, time.time(), command, spec_json))
            db.executemany("INSERT INTO environments (campaign_id, name, kind) VALUES (?, ?, ?)",
                           [(cid, e["name"], e["kind"]) for e in environments])
            self._insert_trials(db, cid, trials)

    @staticmethod
    def _insert_trials(db: sqlite3.Connection, cid: str, trials: list[dict[str, Any]]) -> None:
        db.executemany(
            "INSERT INTO trials (campaign_id, seq, round, warmup, environment, benchmark, params)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(cid, t["seq"], t["round"], int(t["warmup"]), t["environment"], t["benchmark"],
              t["params"]) for t in trials])

    @_guard
    def add_trials(self, cid: str, trials: list[dict[str, Any]]) -> list[TrialRow]:
        """Append planned trials (an extra round of an adaptive campaign) in one transaction;
        returns them as stored, pending."""
        with self.transaction() as db:
            self._insert_trials(db, cid, trials)
        seqs = {t["seq"] for t in trials}
        return [t for t in self.unfinished(cid) if t.seq in seqs]

    @_guard
    def campaign(self, cid: str) -> dict[str, Any]:
        """The campaign row as a dict (spec decoded).  Raises StoreError for an unknown id."""
        row = self.db.execute("SELECT * FROM campaigns WHERE id=?", (cid,)).fetchone()
        if row is None:
            known = [r[0] for r in self.db.execute(
                "SELECT id FROM campaigns ORDER BY created DESC LIMIT 5") if valid_id(r[0])]
            hint = f" (recent: {', '.join(known)})" if known else " (the store has no campaigns)"
            raise StoreError(f"no campaign {cid!r} in {self.path}{hint}")
        out = dict(row)
        out.update(columns(self.path, "campaigns", cid, row, CAMPAIGN_COLUMNS))
        out["finished"] = column(self.path, "campaigns", cid, "finished", row["finished"], REAL,
                                 null=True)
        spec = json_column(self.path, "campaigns", cid, "spec_json", out.pop("spec_json"))
        for key, kind in (("baseline", str), ("environments", list), ("benchmarks", list)):
            if key == "baseline" and key not in spec:
                continue  # older vhpc wrote no baseline: the spec's default applies
            if not isinstance(spec.get(key), kind):
                raise damaged(self.path, "campaigns", cid, f"spec_json has no valid {key!r}")
        out["spec"] = spec
        out["status"] = self._live_status(cid, out["status"])
        return out

    @_guard
    def campaigns(self) -> list[dict[str, Any]]:
        """All campaigns, newest first, with trial counts per status and the study a campaign
        ran (``study``: its spec's field, None for other campaigns)."""
        rows = self.db.execute(
            "SELECT c.id, c.created, c.status, c.command, "
            " CASE WHEN json_valid(c.spec_json) THEN json_extract(c.spec_json, '$.study') END "
            " AS study, "
            " SUM(t.status='done') AS done, SUM(t.status='failed') AS failed, COUNT(t.id) AS total "
            "FROM campaigns c LEFT JOIN trials t ON t.campaign_id=c.id "
            "GROUP BY c.id ORDER BY c.created DESC").fetchall()
        out = []
        for r in rows:
            c = columns(self.path, "campaigns", r["id"], r, CAMPAIGN_COLUMNS)
            counts = {k: column(self.path, "campaigns", c["id"], k, r[k], INT, null=True)
                      for k in ("done", "failed", "total")}
            study = column(self.path, "campaigns", c["id"], "study", r["study"], TEXT, null=True)
            out.append(dict(c, **counts, study=study,
                            status=self._live_status(c["id"], c["status"])))
        return out

    @_guard
    def set_campaign_status(self, cid: str, status: str) -> None:
        """``running``, ``interrupted`` (resumable) or ``finished`` (sets the end time)."""
        self.db.execute("UPDATE campaigns SET status=?, finished=? WHERE id=?",
                        (status, time.time() if status == "finished" else None, cid))

    @_guard
    def set_fingerprint(self, cid: str, name: str, accel: str | None, fp: dict[str, Any]) -> None:
        """Record environment ``name`` of campaign ``cid``: its accelerator (``kvm``/``tcg``, None
        natively) and fingerprint ``fp`` (stored as JSON).  Raises StoreError when the store cannot
        be written."""
        self.db.execute("UPDATE environments SET accel=?, fingerprint_json=? "
                        "WHERE campaign_id=? AND name=?", (accel, json.dumps(fp), cid, name))

    @_guard
    def environments(self, cid: str) -> dict[str, EnvInfo]:
        """Environments of a campaign keyed by name."""
        out = {}
        for r in self.db.execute("SELECT * FROM environments WHERE campaign_id=?", (cid,)):
            where = f"{cid}/{str(r['name'])[:40]}"
            c = columns(self.path, "environments", where, r, ENV_COLUMNS)
            out[c["name"]] = EnvInfo(c["name"], c["kind"], c["accel"], json_column(
                self.path, "environments", where, "fingerprint_json", r["fingerprint_json"]))
        return out

    # -- trials ----------------------------------------------------------------------------
    def _row(self, r: sqlite3.Row) -> TrialRow:
        c = columns(self.path, "trials", r["id"], r, TRIAL_COLUMNS)
        if c["status"] not in (PENDING, RUNNING, DONE, FAILED):
            raise damaged(self.path, "trials", r["id"], f"status {str(c['status'])[:20]!r} is "
                          "not pending, running, done or failed")
        return TrialRow(c["id"], c["seq"], c["round"], c["warmup"], c["environment"],
                        c["benchmark"], c["params"], c["status"], c["session_index"],
                        c["returncode"], c["error"], c["stdout"], c["stderr"], c["started"],
                        c["ended"], *self._records(r), c["reboot"])

    def _records(self, r: sqlite3.Row) -> tuple:
        """(applied placement, diagnostics) records of a trial row (records.py, versioned)."""
        try:
            return (records.load_applied(r["applied_json"]),
                    records.load_diagnostics(r["diagnostics_json"]))
        except records.RecordError as exc:
            raise StoreError(f"{self.path}, trial {r['id']}: {exc}") from None

    @_guard
    def trials(self, cid: str, status: str | None = None) -> list[TrialRow]:
        """Trials of a campaign in plan order, optionally only those with ``status``."""
        q = "SELECT * FROM trials WHERE campaign_id=?"
        args: list[Any] = [cid]
        if status:
            q += " AND status=?"
            args.append(status)
        return [self._row(r) for r in self.db.execute(q + " ORDER BY seq", args)]

    @_guard
    def unfinished(self, cid: str) -> list[TrialRow]:
        """Trials still to run (pending, or running when a previous run was killed)."""
        return [self._row(r) for r in self.db.execute(
            "SELECT * FROM trials WHERE campaign_id=? AND status IN ('pending','running') "
            "ORDER BY seq", (cid,))]

    @_guard
    def attempted_environments(self, cid: str) -> set[str]:
        """Environments of ``cid`` in which some trial was started already (by any run)."""
        return {r[0] for r in self.db.execute(
            "SELECT DISTINCT environment FROM trials WHERE campaign_id=? AND attempts>0", (cid,))}

    @_guard
    def mark_running(self, trial_id: int) -> None:
        """Mark trial ``trial_id`` running and count one more attempt.  Raises StoreError when the
        store cannot be written."""
        self.db.execute("UPDATE trials SET status='running', attempts=attempts+1 WHERE id=?",
                        (trial_id,))

    @_guard
    def finish_trial(self, trial_id: int, status: str, *, returncode: int | None,
                     timed_out: bool, error: str | None, stdout: str, stderr: str,
                     started: float, ended: float, session_index: int | None,
                     applied: AppliedPlacement | None, samples: list[Sample],
                     diagnostics: Diagnostics | None = None, reboot: bool = False) -> None:
        """Write one trial's outcome, diagnostics and samples in a single transaction
        (records as versioned JSON, :func:`vhpc.core.records.dump`).

        ``reboot``: the trial was the first of its benchmark in a VM session the plan did not
        ask for (a resume after a kill, a guest that died): it is stored and analysed as a
        warm-up (see :meth:`observations`)."""
        samples, error = finite_samples(samples, error)
        with self.transaction() as db:
            db.execute("DELETE FROM samples WHERE trial_id=?", (trial_id,))
            db.execute(
                "UPDATE trials SET status=?, returncode=?, timed_out=?, error=?, stdout=?, "
                "stderr=?, started=?, ended=?, session_index=?, applied_json=?, diagnostics_json=?, "
                "reboot=? WHERE id=?",
                (status, returncode, int(timed_out), error, stdout, stderr, started, ended,
                 session_index, records.dump(applied), records.dump(diagnostics), int(reboot),
                 trial_id))
            db.executemany(
                "INSERT INTO samples (trial_id, metric, value, unit, higher_is_better, valid) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(trial_id, s.metric, s.value, s.unit, int(s.higher_is_better), int(s.valid))
                 for s in samples])

    @_guard
    def replace_samples(self, trial_id: int, status: str, samples: list[Sample],
                        error: str | None) -> None:
        """Re-derived samples for a stored trial (re-parse), one transaction."""
        samples, error = finite_samples(samples, error)
        with self.transaction() as db:
            db.execute("DELETE FROM samples WHERE trial_id=?", (trial_id,))
            db.execute("UPDATE trials SET status=?, error=? WHERE id=?", (status, error, trial_id))
            db.executemany(
                "INSERT INTO samples (trial_id, metric, value, unit, higher_is_better, valid) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(trial_id, s.metric, s.value, s.unit, int(s.higher_is_better), int(s.valid))
                 for s in samples])

    @_guard
    def durations(self, limit: int = 5000) -> dict[tuple[str, str, str], float]:
        """Mean run time in seconds of the newest ``limit`` finished trials of every campaign,
        per (benchmark, parameters, environment), for time estimates."""
        out: dict[tuple[str, str, str], list[float]] = {}
        for r in self.db.execute("SELECT * FROM trials WHERE status='done' AND started IS NOT "
                                 "NULL AND ended IS NOT NULL ORDER BY id DESC LIMIT ?", (limit,)):
            t = self._row(r)
            out.setdefault((t.benchmark, t.params, t.environment), []).append(
                t.ended - t.started)  # type: ignore[operator]
        return {k: sum(v) / len(v) for k, v in out.items()}

    #: the stored sample of each observation and its trial, as :meth:`observations` reads them
    _OBSERVED = (
        "SELECT t.environment, t.benchmark, t.params, s.metric, s.unit, s.higher_is_better, "
        "s.value, s.valid, t.warmup OR t.reboot, t.id, t.round, t.session_index, s.id "
        "FROM samples s JOIN trials t ON s.trial_id=t.id WHERE t.campaign_id=? ")

    @_guard
    def observation_columns(self, cid: str) -> ObservationColumns:
        """:meth:`observations` as numpy columns (:class:`ObservationColumns`), for the
        analysis: the same rows, order and checks, with no Python object per sample.  Raises
        StoreError (a damaged store, :func:`vhpc.storefile.damaged`) for a value that is not a
        number or a name that is not text."""
        bad = self.db.execute(
            self._OBSERVED + "AND (typeof(s.value) NOT IN ('integer', 'real') OR "
            "typeof(t.environment) != 'text' OR typeof(t.benchmark) != 'text' OR "
            "typeof(t.params) != 'text' OR typeof(s.metric) != 'text' OR "
            "typeof(s.unit) != 'text') ORDER BY t.seq, s.id LIMIT 1", (cid,)).fetchone()
        if bad is not None:
            if not isinstance(bad[6], (int, float)):
                raise damaged(self.path, "samples", bad[12], f"value {str(bad[6])[:40]!r} is "
                              "not a number")
            raise damaged(self.path, "samples", bad[12], "has a name that is not text")
        rows = self.db.execute(self._OBSERVED + "ORDER BY t.seq, s.id", (cid,)).fetchall()
        return ObservationColumns.from_columns(list(zip(*rows))[:12] if rows
                                               else [[] for _ in range(12)])

    @_guard
    def observations(self, cid: str) -> list[Observation]:
        """Every stored sample of a campaign with its context, for the analysis room.

        A ``reboot`` trial (first after an unplanned VM boot) is handed over as a warm-up: the
        protocol's warm-up absorbs a boot's cold start, so it is kept out of the statistics
        instead of forming a cold group of one in a ``warm`` campaign (docs/campaigns.md).

        Raises StoreError (a damaged store) when a sample's value is not a number or its names
        are not text."""
        rows = self.db.execute(self._OBSERVED + "ORDER BY t.seq, s.id", (cid,))
        out = []
        for r in rows:
            if isinstance(r[6], bool) or not isinstance(r[6], (int, float)):
                raise damaged(self.path, "samples", r[12], f"value {str(r[6])[:40]!r} is not "
                              "a number")
            if not all(isinstance(r[i], str) for i in (0, 1, 2, 3, 4)):
                raise damaged(self.path, "samples", r[12], "has a name that is not text")
            out.append(Observation(r[0], r[1], r[2], r[3], r[4], bool(r[5]), float(r[6]),
                                   bool(r[7]), bool(r[8]), r[9], r[10], r[11]))
        return out
