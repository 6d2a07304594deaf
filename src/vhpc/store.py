"""SQLite store: campaigns, environments (with fingerprints), trials (raw output kept), samples.

Every planned trial is inserted as ``pending`` when the campaign is created; executing a trial
is one transaction that writes its outcome and samples together, so a killed campaign resumes
from the first trial not ``done``/``failed`` and nothing is lost or duplicated.  Raw stdout and
stderr are kept so samples can be re-derived by a fixed parser without re-running.
"""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from vhpc.errors import VhpcError
from vhpc.model import EnvInfo, Observation, Sample

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
    diagnostics_json TEXT,
    UNIQUE (campaign_id, seq));
CREATE TABLE IF NOT EXISTS samples (
    id INTEGER PRIMARY KEY, trial_id INTEGER NOT NULL REFERENCES trials(id),
    metric TEXT NOT NULL, value REAL NOT NULL, unit TEXT NOT NULL,
    higher_is_better INTEGER NOT NULL, valid INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS trials_campaign ON trials (campaign_id, status);
CREATE INDEX IF NOT EXISTS samples_trial ON samples (trial_id);
"""

#: Trial states.  ``done``: ran and parsed (samples may be invalid); ``failed``: did not
#: complete (non-zero exit without result, timeout, guest failure, parse error).
PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"


class StoreError(VhpcError, RuntimeError):
    """The database cannot be used (unknown campaign id, newer schema)."""


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
    applied: dict[str, Any] | None = None
    diagnostics: dict[str, Any] | None = None
    fresh: bool = False


class Store:
    """A vhpc database at ``path`` (created with the current schema if missing).

    Raises StoreError if the file was written by a newer vhpc (schema_version too high).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) > SCHEMA_VERSION:
            raise StoreError(f"{self.path} has schema version {row[0]}, this vhpc reads up to "
                             f"{SCHEMA_VERSION}: upgrade vhpc")

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic transaction (BEGIN IMMEDIATE … COMMIT, ROLLBACK on error)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # -- campaigns -----------------------------------------------------------------------
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

    def add_trials(self, cid: str, trials: list[dict[str, Any]]) -> list[TrialRow]:
        """Append planned trials (an extra round of an adaptive campaign) in one transaction;
        returns them as stored, pending."""
        with self.transaction() as db:
            self._insert_trials(db, cid, trials)
        seqs = {t["seq"] for t in trials}
        return [t for t in self.unfinished(cid) if t.seq in seqs]

    def campaign(self, cid: str) -> dict[str, Any]:
        """The campaign row as a dict (spec decoded).  Raises StoreError for an unknown id."""
        row = self.db.execute("SELECT * FROM campaigns WHERE id=?", (cid,)).fetchone()
        if row is None:
            known = [r[0] for r in self.db.execute(
                "SELECT id FROM campaigns ORDER BY created DESC LIMIT 5")]
            hint = f" (recent: {', '.join(known)})" if known else " (the store has no campaigns)"
            raise StoreError(f"no campaign {cid!r} in {self.path}{hint}")
        out = dict(row)
        out["spec"] = json.loads(out.pop("spec_json"))
        return out

    def campaigns(self) -> list[dict[str, Any]]:
        """All campaigns, newest first, with trial counts per status."""
        rows = self.db.execute(
            "SELECT c.id, c.created, c.status, c.command, "
            " SUM(t.status='done') AS done, SUM(t.status='failed') AS failed, COUNT(t.id) AS total "
            "FROM campaigns c LEFT JOIN trials t ON t.campaign_id=c.id "
            "GROUP BY c.id ORDER BY c.created DESC").fetchall()
        return [dict(r) for r in rows]

    def set_campaign_status(self, cid: str, status: str) -> None:
        self.db.execute("UPDATE campaigns SET status=?, finished=? WHERE id=?",
                        (status, time.time() if status == "finished" else None, cid))

    def set_fingerprint(self, cid: str, name: str, accel: str | None, fp: dict[str, Any]) -> None:
        self.db.execute("UPDATE environments SET accel=?, fingerprint_json=? "
                        "WHERE campaign_id=? AND name=?", (accel, json.dumps(fp), cid, name))

    def environments(self, cid: str) -> dict[str, EnvInfo]:
        """Environments of a campaign keyed by name."""
        return {r["name"]: EnvInfo(r["name"], r["kind"], r["accel"], json.loads(r["fingerprint_json"]))
                for r in self.db.execute("SELECT * FROM environments WHERE campaign_id=?", (cid,))}

    # -- trials ----------------------------------------------------------------------------
    def _row(self, r: sqlite3.Row) -> TrialRow:
        return TrialRow(r["id"], r["seq"], r["round"], bool(r["warmup"]), r["environment"],
                        r["benchmark"], r["params"], r["status"], r["session_index"],
                        r["returncode"], r["error"], r["stdout"], r["stderr"], r["started"],
                        r["ended"], json.loads(r["applied_json"]) if r["applied_json"] else None,
                        json.loads(r["diagnostics_json"]) if r["diagnostics_json"] else None)

    def trials(self, cid: str, status: str | None = None) -> list[TrialRow]:
        """Trials of a campaign in plan order, optionally only those with ``status``."""
        q = "SELECT * FROM trials WHERE campaign_id=?"
        args: list[Any] = [cid]
        if status:
            q += " AND status=?"
            args.append(status)
        return [self._row(r) for r in self.db.execute(q + " ORDER BY seq", args)]

    def unfinished(self, cid: str) -> list[TrialRow]:
        """Trials still to run (pending, or running when a previous run was killed)."""
        return [self._row(r) for r in self.db.execute(
            "SELECT * FROM trials WHERE campaign_id=? AND status IN ('pending','running') "
            "ORDER BY seq", (cid,))]

    def mark_running(self, trial_id: int) -> None:
        self.db.execute("UPDATE trials SET status='running', attempts=attempts+1 WHERE id=?",
                        (trial_id,))

    def finish_trial(self, trial_id: int, status: str, *, returncode: int | None,
                     timed_out: bool, error: str | None, stdout: str, stderr: str,
                     started: float, ended: float, session_index: int | None,
                     applied: dict[str, Any] | None, samples: list[Sample],
                     diagnostics: dict[str, Any] | None = None) -> None:
        """Write one trial's outcome, diagnostics and samples in a single transaction."""
        with self.transaction() as db:
            db.execute("DELETE FROM samples WHERE trial_id=?", (trial_id,))
            db.execute(
                "UPDATE trials SET status=?, returncode=?, timed_out=?, error=?, stdout=?, "
                "stderr=?, started=?, ended=?, session_index=?, applied_json=?, diagnostics_json=? "
                "WHERE id=?",
                (status, returncode, int(timed_out), error, stdout, stderr, started, ended,
                 session_index, json.dumps(applied) if applied is not None else None,
                 json.dumps(diagnostics) if diagnostics else None, trial_id))
            db.executemany(
                "INSERT INTO samples (trial_id, metric, value, unit, higher_is_better, valid) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(trial_id, s.metric, s.value, s.unit, int(s.higher_is_better), int(s.valid))
                 for s in samples])

    def replace_samples(self, trial_id: int, status: str, samples: list[Sample],
                        error: str | None) -> None:
        """Re-derived samples for a stored trial (re-parse), one transaction."""
        with self.transaction() as db:
            db.execute("DELETE FROM samples WHERE trial_id=?", (trial_id,))
            db.execute("UPDATE trials SET status=?, error=? WHERE id=?", (status, error, trial_id))
            db.executemany(
                "INSERT INTO samples (trial_id, metric, value, unit, higher_is_better, valid) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(trial_id, s.metric, s.value, s.unit, int(s.higher_is_better), int(s.valid))
                 for s in samples])

    def observations(self, cid: str) -> list[Observation]:
        """Every stored sample of a campaign with its context, for the analysis room."""
        rows = self.db.execute(
            "SELECT t.environment, t.benchmark, t.params, s.metric, s.unit, s.higher_is_better, "
            "s.value, s.valid, t.warmup, t.id, t.round, t.session_index "
            "FROM samples s JOIN trials t ON s.trial_id=t.id WHERE t.campaign_id=? "
            "ORDER BY t.seq, s.id", (cid,))
        return [Observation(r[0], r[1], r[2], r[3], r[4], bool(r[5]), r[6], bool(r[7]),
                            bool(r[8]), r[9], r[10], r[11]) for r in rows]
