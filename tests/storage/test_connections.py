"""How the web holds SQLite: connections pooled per process, and under gevent a statement that
may wait for the write lock runs off the hub, so one request's wait never stalls the others."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from docshift.errors import DatabaseUnavailable
from docshift.storage import connection, liveness

HUB_PROBE = textwrap.dedent("""
    from gevent import monkey
    monkey.patch_all()
    import json, subprocess, sys, time
    import gevent
    from docshift.storage import connection
    from docshift.settings import Settings
    from docshift.tasks.queue import Queue

    path, queue_path = sys.argv[1], sys.argv[2]
    conn = connection.connect(path)
    conn.execute("CREATE TABLE t (x)")
    # another process holds the write lock for a second, as the worker does while it claims
    blocker = subprocess.Popen([sys.executable, "-c", '''
    import sqlite3, sys, time
    c = sqlite3.connect(sys.argv[1], isolation_level=None)
    c.execute("BEGIN IMMEDIATE")
    print("locked", flush=True)
    time.sleep(1)
    c.execute("ROLLBACK")
    ''', path], stdout=subprocess.PIPE, text=True)
    assert blocker.stdout.readline().strip() == "locked"
    ticks = []

    def ticker():  # another request's greenlet: it runs only while the hub is free
        while True:
            ticks.append(time.monotonic())
            gevent.sleep(0.01)

    gevent.spawn(ticker)
    started = time.monotonic()
    with connection.transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
    waited = time.monotonic() - started
    blocker.wait()
    during = [t for t in ticks if started <= t <= started + waited]
    queue = Queue(Settings(queue_database=queue_path, queue_key="k" * 32))
    print(json.dumps({"waited": waited, "ticks": len(during),
                      "gap": max((b - a for a, b in zip(during, during[1:])), default=waited),
                      "rows": conn.execute("SELECT count(*) FROM t").fetchone()[0],
                      "cooperative": [isinstance(c, connection.CooperativeConnection)
                                      for c in (conn.conn, queue.huey.storage.conn)]}))
""")


def test_a_write_waiting_for_the_lock_leaves_the_hub_free(tmp_path):
    answer = subprocess.run([sys.executable, "-c", HUB_PROBE, str(tmp_path / "d.db"), str(tmp_path / "q.db")],
                            capture_output=True, text=True, timeout=60)
    assert answer.returncode == 0, answer.stderr[-2000:]
    seen = json.loads(answer.stdout.strip().splitlines()[-1])
    assert seen["waited"] >= 0.8 and seen["rows"] == 1  # the insert waited for the lock, then landed
    # meanwhile the hub kept running other greenlets, every 10 ms or so
    assert seen["ticks"] >= 40 and seen["gap"] < 0.2, seen
    assert seen["cooperative"] == [True, True]  # ours and the queue's


def test_without_gevent_connections_are_plain(tmp_path):
    assert type(connection.connect(str(tmp_path / "d.db")).conn) is connection.Connection


def test_a_database_locked_past_the_busy_timeout_is_unavailable(tmp_path):
    """The connection itself turns the driver's error into the domain's: in a verb, in a transaction
    a caller opens, in a bare statement. Nobody upstream sees sqlite3's exceptions."""
    path = str(tmp_path / "d.db")
    conn = connection.connect(path)
    connection.init(conn)
    conn.execute("PRAGMA busy_timeout = 50")
    blocker = connection.connect(path)
    blocker.conn.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(DatabaseUnavailable, match="locked"):
            liveness.heartbeat(conn)
        with pytest.raises(DatabaseUnavailable, match="locked"), connection.transaction(conn):
            pass
        with pytest.raises(DatabaseUnavailable, match="locked"):
            conn.execute("INSERT INTO tallies (name, value) VALUES ('x', 1)")
    finally:
        blocker.conn.execute("ROLLBACK")
    liveness.add_tally(conn, "x")  # and once the lock is gone, the same connection writes
    assert liveness.tally(conn, "x") == 1


def test_the_pool_hands_back_the_same_connection(tmp_path):
    pool = connection.Pool(str(tmp_path / "d.db"))
    first = pool.take()
    pool.give_back(first)
    assert pool.take() is first
    assert pool.take() is not first  # taken: the next request opens another


def test_a_transaction_left_open_is_rolled_back_before_reuse(tmp_path):
    path = str(tmp_path / "d.db")
    connection.connect(path).execute("CREATE TABLE t (x)")
    pool = connection.Pool(path)
    conn = pool.take()
    conn.conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO t VALUES (1)")
    pool.give_back(conn)  # as after a request that failed mid-transaction
    again = pool.take()
    assert again is conn and not again.conn.in_transaction
    assert connection.connect(path).execute("SELECT count(*) FROM t").fetchone()[0] == 0
    # and the write lock is free for everyone else
    other = connection.connect(path)
    other.conn.execute("BEGIN IMMEDIATE")
    other.conn.execute("ROLLBACK")


def test_a_forked_child_opens_its_own_connections(tmp_path):
    pool = connection.Pool(str(tmp_path / "d.db"))
    parent = pool.take()
    pool.give_back(parent)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        os.write(write, b"1" if pool.take() is not parent else b"0")
        os._exit(0)
    os.waitpid(child, 0)
    assert os.read(read, 1) == b"1"
    assert pool.take() is parent  # the parent's pool is as it was
