"""A new task row against the account's cap, on a real SQLite database: the cap refuses a new task, never an
identical request (its Idempotency-Key) whose twin committed while it came."""

import pytest

from docshift.errors import IdempotencyKeyTaken, TooManyUnfinished
from docshift.storage import connection, tasks
from docshift.storage.connection import iso, now


@pytest.fixture
def db(tmp_path):
    database = connection.connect(str(tmp_path / "docshift.db"))
    connection.init(database)
    database.table("accounts").insert({"id": "acc_a", "marketplace": "local", "customer_id": "a",
                                       "plan": "starter", "status": "active", "created_at": iso(now())})
    yield database
    database.conn.close()


def row(key=None):
    return {"id": connection.new_id("tsk"), "account_id": "acc_a", "status": "QUEUED", "source_filename": "a.doc",
            "source_type": "doc", "source_size": 1, "source_sha256": "0" * 64, "idempotency_key": key,
            "created_at": iso(now())}


def test_at_the_cap_a_key_already_committed_is_taken_not_too_many(db):
    tasks.create_task(db, row("twin-of-a-request"), max_unfinished=1)
    with pytest.raises(IdempotencyKeyTaken):
        tasks.create_task(db, row("twin-of-a-request"), max_unfinished=1)
    assert tasks.unfinished_count(db, "acc_a") == 1


@pytest.mark.parametrize("key", [None, "another-request"])
def test_at_the_cap_a_new_task_is_refused_and_nothing_committed(db, key):
    tasks.create_task(db, row("the-first-request"), max_unfinished=1)
    with pytest.raises(TooManyUnfinished):
        tasks.create_task(db, row(key), max_unfinished=1)
    assert db.execute("SELECT count(*) FROM conversions").fetchone()[0] == 1
