"""Liveness and figures: worker heartbeats, the engine each worker runs, tallies, and the task
figures /metrics shows."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlite_utils import Database

from docshift.contract import Status
from docshift.storage.connection import Row, first, iso, now, parse, select


def heartbeat(db: Database, name: str = "worker", at: datetime | None = None) -> None:
    db.table("heartbeats").upsert({"name": name, "beat_at": iso(at or now())}, pk="name")


def last_heartbeat(db: Database, name: str = "worker") -> datetime | None:
    row = first(db, "SELECT beat_at FROM heartbeats WHERE name = ?", [name])
    return parse(row["beat_at"]) if row else None


def report_engine(db: Database, worker: str, sandbox: str, state: str, detail: str | None = None) -> None:
    """Record what worker process ``worker`` runs LibreOffice with ("on"/"off") and its state
    ("starting", "ok", "broken" with ``detail``); refreshed with the heartbeat."""
    db.table("engines").upsert({"worker": worker, "sandbox": sandbox, "state": state, "detail": detail,
                          "updated_at": iso(now())}, pk="worker")


def forget_engine(db: Database, worker: str) -> None:
    """A worker process stopping: its report goes with it (its successor's is the one to show)."""
    db.execute("DELETE FROM engines WHERE worker = ?", [worker])


def engine_reports(db: Database, since: datetime) -> list[Row]:
    """The engine rows of worker processes that reported after ``since``."""
    return select(db, "SELECT * FROM engines WHERE updated_at >= ? ORDER BY worker", [iso(since)])


def add_tally(db: Database, name: str, amount: int = 1) -> None:
    db.execute("INSERT INTO tallies (name, value) VALUES (?, ?) "
               "ON CONFLICT (name) DO UPDATE SET value = value + excluded.value", [name, amount])


def tally(db: Database, name: str) -> int:
    row = first(db, "SELECT value FROM tallies WHERE name = ?", [name])
    return row["value"] if row else 0


def task_metrics(db: Database, buckets: Sequence[float]) -> dict[str, Any]:
    """Figures for /metrics: tasks by (type, state), queue depth, the histogram of seconds from
    claim to final state (cumulative ``(le, count)`` pairs ending with +Inf, and the sum), LibreOffice
    restarts, and the runs stopped for another account's waiting file (``tasks.to_preempt``)."""
    tasks = {(row["source_type"], row["status"]): row["n"] for row in
             select(db, "SELECT source_type, status, count(*) AS n FROM conversions GROUP BY 1, 2")}
    queued = sum(n for (_, status), n in tasks.items() if status == Status.QUEUED)
    duration = "(julianday(finished_at) - julianday(started_at)) * 86400"
    columns = ", ".join(f"sum({duration} <= {le})" for le in buckets)
    row = db.execute(f"SELECT {columns}, count(*), coalesce(sum({duration}), 0) FROM conversions "
                     "WHERE started_at IS NOT NULL AND finished_at IS NOT NULL").fetchone()
    counts, total, seconds = row[:len(buckets)], row[-2], row[-1]
    histogram = [(str(le), n or 0) for le, n in zip(buckets, counts)] + [("+Inf", total)]
    return {"tasks": tasks, "queued": queued, "conversion_seconds": {"buckets": histogram, "sum": seconds},
            "libreoffice_restarts": tally(db, "libreoffice_restarts"), "runs_stopped": tally(db, "runs_stopped")}
