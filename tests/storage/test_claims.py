"""The fair claim's reserve on a real SQLite database: an account whose files run long is kept from the last
free slot while another account is about, so that account's next file starts at once."""

from datetime import timedelta

import pytest

from docshift.storage import connection, tasks
from docshift.storage.connection import iso, now

SLOTS = tasks.Slots(total=2, long_seconds=10)


@pytest.fixture
def db(tmp_path):
    database = connection.connect(str(tmp_path / "docshift.db"))
    connection.init(database)
    for account in ("acc_long", "acc_other"):
        database.table("accounts").insert({"id": account, "marketplace": "local", "customer_id": account,
                                           "plan": "starter", "status": "active", "created_at": iso(now())})
    yield database
    database.conn.close()


def add(db, account, status, started=None, created=None):
    """A task of ``account``; ``started`` and ``created`` are how many seconds ago (unless given, created
    100 s ago, each task a millisecond after the one before)."""
    number = db.execute("SELECT count(*) FROM conversions").fetchone()[0]
    at = now()
    db.table("conversions").insert({
        "id": f"tsk_{number}", "account_id": account, "status": status, "source_filename": "a.xls",
        "source_type": "xls", "source_size": 1, "source_sha256": "x",
        "created_at": iso(at - timedelta(seconds=created if created is not None else 100 - number * 0.001)),
        "started_at": iso(at - timedelta(seconds=started)) if started is not None else None})
    return f"tsk_{number}"


def claimed_account(db, slots=SLOTS):
    claimed = tasks.claim_next(db, "worker", slots)
    return None if claimed is None else claimed[0].account_id


def test_an_account_running_a_long_file_may_not_take_the_last_slot_while_another_is_about(db):
    add(db, "acc_other", "SUCCEEDED", started=120)  # the other account converted a file two minutes ago
    add(db, "acc_long", "PROCESSING", started=30)  # running for 30 s, past the 10 s that counts as long
    waiting = [add(db, "acc_long", "QUEUED") for _ in range(3)]
    assert claimed_account(db) is None, "the last free slot went to the account already running a long file"
    assert {tasks.get_task(db, t).status for t in waiting} == {"QUEUED"}
    mine = add(db, "acc_other", "QUEUED", created=0)
    assert tasks.claim_next(db, "worker", SLOTS)[0].id == mine  # the other account's file starts at once


def test_an_account_alone_keeps_every_slot(db):
    add(db, "acc_long", "PROCESSING", started=30)
    add(db, "acc_long", "QUEUED")
    assert claimed_account(db) == "acc_long"


def test_another_accounts_activity_counts_for_ten_minutes(db):
    add(db, "acc_other", "SUCCEEDED", started=11 * 60)
    add(db, "acc_long", "PROCESSING", started=30)
    add(db, "acc_long", "QUEUED")
    assert claimed_account(db) == "acc_long"


def test_short_files_keep_every_slot(db):
    add(db, "acc_other", "SUCCEEDED", started=5)
    add(db, "acc_long", "PROCESSING", started=2)
    add(db, "acc_long", "QUEUED")
    assert claimed_account(db) == "acc_long"


def test_a_long_run_that_ended_holds_the_account_back_for_ten_minutes(db):
    add(db, "acc_other", "SUCCEEDED", started=5)
    ended = add(db, "acc_long", "PROCESSING", started=40)
    tasks.note_run(db, tasks.get_task(db, ended), SLOTS.long_seconds)
    db.execute("UPDATE conversions SET status = 'SUCCEEDED' WHERE id = ?", [ended])
    add(db, "acc_long", "PROCESSING", started=1)  # its next file, just started: not long yet
    add(db, "acc_long", "QUEUED")
    assert claimed_account(db) is None
    db.execute("UPDATE accounts SET ran_long_at = ? WHERE id = 'acc_long'", [iso(now() - timedelta(minutes=11))])
    assert claimed_account(db) == "acc_long"


def test_a_short_run_leaves_no_mark(db):
    ended = add(db, "acc_long", "PROCESSING", started=3)
    tasks.note_run(db, tasks.get_task(db, ended), SLOTS.long_seconds)
    assert db.table("accounts").get("acc_long")["ran_long_at"] is None


def test_only_the_last_free_slot_is_kept_back(db):
    add(db, "acc_other", "SUCCEEDED", started=5)
    add(db, "acc_long", "PROCESSING", started=30)
    add(db, "acc_long", "QUEUED")
    add(db, "acc_long", "QUEUED")
    three = tasks.Slots(total=3, long_seconds=10)
    assert claimed_account(db, three) == "acc_long"  # two of three slots
    assert claimed_account(db, three) is None  # not the third


def test_an_account_with_nothing_running_takes_a_slot_whatever_its_history(db):
    add(db, "acc_other", "PROCESSING", started=1)
    db.execute("UPDATE accounts SET ran_long_at = ? WHERE id = 'acc_long'", [iso(now())])
    add(db, "acc_long", "QUEUED")
    assert claimed_account(db) == "acc_long"
    # and with one slot in all, there is nothing to keep back
    add(db, "acc_long", "QUEUED")
    db.execute("UPDATE conversions SET status = 'SUCCEEDED' WHERE account_id = 'acc_other'")
    assert claimed_account(db, tasks.Slots(total=1, long_seconds=10)) == "acc_long"


def test_the_check_reads_an_index_not_the_whole_table(db):
    plan = " ".join(row[3] for row in db.execute(
        "EXPLAIN QUERY PLAN SELECT 1 FROM conversions WHERE started_at > ? AND account_id != ? LIMIT 1",
        ["x", "y"]))
    assert "conversions_started" in plan


def running(db, account, started, worker="worker"):
    """A run of ``account`` by ``worker``, started ``started`` seconds ago."""
    task_id = add(db, account, "PROCESSING", started=started)
    db.execute("UPDATE conversions SET worker = ? WHERE id = ?", [worker, task_id])
    return task_id


def preempted(db, slots, worker):
    """The id of the run ``to_preempt`` picks, or None."""
    run = tasks.to_preempt(db, slots, worker)
    return run and run.id


def test_a_first_burst_of_long_files_gives_up_its_youngest_long_run_to_a_waiting_account(db):
    """Before anything was known of them, an account's long files took both slots; another account's file waits."""
    running(db, "acc_long", started=30)
    youngest_long = running(db, "acc_long", started=12)
    add(db, "acc_long", "QUEUED")
    assert preempted(db, SLOTS, "worker") is None  # only the same account waits: nothing to give up
    add(db, "acc_other", "QUEUED", created=0)
    assert preempted(db, SLOTS, "worker") == youngest_long
    assert preempted(db, SLOTS, "another worker") is None  # only a worker's own runs


def test_nothing_is_given_up_for_short_runs_a_free_slot_or_an_account_that_already_runs(db):
    first = running(db, "acc_long", started=30)
    second = running(db, "acc_long", started=5)  # not long yet
    waiting = add(db, "acc_other", "QUEUED", created=0)
    assert preempted(db, SLOTS, "worker") == first  # the only one past 10 s
    db.execute("UPDATE conversions SET started_at = ? WHERE id = ?", [iso(now() - timedelta(seconds=5)), first])
    assert preempted(db, SLOTS, "worker") is None  # neither is long: both may end soon
    db.execute("UPDATE conversions SET status = 'SUCCEEDED' WHERE id = ?", [second])
    assert preempted(db, SLOTS, "worker") is None  # a slot is free: the waiting file takes it
    db.execute("UPDATE conversions SET status = 'PROCESSING', started_at = ? WHERE id IN (?, ?)",
               [iso(now() - timedelta(seconds=30)), first, second])
    running(db, "acc_other", started=1)  # the waiting account runs a file already (3 slots here)
    assert preempted(db, tasks.Slots(total=3, long_seconds=10), "worker") is None
    assert tasks.get_task(db, waiting).status == "QUEUED"


def test_one_run_each_is_never_given_up(db):
    running(db, "acc_long", started=30)
    running(db, "acc_other", started=30)
    db.table("accounts").insert({"id": "acc_third", "marketplace": "local", "customer_id": "acc_third",
                                 "plan": "starter", "status": "active", "created_at": iso(now())})
    add(db, "acc_third", "QUEUED", created=0)
    assert preempted(db, SLOTS, "worker") is None


def test_the_coordinator_gives_up_a_node_s_run_whatever_job_holds_it(db):
    """On Redis every run is held by a job of its own (``job:<id>``): the coordinator picks among all of them."""
    running(db, "acc_long", started=30, worker="job:0a1b")
    youngest_long = running(db, "acc_long", started=12, worker="job:2c3d")
    add(db, "acc_other", "QUEUED", created=0)
    run = tasks.to_preempt(db, SLOTS, tasks.JOBS)
    assert (run.id, run.worker) == (youngest_long, "job:2c3d")
    assert preempted(db, SLOTS, "worker") is None  # no one-box worker's run


def test_a_claim_commits_without_a_sync_and_a_success_with_one(db):
    """A claim a power cut loses leaves its task QUEUED, as recovery would: only the success, which is counted,
    waits for the disk. The level each commit ran at, as SQLite was told it."""
    from docshift.accounts import billing

    task_id = add(db, "acc_other", "QUEUED")
    said = []
    db.conn.set_trace_callback(said.append)
    task, _ = tasks.claim_next(db, "worker")
    claim = said[:]
    said.clear()
    tasks.mark_succeeded(db, task_id, 10, 1800, billing.rule({"starter": 10}), lease=tasks.lease_of(task))
    db.conn.set_trace_callback(None)
    assert claim.index("PRAGMA synchronous = NORMAL") < claim.index("BEGIN IMMEDIATE") < claim.index("COMMIT") \
        < claim.index("PRAGMA synchronous = 2")
    assert "COMMIT" in said and not any(statement.startswith("PRAGMA synchronous") for statement in said)
    assert db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL again, for every other commit
    assert tasks.get_task(db, task_id).status == "SUCCEEDED"
