"""A database made by an earlier release gains the columns added since, and its tasks read as before; processes
that start together on a new file all get its schema."""

import multiprocessing
import queue
import sqlite3

from docshift.storage import connection, tasks

# the conversions table as the first release made it: none of the columns added since
FIRST_RELEASE = """
CREATE TABLE conversions (
    id TEXT PRIMARY KEY, account_id TEXT NOT NULL, status TEXT NOT NULL, source_filename TEXT NOT NULL,
    source_type TEXT NOT NULL, source_size INTEGER NOT NULL, source_sha256 TEXT NOT NULL, idempotency_key TEXT,
    attempts INTEGER NOT NULL DEFAULT 0, worker TEXT, billing_class TEXT, period_started_at TEXT,
    result_size INTEGER, error_code TEXT, error_message TEXT, created_at TEXT NOT NULL, started_at TEXT,
    finished_at TEXT, result_expires_at TEXT, input_deleted INTEGER NOT NULL DEFAULT 0);
CREATE TABLE accounts (
    id TEXT PRIMARY KEY, marketplace TEXT NOT NULL, customer_id TEXT NOT NULL, license_arn TEXT, plan TEXT,
    status TEXT NOT NULL, activated_at TEXT, contract_ends_at TEXT, created_at TEXT NOT NULL,
    UNIQUE (marketplace, customer_id));
INSERT INTO conversions (id, account_id, status, source_filename, source_type, source_size, source_sha256,
                         created_at) VALUES ('tsk_old', 'acc_old', 'QUEUED', 'old.doc', 'doc', 1, 'x', '2026-01-01');
"""


def test_an_old_database_gains_the_new_columns(tmp_path):
    path = tmp_path / "docshift.db"
    with sqlite3.connect(path) as old:
        old.executescript(FIRST_RELEASE)
    database = connection.connect(path)
    connection.init(database)
    connection.init(database)  # twice: every process runs it at start
    columns = {row[1] for row in database.conn.execute("PRAGMA table_info(conversions)")}
    assert set(connection.ADDED_COLUMNS["conversions"]) <= columns
    assert set(connection.ADDED_COLUMNS["accounts"]) <= {row[1] for row in database.conn.execute(
        "PRAGMA table_info(accounts)")}
    task = tasks.get_task(database, "tsk_old")
    assert task.macros == "keep"  # the default for tasks submitted before the option existed
    assert task.result_extension is None and task.fidelity is None


def _init_together(path, barrier, errors):
    barrier.wait()
    try:
        connection.init(connection.connect(str(path)))
    except Exception as error:
        errors.put(repr(error))


def test_processes_starting_together_on_a_new_file_all_get_its_schema(tmp_path):
    """gunicorn's workers, the worker and ``init-db`` each run init as they start. On a new file SQLite answered
    some of them "locked" at once, without waiting (one round in 20 of six processes, before), and a web worker that
    met it failed to boot, which stopped the whole web. 40 rounds of six processes let go at once: every one ends
    well, and the file holds the schema."""
    context = multiprocessing.get_context("fork")
    errors = context.Queue()
    for round_ in range(40):
        path = tmp_path / f"{round_}.db"
        barrier = context.Barrier(6)
        processes = [context.Process(target=_init_together, args=(path, barrier, errors)) for _ in range(6)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(60)
        assert [process.exitcode for process in processes] == [0] * 6
        try:
            failed = errors.get(timeout=0.1)
        except queue.Empty:
            failed = None
        assert failed is None, f"round {round_}: {failed}"
    with sqlite3.connect(path) as made:
        tables = {row[0] for row in made.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert made.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert {"accounts", "api_keys", "conversions", "usage_periods", "tallies"} <= tables
