"""Tasks, accounts, keys and usage in one SQLite file, as verbs on the domain.

A state change and its counting happen in one ``BEGIN IMMEDIATE``
transaction, so two workers can never count the same task or overrun the
allowance between a read and a write.
"""

import calendar
import functools
import inspect
import json
import os
import secrets
import sqlite3
import sys
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from importlib.resources import files

from sqlite_utils import Database

from docshift.contract import BillingClass, Status
from docshift.errors import DatabaseUnavailable, IdempotencyKeyTaken, TooManyUnfinished
from docshift.storage.objects import result_key

# the top-level schema.sql, packaged beside this module (storage/schema.sql links to it)
SCHEMA = files("docshift.storage") / "schema.sql"


def now():
    return datetime.now(UTC)


def iso(moment):
    """ISO 8601 UTC with ``Z``, second precision kept to microseconds for ordering."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse(text):
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def connect(path):
    """Open the database; autocommit unless inside :func:`transaction`."""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False,
                           factory=connection_class())
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA foreign_keys = ON")
    return Database(conn)


_READS = ("SELECT", "PRAGMA")


class CooperativeConnection(sqlite3.Connection):
    """A connection for a process that runs gevent's hub (the web): a statement that may wait
    for the write lock, or for the disk at commit, runs in a native thread, so one request's
    wait never stops the hub from answering the others. Reads run inline: in WAL mode they
    take no lock that a writer holds."""

    def execute(self, sql, parameters=(), /):
        if sql.lstrip()[:6].upper() in _READS:
            return super().execute(sql, parameters)
        return _off_hub(sqlite3.Connection.execute, self, sql, parameters)

    def executemany(self, sql, parameters, /):
        return _off_hub(sqlite3.Connection.executemany, self, sql, parameters)

    def commit(self):
        return _off_hub(sqlite3.Connection.commit, self)

    def close(self):
        return _off_hub(sqlite3.Connection.close, self)


def _off_hub(function, *args):
    from gevent import get_hub  # only a patched process gets here: the worker never imports gevent
    return get_hub().threadpool.apply(function, args)


def connection_class():
    """``CooperativeConnection`` where gevent has patched this process, else sqlite3's own."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("threading"):
        return CooperativeConnection
    return sqlite3.Connection


class Pool:
    """Open connections to one database, handed to one request after another. Opening one, with
    its pragmas and the first read of the schema, costs more CPU than the rest of a poll.

    A connection comes back only outside a transaction (one an error left open is rolled
    back, or closed if it cannot be); a pool inherited through ``fork`` is left to its parent.
    """

    def __init__(self, path, size=16):
        self.path, self.size = path, size
        self._idle, self._pid = [], os.getpid()

    def take(self):
        if self._pid != os.getpid():  # a forked child: these connections are the parent's
            self._idle, self._pid = [], os.getpid()
        try:
            return self._idle.pop()
        except IndexError:
            return connect(self.path)

    def give_back(self, db):
        try:
            if db.conn.in_transaction:
                db.conn.execute("ROLLBACK")
        except sqlite3.Error:
            db.conn.close()
            return
        if len(self._idle) < self.size and self._pid == os.getpid():
            self._idle.append(db)
        else:
            db.conn.close()


# columns added after the first release: CREATE TABLE IF NOT EXISTS leaves an older table as it was
ADDED_COLUMNS = {"conversions": {
    "detected_format": "TEXT",
    "macros": "TEXT NOT NULL DEFAULT 'keep' CHECK (macros IN ('keep', 'remove'))",
    "result_extension": "TEXT",
    "fidelity": "TEXT",
    "result_key": "TEXT",
}}


def init(db):
    db.conn.executescript(SCHEMA.read_text())
    for table, columns in ADDED_COLUMNS.items():
        present = {row[1] for row in db.conn.execute(f"PRAGMA table_info({table})")}
        for column, kind in columns.items():
            if column not in present:
                try:
                    db.conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
                except sqlite3.OperationalError as error:  # another process added it just now
                    if "duplicate column" not in str(error):
                        raise
    # results stored before each run had a key of its own were under results/<task id>
    db.conn.execute("UPDATE conversions SET result_key = 'results/' || id "
                    "WHERE result_key IS NULL AND status IN ('SUCCEEDED', 'EXPIRED')")


def ping(db):
    db.execute("SELECT 1")


@contextmanager
def transaction(db):
    """A write transaction that takes the lock up front (no upgrade deadlocks). Inside another,
    it is part of that one, which commits or rolls back the whole."""
    if db.conn.in_transaction:
        yield db
        return
    with _one_writer(db):
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.conn.execute("ROLLBACK")
            raise
        db.conn.execute("COMMIT")


_cooperative_writer = None


def _one_writer(db):
    """Under gevent, one write transaction at a time in the process: greenlets waiting for SQLite's
    write lock hold all of gevent's pool threads, and the one holding the lock, which needs a thread
    for its next statement, would wait with them until the busy timeout."""
    global _cooperative_writer
    if not isinstance(db.conn, CooperativeConnection):
        return nullcontext()
    if _cooperative_writer is None:
        from gevent.lock import Semaphore

        _cooperative_writer = Semaphore()
    return _cooperative_writer


def new_id(prefix):
    return f"{prefix}_{secrets.token_hex(12)}"


# accounts and keys ---------------------------------------------------------

def apply_subscription(db, marketplace, customer):
    """Create or update an account from what the marketplace says now (a ``Customer``).

    An account that was once active and has no entitlement any more is ``inactive``,
    not ``pending``; a plan the marketplace does not name is kept.
    """
    with transaction(db):
        account = find_account(db, marketplace, customer.customer_id)
        status = customer.status
        if status == "pending" and account and account["activated_at"]:
            status = "inactive"
        at = iso(now())
        contract_end = iso(customer.period_ends_at) if customer.period_ends_at else None
        if account is None:
            account = {"id": new_id("acc"), "marketplace": marketplace, "customer_id": customer.customer_id,
                       "license_arn": customer.license_arn, "plan": customer.plan, "status": status,
                       "activated_at": at if status == "active" else None, "created_at": at,
                       "contract_ends_at": contract_end}
            db["accounts"].insert(account)
            return account
        changes = {"status": status, "plan": customer.plan or account["plan"],
                   "license_arn": customer.license_arn or account["license_arn"],
                   "contract_ends_at": contract_end or account["contract_ends_at"]}
        if status == "active" and not account["activated_at"]:
            changes["activated_at"] = at
        db["accounts"].update(account["id"], changes)
        return {**account, **changes}


def set_account(db, account_id, **changes):
    if changes.get("status") == "active":
        account = db["accounts"].get(account_id)
        if not account["activated_at"]:
            changes["activated_at"] = iso(now())
    db["accounts"].update(account_id, changes)
    return db["accounts"].get(account_id)


def find_account(db, marketplace, customer_id):
    return first(db, "SELECT * FROM accounts WHERE marketplace = ? AND customer_id = ?",
                 [marketplace, customer_id])


def list_accounts(db):
    return select(db, "SELECT * FROM accounts ORDER BY created_at")


def replace_key(db, account_id, key_hash, hint):
    """Make ``key_hash`` the account's only valid key (re-registration rotates)."""
    at = iso(now())
    with transaction(db):
        db.execute("UPDATE api_keys SET revoked_at = ? WHERE account_id = ? AND revoked_at IS NULL",
                   [at, account_id])
        db["api_keys"].insert({"key_hash": key_hash, "account_id": account_id, "hint": hint,
                               "created_at": at, "revoked_at": None})


def account_for_key(db, key_hash):
    return first(db, """SELECT accounts.* FROM api_keys JOIN accounts ON accounts.id = api_keys.account_id
                        WHERE api_keys.key_hash = ? AND api_keys.revoked_at IS NULL""", [key_hash])


# usage periods -------------------------------------------------------------

def add_months(moment, months):
    """``moment`` plus whole months, the day clamped to the month's length (Jan 31 + 1 = Feb 28)."""
    year, month = divmod(moment.month - 1 + months, 12)
    year += moment.year
    month += 1
    return moment.replace(year=year, month=month, day=min(moment.day, calendar.monthrange(year, month)[1]))


def current_period(db, account, at=None):
    """The account's contract period containing ``at``, created (and rolled) as needed.

    A period ends where the marketplace's entitlement ends, if it gives an end after the
    period's start, else a month after its start (the first starts at activation). A new
    period starts with fresh counters. Call inside a transaction when the result feeds a write.
    """
    at = at or now()
    row = first(db, "SELECT * FROM usage_periods WHERE account_id = ? ORDER BY started_at DESC LIMIT 1",
                [account["id"]])
    if row is None:
        start = parse(account["activated_at"] or account["created_at"])
    elif parse(row["ends_at"]) > at:
        return row
    else:
        start = parse(row["ends_at"])
    anchor = parse(account["activated_at"] or account["created_at"])
    contract_end = parse(account["contract_ends_at"]) if account.get("contract_ends_at") else None

    def period_end(start):
        if contract_end and contract_end > start:
            return contract_end
        # monthly from activation: anchored there, so Jan 31 gives Feb 28, then Mar 31
        months = 1
        while add_months(anchor, months) <= start:
            months += 1
        return add_months(anchor, months)

    end = period_end(start)
    while end <= at:
        start, end = end, period_end(end)
    row = {"account_id": account["id"], "started_at": iso(start), "ends_at": iso(end),
           "included_used": 0, "overage_used": 0}
    db["usage_periods"].insert(row, ignore=True)
    return first(db, "SELECT * FROM usage_periods WHERE account_id = ? AND started_at = ?",
                 [account["id"], row["started_at"]])


def usage_period(db, account, at=None):
    """The current period for reading: no write lock unless a period must be made or rolled."""
    at = at or now()
    row = first(db, "SELECT * FROM usage_periods WHERE account_id = ? ORDER BY started_at DESC LIMIT 1",
                [account["id"]])
    if row is not None and parse(row["started_at"]) <= at < parse(row["ends_at"]):
        return row
    with transaction(db):
        return current_period(db, account, at)


# conversion tasks ------------------------------------------------------------

def get_task(db, task_id, account_id=None):
    sql = "SELECT * FROM conversions WHERE id = ?"
    params = [task_id]
    if account_id is not None:
        sql += " AND account_id = ?"
        params.append(account_id)
    return first(db, sql, params)


def task_by_idempotency_key(db, account_id, key):
    return first(db, "SELECT * FROM conversions WHERE account_id = ? AND idempotency_key = ?",
                 [account_id, key])


def unfinished_count(db, account_id):
    """How many of the account's tasks are QUEUED or PROCESSING."""
    return db.execute("SELECT count(*) FROM conversions WHERE account_id = ? AND status IN ('QUEUED', 'PROCESSING')",
                      [account_id]).fetchone()[0]


def create_task(db, task, max_unfinished=None):
    """Commit a new QUEUED task row. Raises IdempotencyKeyTaken if its key is already used, and
    TooManyUnfinished (committing nothing) if the account already has ``max_unfinished`` tasks
    QUEUED or PROCESSING: counted in the same transaction, so racing requests cannot overrun it."""
    try:
        with transaction(db):
            if max_unfinished is not None and unfinished_count(db, task["account_id"]) >= max_unfinished:
                raise TooManyUnfinished(task["account_id"])
            db["conversions"].insert(task)
    except sqlite3.IntegrityError as error:
        if task.get("idempotency_key") and "conversions.account_id" in str(error):
            raise IdempotencyKeyTaken() from error
        raise
    return task


# The fairest QUEUED task: of the accounts with work waiting, the one with the fewest conversions
# running, then the one served longest ago (never served first), then the oldest waiting work; of
# its tasks, the oldest. One account's backlog thus delays another's task by at most what runs.
FAIREST = """
    SELECT conversions.id FROM conversions JOIN (
        SELECT waiting.account_id,
               (SELECT count(*) FROM conversions AS running
                 WHERE running.account_id = waiting.account_id AND running.status = 'PROCESSING') AS running,
               (SELECT max(started_at) FROM conversions AS served
                 WHERE served.account_id = waiting.account_id) AS served_at,
               min(waiting.created_at) AS oldest
        FROM conversions AS waiting WHERE waiting.status = 'QUEUED' GROUP BY waiting.account_id
        ORDER BY running, served_at IS NOT NULL, served_at, oldest LIMIT 1
    ) AS pick ON conversions.account_id = pick.account_id
    WHERE conversions.status = 'QUEUED' ORDER BY conversions.created_at LIMIT 1"""


def claim_next(db, worker):
    """QUEUED -> PROCESSING for the fairest waiting task, held by ``worker``; returns
    ``(task, account)`` or None when nothing waits. The claim is the lease: the task's
    ``worker`` and ``attempts`` name its holder, and only that holder may finish it."""
    with transaction(db):
        row = db.execute(FAIREST).fetchone()
        if row is None:
            return None
        _claim(db, row[0], worker)
    task = get_task(db, row[0])
    return task, db["accounts"].get(task["account_id"])


def start_processing(db, task_id, worker=None):
    """QUEUED -> PROCESSING of this task, held by ``worker``; returns the task and its account, or None."""
    with transaction(db):
        if not _claim(db, task_id, worker):
            return None
    task = get_task(db, task_id)
    return task, db["accounts"].get(task["account_id"])


def _claim(db, task_id, worker):
    cursor = db.execute(
        "UPDATE conversions SET status = 'PROCESSING', attempts = attempts + 1, started_at = ?, worker = ? "
        "WHERE id = ? AND status = 'QUEUED'", [iso(now()), worker, task_id])
    return cursor.rowcount == 1


def _held(lease):
    """SQL condition and parameters: the task is PROCESSING, and by the lease's holder when given."""
    if lease is None:
        return "status = 'PROCESSING'", []
    return "status = 'PROCESSING' AND worker IS ? AND attempts = ?", [lease[0], lease[1]]


def lease_of(task):
    """The lease a claimed task row stands for: (holder, attempt)."""
    return task["worker"], task["attempts"]


def holds(db, task_id, lease):
    """Whether ``lease`` still holds the task: PROCESSING, by its holder and attempt."""
    held, params = _held(lease)
    return first(db, f"SELECT id FROM conversions WHERE id = ? AND {held}", [task_id, *params]) is not None


def requeue(db, task_id, lease=None):
    """PROCESSING -> QUEUED, so a retry can claim it again (only by the lease's holder, if given)."""
    held, params = _held(lease)
    return db.execute(f"UPDATE conversions SET status = 'QUEUED' WHERE id = ? AND {held}",
                      [task_id, *params]).rowcount == 1


def release(db, task_id, lease):
    """PROCESSING -> QUEUED without using up an attempt: the run was stopped by an outage of the
    database or the object store, not by the file."""
    held, params = _held(lease)
    return db.execute(f"UPDATE conversions SET status = 'QUEUED', attempts = attempts - 1 WHERE id = ? AND {held}",
                      [task_id, *params]).rowcount == 1


def mark_succeeded(db, task_id, result_size, retention_seconds, quotas, at=None, lease=None, detected_format=None,
                   result_extension=None, fidelity=None):
    """PROCESSING -> SUCCEEDED and count it, in one transaction. Returns the billing class.

    ``INCLUDED`` while the period's included count is below the plan's quota,
    else ``OVERAGE``. Returns None (and counts nothing) if the task was not PROCESSING, or
    not held by ``lease`` when one is given. The row keeps the key its lease stored the result
    under (``objects.result_key``).
    """
    at = at or now()
    with transaction(db):
        task = get_task(db, task_id)
        if task is None or task["status"] != Status.PROCESSING:
            return None
        if lease is not None and lease_of(task) != tuple(lease):
            return None
        account = db["accounts"].get(task["account_id"])
        period = current_period(db, account, at)
        quota = quotas.get(account["plan"], 0)
        billing = BillingClass.INCLUDED if period["included_used"] < quota else BillingClass.OVERAGE
        column = "included_used" if billing == BillingClass.INCLUDED else "overage_used"
        db.execute(f"UPDATE usage_periods SET {column} = {column} + 1 "
                   "WHERE account_id = ? AND started_at = ?", [account["id"], period["started_at"]])
        db["conversions"].update(task_id, {
            "status": Status.SUCCEEDED, "billing_class": billing, "period_started_at": period["started_at"],
            "result_size": result_size, "finished_at": iso(at),
            "result_expires_at": iso(at + timedelta(seconds=retention_seconds)),
            "error_code": None, "error_message": None, "detected_format": detected_format,
            "result_extension": result_extension, "fidelity": json.dumps(fidelity) if fidelity is not None else None,
            "result_key": result_key(task_id, lease_of(task)),
        })
    return billing


def mark_failed(db, task_id, code, message, lease=None, detected_format=None):
    """Any non-final state -> FAILED with a documented code (only by the lease's holder, if given).
    Never counted."""
    held, params = ("status IN ('QUEUED', 'PROCESSING')", []) if lease is None else _held(lease)
    cursor = db.execute(
        f"UPDATE conversions SET status = 'FAILED', error_code = ?, error_message = ?, detected_format = ?, "
        f"finished_at = ? WHERE id = ? AND {held}", [code, message, detected_format, iso(now()), task_id, *params])
    return cursor.rowcount == 1


def mark_input_deleted(db, task_id):
    db.execute("UPDATE conversions SET input_deleted = 1 WHERE id = ?", [task_id])


def final_tasks_with_input(db, limit=500):
    return select(
        db, "SELECT id FROM conversions WHERE input_deleted = 0 AND status IN ('SUCCEEDED', 'FAILED', 'EXPIRED') "
        "LIMIT ?", [limit])


def results_to_expire(db, at=None, limit=500):
    return select(
        db, "SELECT * FROM conversions WHERE status = 'SUCCEEDED' AND result_expires_at <= ? "
        "ORDER BY result_expires_at LIMIT ?", [iso(at or now()), limit])


def mark_expired(db, task_id):
    db.execute("UPDATE conversions SET status = 'EXPIRED' WHERE id = ? AND status = 'SUCCEEDED'",
               [task_id])


def purge_idempotency_keys(db, created_before):
    """Forget keys of tasks created before ``created_before``: reusing one starts a new task."""
    return db.execute("UPDATE conversions SET idempotency_key = NULL "
                      "WHERE idempotency_key IS NOT NULL AND created_at < ?", [iso(created_before)]).rowcount


def processing_tasks(db):
    return select(db, "SELECT * FROM conversions WHERE status = 'PROCESSING'")


def processing_count(db):
    return db.execute("SELECT count(*) FROM conversions WHERE status = 'PROCESSING'").fetchone()[0]


def queued_count(db):
    return db.execute("SELECT count(*) FROM conversions WHERE status = 'QUEUED'").fetchone()[0]


# overage metering ---------------------------------------------------------------

def hour_of(moment):
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def overage_to_report(db, since, until):
    """(account, hour, quantity) of OVERAGE successes in whole hours ``since`` <= hour < ``until``
    that the ledger has not closed yet (absent or still pending)."""
    rows = select(
        db, """SELECT conversions.account_id, substr(conversions.finished_at, 1, 13) AS hour_prefix,
                  count(*) AS quantity
           FROM conversions
           WHERE billing_class = 'OVERAGE' AND finished_at >= ? AND finished_at < ?
           GROUP BY conversions.account_id, hour_prefix""", [iso(since), iso(until)])
    due = []
    for row in rows:
        hour = iso(datetime.strptime(row["hour_prefix"], "%Y-%m-%dT%H").replace(tzinfo=UTC))
        report = first(db, "SELECT * FROM overage_reports WHERE account_id = ? AND hour = ?",
                       [row["account_id"], hour])
        if report is None or report["status"] == "pending":
            due.append((db["accounts"].get(row["account_id"]), hour, row["quantity"]))
    return due


def open_overage_report(db, account_id, hour, quantity):
    """Write the ledger row before anything is sent (or keep the pending one)."""
    db.execute("INSERT OR IGNORE INTO overage_reports (account_id, hour, quantity, status, updated_at) "
               "VALUES (?, ?, ?, 'pending', ?)", [account_id, hour, quantity, iso(now())])


def close_overage_report(db, account_id, hour, status, record_id=None):
    db.execute("UPDATE overage_reports SET status = ?, metering_record_id = ?, updated_at = ? "
               "WHERE account_id = ? AND hour = ?", [status, record_id, iso(now()), account_id, hour])


def miss_overage_reports(db, before):
    """Pending rows past the marketplace's window: recorded as missed for the operator."""
    return db.execute("UPDATE overage_reports SET status = 'missed', updated_at = ? "
                      "WHERE status = 'pending' AND hour < ?", [iso(now()), iso(before)]).rowcount


def overage_reports(db, account_id=None):
    sql, params = "SELECT * FROM overage_reports", []
    if account_id:
        sql, params = sql + " WHERE account_id = ?", [account_id]
    return select(db, sql + " ORDER BY hour", params)


# worker liveness ---------------------------------------------------------------

def heartbeat(db, name="worker", at=None):
    db["heartbeats"].upsert({"name": name, "beat_at": iso(at or now())}, pk="name")


def last_heartbeat(db, name="worker"):
    row = first(db, "SELECT beat_at FROM heartbeats WHERE name = ?", [name])
    return parse(row["beat_at"]) if row else None


def report_engine(db, worker, sandbox, state, detail=None):
    """Record what worker process ``worker`` runs LibreOffice with ("on"/"off") and its state
    ("starting", "ok", "broken" with ``detail``); refreshed with the heartbeat."""
    db["engines"].upsert({"worker": worker, "sandbox": sandbox, "state": state, "detail": detail,
                          "updated_at": iso(now())}, pk="worker")


def engine_reports(db, since):
    """The engine rows of worker processes that reported after ``since``."""
    return select(db, "SELECT * FROM engines WHERE updated_at >= ? ORDER BY worker", [iso(since)])


def add_tally(db, name, amount=1):
    db.execute("INSERT INTO tallies (name, value) VALUES (?, ?) "
               "ON CONFLICT (name) DO UPDATE SET value = value + excluded.value", [name, amount])


def tally(db, name):
    row = first(db, "SELECT value FROM tallies WHERE name = ?", [name])
    return row["value"] if row else 0


def task_metrics(db, buckets):
    """Figures for /metrics: tasks by (type, state), queue depth, the histogram of seconds from
    claim to final state (cumulative ``(le, count)`` pairs ending with +Inf, and the sum), and
    LibreOffice restarts."""
    tasks = {(row["source_type"], row["status"]): row["n"] for row in
             select(db, "SELECT source_type, status, count(*) AS n FROM conversions GROUP BY 1, 2")}
    queued = sum(n for (_, status), n in tasks.items() if status == "QUEUED")
    duration = "(julianday(finished_at) - julianday(started_at)) * 86400"
    columns = ", ".join(f"sum({duration} <= {le})" for le in buckets)
    row = db.execute(f"SELECT {columns}, count(*), coalesce(sum({duration}), 0) FROM conversions "
                     "WHERE started_at IS NOT NULL AND finished_at IS NOT NULL").fetchone()
    counts, total, seconds = row[:len(buckets)], row[-2], row[-1]
    histogram = [(str(le), n or 0) for le, n in zip(buckets, counts)] + [("+Inf", total)]
    return {"tasks": tasks, "queued": queued, "conversion_seconds": {"buckets": histogram, "sum": seconds},
            "libreoffice_restarts": tally(db, "libreoffice_restarts")}


def select(db, sql, params=()):
    """The rows of a read, as dicts, from one statement (sqlite-utils' ``query`` wraps each read
    in a savepoint: three statements, and the two around it would count as writes)."""
    cursor = db.conn.execute(sql, params)
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row)) for row in cursor]


def first(db, sql, params=()):
    rows = select(db, sql, params)
    return rows[0] if rows else None


def _domain_errors(function):
    """SQLite that cannot be opened or stays locked past the busy timeout is DatabaseUnavailable:
    callers never see a driver's exception."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except sqlite3.OperationalError as error:
            raise DatabaseUnavailable(str(error)) from error
    return wrapper


for _name, _function in list(globals().items()):
    if (inspect.isfunction(_function) and _function.__module__ == __name__
            and not _name.startswith("_") and _name not in ("transaction",)):
        globals()[_name] = _domain_errors(_function)
