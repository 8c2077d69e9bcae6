"""Conversion tasks: their states, the fairness of the next claim, and the lease a claim is.

A state change and its counting happen in one ``BEGIN IMMEDIATE`` transaction, so two workers
can never count the same task or overrun the allowance between a read and a write. A task read
back is a :class:`Task`, not the row's dict.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from sqlite_utils import Database

from docshift.contract import BillingClass, Macros, Protection, Status, TaskErrorCode
from docshift.errors import IdempotencyKeyTaken, TooManyUnfinished
from docshift.storage import periods
from docshift.storage.connection import Row, first, iso, now, select, transaction
from docshift.storage.s3 import Lease, result_key

INACTIVE_WHILE_CONVERTING = "The subscription became inactive while the file converted; not billed."

# the accounts' billing rule, as ``mark_succeeded`` calls it: (account, its current period) -> class
BillingRule = Callable[[Row, Row], BillingClass]


@dataclasses.dataclass(frozen=True)
class Task:
    """A conversion task as its ``conversions`` row holds it (``schema.sql`` says what each column
    means), with its states and options as their enums. Times are the row's ISO 8601 text."""

    id: str
    account_id: str
    status: Status
    source_filename: str
    source_type: str              # doc, xls or ppt
    source_size: int
    source_sha256: str
    created_at: str
    macros: Macros = Macros.KEEP
    protection: Protection = Protection.KEEP
    idempotency_key: str | None = None
    attempts: int = 0
    worker: str | None = None     # with ``attempts``, the lease: who holds the task
    billing_class: BillingClass | None = None
    period_started_at: str | None = None
    result_size: int | None = None
    error_code: str | None = None
    error_message: str | None = None
    detected_format: str | None = None
    result_extension: str | None = None
    sealed_password: str | None = None
    password_digest: str | None = None
    filename_digest: str | None = None
    fidelity: str | None = None   # JSON
    result_key: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    result_expires_at: str | None = None
    input_deleted: bool = False

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Task:
        """The task of a ``conversions`` row (or of the dict a new row is inserted from)."""
        values = {field.name: row[field.name] for field in dataclasses.fields(cls) if field.name in row}
        values.update(status=Status(row["status"]), macros=Macros(row.get("macros", Macros.KEEP)),
                      protection=Protection(row.get("protection", Protection.KEEP)),
                      input_deleted=bool(row.get("input_deleted")))
        if row.get("billing_class") is not None:
            values["billing_class"] = BillingClass(row["billing_class"])
        return cls(**values)


def _task(row: Row | None) -> Task | None:
    return None if row is None else Task.from_row(row)


def get_task(db: Database, task_id: str, account_id: str | None = None) -> Task | None:
    sql = "SELECT * FROM conversions WHERE id = ?"
    params = [task_id]
    if account_id is not None:
        sql += " AND account_id = ?"
        params.append(account_id)
    return _task(first(db, sql, params))


def task_by_idempotency_key(db: Database, account_id: str, key: str) -> Task | None:
    return _task(first(db, "SELECT * FROM conversions WHERE account_id = ? AND idempotency_key = ?",
                       [account_id, key]))


def unfinished_count(db: Database, account_id: str) -> int:
    """How many of the account's tasks are QUEUED or PROCESSING."""
    return db.execute("SELECT count(*) FROM conversions WHERE account_id = ? AND status IN ('QUEUED', 'PROCESSING')",
                      [account_id]).fetchone()[0]


def is_unfinished(db: Database, task_id: str) -> bool:
    """The task is QUEUED or PROCESSING: its input is still wanted."""
    return db.execute("SELECT count(*) FROM conversions WHERE id = ? AND status IN ('QUEUED', 'PROCESSING')",
                      [task_id]).fetchone()[0] > 0


def create_task(db: Database, task: Row, max_unfinished: int | None = None) -> Row:
    """Commit a new QUEUED task row. Raises IdempotencyKeyTaken if its key is already used, and
    TooManyUnfinished (committing nothing) if the account already has ``max_unfinished`` tasks
    QUEUED or PROCESSING: counted in the same transaction, so racing requests cannot overrun it. The key
    goes first: an identical request that committed while this one came is its answer even at the cap."""
    try:
        with transaction(db):
            if max_unfinished is not None and unfinished_count(db, task["account_id"]) >= max_unfinished:
                key = task.get("idempotency_key")
                if key and task_by_idempotency_key(db, task["account_id"], key) is not None:
                    raise IdempotencyKeyTaken()
                raise TooManyUnfinished(task["account_id"])
            # one statement: sqlite-utils' insert reads the schema twice and wraps it in a savepoint, three more
            # trips off gevent's hub for the web
            db.execute(f"INSERT INTO conversions ({', '.join(task)}) VALUES ({', '.join(f':{c}' for c in task)})",
                       task)
    except sqlite3.IntegrityError as error:
        if task.get("idempotency_key") and "conversions.account_id" in str(error):
            raise IdempotencyKeyTaken() from error
        raise
    return task


# The fairest QUEUED task: of the accounts with work waiting (but those held back, a JSON list), the one
# with the fewest conversions running, then the one served longest ago (never served first), then the
# oldest waiting work; of its tasks, the oldest. One account's backlog thus delays another's task by at
# most what runs. Gives the task, its account, and how many of the account's conversions run.
FAIREST = """
    SELECT conversions.id, pick.account_id, pick.running FROM conversions JOIN (
        SELECT waiting.account_id,
               (SELECT count(*) FROM conversions AS running
                 WHERE running.account_id = waiting.account_id AND running.status = 'PROCESSING') AS running,
               (SELECT max(started_at) FROM conversions AS served
                 WHERE served.account_id = waiting.account_id) AS served_at,
               min(waiting.created_at) AS oldest
        FROM conversions AS waiting
        WHERE waiting.status = 'QUEUED' AND waiting.account_id NOT IN (SELECT value FROM json_each(?))
        GROUP BY waiting.account_id
        ORDER BY running, served_at IS NOT NULL, served_at, oldest LIMIT 1
    ) AS pick ON conversions.account_id = pick.account_id
    WHERE conversions.status = 'QUEUED' ORDER BY conversions.created_at LIMIT 1"""

JOBS = "job:%"  # the holders of conversion nodes' runs (the coordinator's "job:<id>"), as a LIKE pattern

# how long after its last long run an account is still held to one slot fewer, and how lately another
# account must have started a conversion for that to matter
RECENT = timedelta(minutes=10)


@dataclasses.dataclass(frozen=True)
class Slots:
    """What the claim's reserve needs: how many conversions may run at once (a box's worker threads, or
    the nodes' slots), and how long a run lasts before it counts as long."""
    total: int
    long_seconds: float


def claim_next(db: Database, worker: str | None, slots: Slots | None = None) -> tuple[Task, Row] | None:
    """QUEUED -> PROCESSING for the fairest waiting task, held by ``worker``; returns
    ``(task, account)`` or None when nothing waits, or nothing may start now. The claim is the
    lease: the task's ``worker`` and ``attempts`` name its holder, and only that holder may finish it.

    Given ``slots``, the last free slot is kept back from an account whose conversions run long
    (``held_back``), so that another account's file starts at once rather than behind the timeout.

    The claim's commit does not wait for the disk (0.7 ms of a file's path, median): a claim a power cut loses
    leaves the task QUEUED, and one it keeps is a run whose worker is gone, which recovery queues again."""
    with transaction(db, synced=False):
        held: list[str] = []
        while True:
            row = db.execute(FAIREST, [json.dumps(held)]).fetchone()
            if row is None:
                return None
            task_id, account_id, running = row
            if not running or slots is None or not held_back(db, account_id, slots):
                break
            held.append(account_id)
        _claim(db, task_id, worker)
    return _claimed(db, task_id)


def held_back(db: Database, account_id: str, slots: Slots, at: datetime | None = None) -> bool:
    """Whether the account, which already runs a conversion, may not take the last free slot: one of its
    conversions runs long now, or ran long in the last ``RECENT``, and another account has started one in
    that time. An account alone keeps every slot; one with long files keeps all but one while others
    are about, so their next file never waits for a slot (a backlog of long files, or files made to run
    until the timeout, which cost nothing as they fail, would otherwise hold every slot for its length)."""
    if slots.total < 2 or processing_count(db) + 1 < slots.total:
        return False
    at = at or now()
    recent, long_ago = iso(at - RECENT), iso(at - timedelta(seconds=slots.long_seconds))
    return bool(db.execute(
        "SELECT (EXISTS (SELECT 1 FROM accounts WHERE id = :account AND ran_long_at > :recent) "
        "     OR EXISTS (SELECT 1 FROM conversions WHERE account_id = :account AND status = 'PROCESSING' "
        "                AND started_at < :long_ago)) "
        "   AND EXISTS (SELECT 1 FROM conversions WHERE started_at > :recent AND account_id != :account)",
        {"account": account_id, "recent": recent, "long_ago": long_ago}).fetchone()[0])


def to_preempt(db: Database, slots: Slots, worker: str | None, at: datetime | None = None) -> Task | None:
    """The run of ``worker``'s to stop so that another account's waiting file gets a slot, or None. The claim's
    reserve (``held_back``) keeps a slot only once something is known of an account's files: a first burst of long
    files still takes every slot, and the other accounts' files would wait for one to end (the timeout, for a file
    made to run until it). So: when every slot is taken, an account with nothing running has a file waiting, and
    one account runs two or more with a run past ``long_seconds``, its youngest run past that stops (the least work
    lost) and goes back to the queue without using an attempt; the reserve then keeps it from the last slot.
    ``worker``: the one-box worker whose runs may stop, or ``JOBS`` for the conversion nodes' (their holders are jobs).
    Returns the run's task (its ``worker`` names the holder to stop)."""
    if slots.total < 2 or processing_count(db) < slots.total:
        return None
    long_ago = iso((at or now()) - timedelta(seconds=slots.long_seconds))
    row = db.execute(
        "SELECT run.id FROM conversions AS run "
        "WHERE run.status = 'PROCESSING' AND run.started_at < :long_ago "
        f"  AND {'run.worker LIKE :worker' if worker == JOBS else 'run.worker IS :worker'} "
        "  AND (SELECT count(*) FROM conversions AS mine "
        "       WHERE mine.account_id = run.account_id AND mine.status = 'PROCESSING') >= 2 "
        "  AND EXISTS (SELECT 1 FROM conversions AS waiting WHERE waiting.status = 'QUEUED' AND NOT EXISTS ("
        "      SELECT 1 FROM conversions AS busy WHERE busy.account_id = waiting.account_id "
        "      AND busy.status = 'PROCESSING')) "
        "ORDER BY run.started_at DESC LIMIT 1", {"long_ago": long_ago, "worker": worker}).fetchone()
    return get_task(db, row[0]) if row else None


def note_run(db: Database, task: Task, long_seconds: float, at: datetime | None = None) -> None:
    """A run of ``task`` ended: if it ran long, its account is held to one slot fewer for a while."""
    at = at or now()
    if task.started_at and datetime.fromisoformat(task.started_at) < at - timedelta(seconds=long_seconds):
        db.execute("UPDATE accounts SET ran_long_at = ? WHERE id = ?", [iso(at), task.account_id])


def start_processing(db: Database, task_id: str, worker: str | None = None) -> tuple[Task, Row] | None:
    """QUEUED -> PROCESSING of this task, held by ``worker``; returns the task and its account, or None. Its commit
    waits for no disk, as a claim's (``claim_next``)."""
    with transaction(db, synced=False):
        if not _claim(db, task_id, worker):
            return None
    return _claimed(db, task_id)


def _claimed(db: Database, task_id: str) -> tuple[Task, Row]:
    task = cast(Task, get_task(db, task_id))  # claimed just now: tasks are never deleted
    return task, _account(db, task.account_id)


def _account(db: Database, account_id: str) -> Row:
    """The account of a task (tasks keep theirs: accounts are never deleted), read in one statement: sqlite-utils'
    ``table().get`` reads the schema four times first, on the way of every claim and every success."""
    return cast(Row, first(db, "SELECT * FROM accounts WHERE id = ?", [account_id]))


def _claim(db: Database, task_id: str, worker: str | None) -> bool:
    cursor = db.execute(
        "UPDATE conversions SET status = 'PROCESSING', attempts = attempts + 1, started_at = ?, worker = ? "
        "WHERE id = ? AND status = 'QUEUED'", [iso(now()), worker, task_id])
    return cursor.rowcount == 1


def _held(lease: Sequence[Any] | None) -> tuple[str, list[Any]]:
    """SQL condition and parameters: the task is PROCESSING, and by the lease's holder when given."""
    if lease is None:
        return "status = 'PROCESSING'", []
    return "status = 'PROCESSING' AND worker IS ? AND attempts = ?", [lease[0], lease[1]]


def lease_of(task: Task) -> Lease:
    """The lease a claimed task stands for: (holder, attempt)."""
    return task.worker, task.attempts


def holds(db: Database, task_id: str, lease: Sequence[Any] | None) -> bool:
    """Whether ``lease`` still holds the task: PROCESSING, by its holder and attempt."""
    held, params = _held(lease)
    return first(db, f"SELECT id FROM conversions WHERE id = ? AND {held}", [task_id, *params]) is not None


def requeue(db: Database, task_id: str, lease: Sequence[Any] | None = None) -> bool:
    """PROCESSING -> QUEUED, so a retry can claim it again (only by the lease's holder, if given)."""
    held, params = _held(lease)
    return db.execute(f"UPDATE conversions SET status = 'QUEUED' WHERE id = ? AND {held}",
                      [task_id, *params]).rowcount == 1


def release(db: Database, task_id: str, lease: Sequence[Any] | None) -> bool:
    """PROCESSING -> QUEUED without using up an attempt: the run was stopped by an outage of the
    database or the object store, not by the file."""
    held, params = _held(lease)
    return db.execute(f"UPDATE conversions SET status = 'QUEUED', attempts = attempts - 1 WHERE id = ? AND {held}",
                      [task_id, *params]).rowcount == 1


def mark_succeeded(db: Database, task_id: str, result_size: int, retention_seconds: float, bill: BillingRule,
                   at: datetime | None = None, lease: Sequence[Any] | None = None, detected_format: str | None = None,
                   result_extension: str | None = None, fidelity: Any = None) -> BillingClass | None:
    """PROCESSING -> SUCCEEDED and count it, in one transaction. Returns the billing class.

    ``bill(account, period)`` is the accounts' rule (``docshift.accounts.billing.rule``): given
    the account and its current period as read inside the transaction, it says ``INCLUDED`` or
    ``OVERAGE``, and that is what is counted. Returns None (and counts nothing) if the task was
    not PROCESSING, or not held by ``lease`` when one is given. The row keeps the key its lease
    stored the result under (``s3.result_key``).

    An account no longer active (deactivated while the file converted) gets no success and no bill: the task ends
    FAILED ``subscription_inactive``, as its tasks still waiting did, and None is returned (``ended_inactive``
    tells the caller why). Its customer could not have fetched the result, nor been shown it.
    """
    with transaction(db):
        # taken once the write lock is held: no earlier than anything metered before this commits
        at = at or now()
        task = get_task(db, task_id)
        if task is None or task.status != Status.PROCESSING:
            return None
        if lease is not None and lease_of(task) != tuple(lease):
            return None
        account = _account(db, task.account_id)
        if account["status"] != "active":
            mark_failed(db, task_id, TaskErrorCode.SUBSCRIPTION_INACTIVE.value, INACTIVE_WHILE_CONVERTING, lease)
            return None
        period = periods.current_period(db, account, at)
        billing = bill(account, period)
        periods.count(db, period, billing)
        changes = {
            "status": Status.SUCCEEDED, "billing_class": billing, "period_started_at": period["started_at"],
            "result_size": result_size, "finished_at": iso(at),
            "result_expires_at": iso(at + timedelta(seconds=retention_seconds)),
            "error_code": None, "error_message": None, "detected_format": detected_format,
            "result_extension": result_extension, "fidelity": json.dumps(fidelity) if fidelity is not None else None,
            "result_key": result_key(task_id, lease_of(task)),
            "sealed_password": None,  # a final task forgets its document's password
        }
        db.execute(f"UPDATE conversions SET {', '.join(f'{column} = :{column}' for column in changes)} WHERE id = :id",
                   {**changes, "id": task_id})
    return billing


def ended_inactive(db: Database, task_id: str) -> bool:
    """Whether the task ended FAILED ``subscription_inactive``: ``mark_succeeded`` refused a success of an account no
    longer active (or the deactivation ended it while it waited)."""
    task = get_task(db, task_id)
    return task is not None and task.status == Status.FAILED and task.error_code == TaskErrorCode.SUBSCRIPTION_INACTIVE


def mark_failed(db: Database, task_id: str, code: str, message: str, lease: Sequence[Any] | None = None,
                detected_format: str | None = None) -> bool:
    """Any non-final state -> FAILED with a documented code (only by the lease's holder, if given).
    Never counted. The task forgets its document's password."""
    held, params = ("status IN ('QUEUED', 'PROCESSING')", []) if lease is None else _held(lease)
    cursor = db.execute(
        f"UPDATE conversions SET status = 'FAILED', error_code = ?, error_message = ?, detected_format = ?, "
        f"finished_at = ?, sealed_password = NULL WHERE id = ? AND {held}",
        [code, message, detected_format, iso(now()), task_id, *params])
    return cursor.rowcount == 1


def mark_input_deleted(db: Database, task_id: str) -> None:
    db.execute("UPDATE conversions SET input_deleted = 1 WHERE id = ?", [task_id])


def final_tasks_with_input(db: Database, limit: int = 500) -> list[Row]:
    return select(
        db, "SELECT id FROM conversions WHERE input_deleted = 0 AND status IN ('SUCCEEDED', 'FAILED', 'EXPIRED') "
        "LIMIT ?", [limit])


def results_to_expire(db: Database, at: datetime | None = None, limit: int = 500) -> list[Task]:
    return [Task.from_row(row) for row in select(
        db, "SELECT * FROM conversions WHERE status = 'SUCCEEDED' AND result_expires_at <= ? "
        "ORDER BY result_expires_at LIMIT ?", [iso(at or now()), limit])]


def mark_expired(db: Database, task_id: str) -> None:
    db.execute("UPDATE conversions SET status = 'EXPIRED' WHERE id = ? AND status = 'SUCCEEDED'",
               [task_id])


def purge_idempotency_keys(db: Database, created_before: datetime) -> int:
    """Forget keys of tasks created before ``created_before``: reusing one starts a new task. What a replay
    compares beside the key (the keyed hash of a document password, the digest of the name sent) goes with it."""
    return db.execute("UPDATE conversions SET idempotency_key = NULL, password_digest = NULL, filename_digest = NULL "
                      "WHERE idempotency_key IS NOT NULL AND created_at < ?", [iso(created_before)]).rowcount


def processing_tasks(db: Database) -> list[Task]:
    return [Task.from_row(row) for row in select(db, "SELECT * FROM conversions WHERE status = 'PROCESSING'")]


def processing_count(db: Database) -> int:
    return db.execute("SELECT count(*) FROM conversions WHERE status = 'PROCESSING'").fetchone()[0]


def queued_count(db: Database) -> int:
    return db.execute("SELECT count(*) FROM conversions WHERE status = 'QUEUED'").fetchone()[0]
