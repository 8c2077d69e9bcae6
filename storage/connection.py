"""The SQLite file: connections, their pool, write transactions, the schema and its migrations.

Every connection docshift opens is a :class:`Connection`: SQLite that cannot be opened, or stays
locked past the busy timeout, raises ``DatabaseUnavailable`` from the statement itself, so no
caller ever sees the driver's exception. Times are stored as ISO 8601 text (:func:`iso`).
"""

import functools
import os
import random
import secrets
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime
from importlib.resources import files
from typing import Any

from sqlite_utils import Database

from docshift.errors import DatabaseUnavailable

# the top-level schema.sql, packaged beside this module (storage/schema.sql links to it)
SCHEMA = files("docshift.storage") / "schema.sql"

# a row as the dict of its columns, as sqlite-utils and ``select`` give it
Row = dict[str, Any]


def now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    """ISO 8601 UTC with ``Z``, second precision kept to microseconds for ordering."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def connect(path: str) -> Database:
    """Open the database; autocommit unless inside :func:`transaction`."""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False,
                           factory=_Cooperative if _gevent_patched() else Connection)
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA foreign_keys = ON")
    # what a row forgets (a sealed document password) is overwritten in the file, not left in a free page
    conn.execute("PRAGMA secure_delete = ON")
    return Database(conn)


def _unavailable(error: sqlite3.Error) -> DatabaseUnavailable:
    return DatabaseUnavailable(str(error))


class Connection(sqlite3.Connection):
    """docshift's connection: the driver's ``OperationalError`` (cannot open, locked past the busy
    timeout, a failing disk) comes out as ``DatabaseUnavailable``; a constraint's
    ``IntegrityError`` stays what it is, for the verbs that turn it into the domain's own."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        try:
            super().__init__(*args, **kwargs)
        except sqlite3.OperationalError as error:
            raise _unavailable(error) from error

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        try:
            return super().execute(sql, parameters)
        except sqlite3.OperationalError as error:
            raise _unavailable(error) from error

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        try:
            return super().executemany(sql, parameters)
        except sqlite3.OperationalError as error:
            raise _unavailable(error) from error

    def executescript(self, script: str, /) -> sqlite3.Cursor:
        try:
            return super().executescript(script)
        except sqlite3.OperationalError as error:
            raise _unavailable(error) from error

    def commit(self) -> None:
        try:
            return super().commit()
        except sqlite3.OperationalError as error:
            raise _unavailable(error) from error


_READS = ("SELECT", "PRAGMA")


class CooperativeConnection(sqlite3.Connection):
    """A connection for a process that runs gevent's hub (the web): a statement that may wait
    for the write lock, or for the disk at commit, runs in a native thread, so one request's
    wait never stops the hub from answering the others. Reads run inline: in WAL mode they
    take no lock that a writer holds."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if sql.lstrip()[:6].upper() in _READS:
            return super().execute(sql, parameters)
        return _off_hub(sqlite3.Connection.execute, self, sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        return _off_hub(sqlite3.Connection.executemany, self, sql, parameters)

    def commit(self) -> None:
        return _off_hub(sqlite3.Connection.commit, self)

    def close(self) -> None:
        return _off_hub(sqlite3.Connection.close, self)


class _Cooperative(Connection, CooperativeConnection):
    """docshift's connection in a gevent process: off the hub, and the driver's errors translated."""


def _off_hub(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` on gevent's thread pool. What it raises comes back as a value and is raised here: gevent's
    hub prints every exception its pool's threads raise, even one the caller handles (a racing Idempotency-Key's
    constraint, a busy database), as a bare traceback in the log."""
    from gevent import get_hub  # only a patched process gets here: the worker never imports gevent
    raised, value = get_hub().threadpool.apply(_caught, (function, args))
    if raised:
        raise value
    return value


def _caught(function: Callable[..., Any], args: tuple[Any, ...]) -> tuple[bool, Any]:
    try:
        return False, function(*args)
    except Exception as error:
        return True, error


def cooperatively(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)``: in a gevent process on its thread pool (a disk write and its fsync must not stall every
    request the process serves), else right here."""
    return _off_hub(function, *args) if _gevent_patched() else function(*args)


def _gevent_patched() -> bool:
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and monkey.is_module_patched("threading")


def connection_class(synced: bool = True) -> type[sqlite3.Connection]:
    """For a connection of another library (the huey queue's, which handles sqlite3's own errors):
    ``CooperativeConnection`` where gevent has patched this process, else sqlite3's own. Not ``synced``: its commits
    do not wait for the disk (``synchronous = NORMAL``; huey's own choice is the disk's sync or none at all). In WAL
    mode a power cut may then lose the last commits, never the file: for what another record can send again (the
    SQLite queue's messages). Each enqueue and dequeue spares a sync: 0.2-0.8 ms on this VM's disk."""
    base = CooperativeConnection if _gevent_patched() else sqlite3.Connection
    return base if synced else _unsynced(base)


@functools.cache
def _unsynced(base: type[sqlite3.Connection]) -> type[sqlite3.Connection]:
    class Unsynced(base):  # type: ignore[valid-type,misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.execute("PRAGMA synchronous = NORMAL")

    return Unsynced


class Pool:
    """Open connections to one database, handed to one request after another. Opening one, with
    its pragmas and the first read of the schema, costs more CPU than the rest of a poll.

    A connection comes back only outside a transaction (one an error left open is rolled
    back, or closed if it cannot be); a pool inherited through ``fork`` is left to its parent.
    """

    def __init__(self, path: str, size: int = 16) -> None:
        self.path, self.size = path, size
        self._idle: list[Database] = []
        self._pid = os.getpid()

    def take(self) -> Database:
        if self._pid != os.getpid():  # a forked child: these connections are the parent's
            self._idle, self._pid = [], os.getpid()
        try:
            return self._idle.pop()
        except IndexError:
            return connect(self.path)

    def give_back(self, db: Database) -> None:
        try:
            if db.conn.in_transaction:
                db.conn.execute("ROLLBACK")
        except (sqlite3.Error, DatabaseUnavailable):
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
    "protection": "TEXT NOT NULL DEFAULT 'keep' CHECK (protection IN ('keep', 'remove'))",
    "sealed_password": "TEXT",
    "password_digest": "TEXT",
    "filename_digest": "TEXT",
}, "accounts": {
    "ran_long_at": "TEXT",
}}


# seconds the processes that start together (gunicorn's workers, the worker, ``init-db``) wait out one another's init
INIT_PATIENCE_SECONDS = 30


def init(db: Database) -> None:
    """The schema, its added columns and its data migrations; every process runs it as it starts.

    Processes started together race here, and SQLite answers some of those races "locked" at once, without waiting
    out its busy timeout: WAL being switched on in a new file, and a statement that began as a reader and must write
    after another connection wrote. A web worker that met it failed to boot, and gunicorn then stopped the whole web
    (one round in 20 of six processes starting on a new file). So the schema goes in one transaction that takes the
    write lock up front, and an init answered "locked" is made again (every step of it is idempotent)."""
    deadline = time.monotonic() + INIT_PATIENCE_SECONDS
    while True:
        try:
            _init(db)
            return
        except DatabaseUnavailable as error:
            if db.conn.in_transaction:
                db.conn.execute("ROLLBACK")
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(random.uniform(0.02, 0.1))


def _init(db: Database) -> None:
    db.conn.execute("PRAGMA journal_mode = WAL")  # not inside a transaction: the script's own asks for it again
    db.conn.executescript(f"BEGIN IMMEDIATE;\n{SCHEMA.read_text()}\nCOMMIT;")
    for table, columns in ADDED_COLUMNS.items():
        for column, kind in columns.items():
            if column not in _columns(db, table):
                try:
                    db.conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
                except DatabaseUnavailable:  # another process may have added it just now
                    if column not in _columns(db, table):
                        raise
    # results stored before each run had a key of its own were under results/<task id>
    db.conn.execute("UPDATE conversions SET result_key = 'results/' || id "
                    "WHERE result_key IS NULL AND status IN ('SUCCEEDED', 'EXPIRED')")


def _columns(db: Database, table: str) -> set[str]:
    return {row[1] for row in db.conn.execute(f"PRAGMA table_info({table})")}


def ping(db: Database) -> None:
    db.execute("SELECT 1")


@contextmanager
def transaction(db: Database, synced: bool = True) -> Iterator[Database]:
    """A write transaction that takes the lock up front (no upgrade deadlocks). Inside another,
    it is part of that one, which commits or rolls back the whole. Not ``synced``: its commit does not wait
    for the disk (``synchronous = NORMAL``: in WAL mode a power cut may lose it, never the file), for a write
    that the service does again where it is lost; the connection's next synced commit makes it durable too."""
    if db.conn.in_transaction:
        yield db
        return
    level = None if synced else db.conn.execute("PRAGMA synchronous").fetchone()[0]
    with _one_writer(db):
        if level is not None:
            db.conn.execute("PRAGMA synchronous = NORMAL")
        try:
            db.conn.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.conn.execute("ROLLBACK")
                raise
            db.conn.execute("COMMIT")
        finally:
            if level is not None:
                db.conn.execute(f"PRAGMA synchronous = {int(level)}")


_cooperative_writer: AbstractContextManager[Any] | None = None


def _one_writer(db: Database) -> AbstractContextManager[Any]:
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


def select(db: Database, sql: str, params: Sequence[Any] = ()) -> list[Row]:
    """The rows of a read, as dicts, from one statement (sqlite-utils' ``query`` wraps each read
    in a savepoint: three statements, and the two around it would count as writes)."""
    cursor = db.conn.execute(sql, params)
    names = [column[0] for column in cursor.description]
    try:
        return [dict(zip(names, row)) for row in cursor]
    except sqlite3.OperationalError as error:  # a row after the first that SQLite could not read
        raise _unavailable(error) from error


def first(db: Database, sql: str, params: Sequence[Any] = ()) -> Row | None:
    rows = select(db, sql, params)
    return rows[0] if rows else None
