"""The SQLite queue on huey's own classes: its consumers sleep until whoever enqueues, in any
process, rings the queue's doorbell, so a task submitted after any idle period starts within
50 ms without polling; and a message not sealed with the queue key is dropped and logged,
never run, by huey itself once the serializer refuses it."""

import json
import pickle
import socket
import statistics
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

from huey.registry import Message

from docshift.settings import Settings
from docshift.tasks import queue as queues

KEY = "k" * 64
CONSUMER = textwrap.dedent("""
    import sys, time
    from docshift.settings import Settings
    from docshift.tasks import queue as queues
    queues.IDLE_POLL_SECONDS = 60  # only the doorbell can wake it in time
    if sys.argv[2] == "no-inotify":
        queues.Doorbell.open = classmethod(lambda cls, path: None)

    class Runner:
        def convert(self, task_id):
            print(f"took {task_id} {time.time()}", flush=True)

    queue = queues.Queue(Settings(queue_database=sys.argv[1], queue_key=sys.argv[3]), on_waiting=Runner().convert)
    print("ready", flush=True)
    queue.consumer(2).run()
""")


class Consumer:
    """A worker's consumer in a process of its own, with the queue ``sender`` enqueues to."""

    def __init__(self, tmp_path, mode="inotify"):
        path = str(tmp_path / "queue.db")
        self.sender = queues.Queue(Settings(queue_database=path, queue_key=KEY))
        self.sender.pending()  # the queue's tables exist before the consumer looks
        self.log = tmp_path / "consumer.log"
        with self.log.open("w") as log:
            self.process = subprocess.Popen([sys.executable, "-c", CONSUMER, path, mode, KEY], stdout=subprocess.PIPE,
                                            stderr=log, text=True)
        assert self.process.stdout.readline().strip() == "ready"

    def taken(self):
        """(task_id, time it started) of the next task the consumer starts, within 30 s."""
        lines = []
        reader = threading.Thread(target=lambda: lines.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(30)
        assert lines and lines[0], f"the consumer took nothing within 30 s: {self.log.read_text()}"
        word, task_id, at = lines[0].split()
        assert word == "took"
        return task_id, float(at)

    def after_idle(self, idle, rounds):
        """Seconds from enqueue to start, for ``rounds`` tasks each sent after ``idle`` seconds of nothing."""
        waits = []
        for n in range(rounds):
            time.sleep(idle)
            sent = time.time()
            self.sender.enqueue(f"tsk_after_idle_{n}")
            task_id, started = self.taken()
            assert task_id == f"tsk_after_idle_{n}"
            waits.append(started - sent)
        return waits

    def stop(self):
        self.process.kill()
        self.process.wait()
        self.process.stdout.close()


def test_an_idle_consumer_starts_a_task_another_process_enqueues_within_50_ms(tmp_path):
    # IDLE_POLL_SECONDS is 60 in the consumer: only the doorbell woke it
    consumer = Consumer(tmp_path)
    try:
        waits = consumer.after_idle(idle=1.5, rounds=5)
    finally:
        consumer.stop()
    print("after idle, ms:", [round(wait * 1000, 1) for wait in waits])
    assert statistics.median(waits) < 0.05, waits
    assert max(waits) < 5, waits


def test_without_inotify_the_consumer_polls_within_50_ms(tmp_path):
    consumer = Consumer(tmp_path, "no-inotify")
    try:
        waits = consumer.after_idle(idle=0.5, rounds=5)
    finally:
        consumer.stop()
    assert statistics.median(waits) < 0.05, waits


class Plant:
    """A pickle whose loading creates ``path``: what huey's default serializer would run."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return Path.touch, (Path(self.path),)


def test_a_message_not_sealed_with_the_key_is_dropped_and_logged_and_the_consumer_goes_on(tmp_path):
    planted = tmp_path / "planted"
    consumer = Consumer(tmp_path)
    try:
        storage = consumer.sender.huey.storage
        storage.enqueue(pickle.dumps(Plant(planted)))
        # huey's own message, sealed with another key
        other = queues.Queue(Settings(queue_database=str(tmp_path / "queue.db"), queue_key="o" * 64))
        other.enqueue("tsk_other_key")
        # sealed with the key, but a pickle inside
        storage.enqueue(consumer.sender.huey.serializer.seal.wrap({"pickle": pickle.dumps(
            Message(str(uuid.uuid4()), "docshift.tasks.queue.convert", None, 0, 0, None, ("x",), {}, None, None, None,
                    None, None, None, 0)).hex()}))
        consumer.sender.enqueue("tsk_sealed")
        assert consumer.taken()[0] == "tsk_sealed"
        deadline = time.monotonic() + 10  # the other thread may still be logging its drop
        while consumer.log.read_text().count("queue message dropped") < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        consumer.stop()
    assert not planted.exists()
    log = consumer.log.read_text()
    assert log.count("queue message dropped (docshift)") == 3, log
    assert consumer.sender.pending() == 0  # dropped, not left for the next reader


def test_the_queue_commits_without_a_sync_and_the_tasks_database_with_one(tmp_path):
    """A message is a hint the sweep sends again; a task's row is the record: only the row waits for the disk."""
    from docshift.storage import connection

    queue = queues.Queue(Settings(queue_database=str(tmp_path / "queue.db"), queue_key=KEY))
    queue.enqueue("tsk_hint")
    with queue.huey.storage.db() as conn:
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # where NORMAL never corrupts the file
    assert queue.pending() == 1
    tasks_db = connection.connect(str(tmp_path / "docshift.db"))
    assert tasks_db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_the_doorbell_rings_for_its_file_only(tmp_path):
    bell = queues.Doorbell.open(tmp_path / "queue.db.bell")
    seen = bell.count
    (tmp_path / "queue.db-wal").write_bytes(b"x")  # the queue's own writes: not yet visible
    bell.wait(seen, 0.5)
    assert bell.count == seen
    queues.Doorbell.ring(tmp_path / "queue.db.bell")  # creates it
    bell.wait(seen, 10)
    assert bell.count == seen + 1
    queues.Doorbell.ring(tmp_path / "queue.db.bell")  # touches it
    bell.wait(seen + 1, 10)
    assert bell.count == seen + 2


def test_a_doorbell_whose_folder_goes_stops_and_its_threads_poll(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    bell = queues.Doorbell.open(folder / "queue.db.bell")
    folder.rmdir()
    deadline = time.monotonic() + 10
    while bell.alive and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not bell.alive
    started = time.monotonic()
    bell.wait(bell.count, 60)  # no ring will come: it waits one poll, not the minute
    assert time.monotonic() - started < 1


REDIS_DOWN = textwrap.dedent("""
    import sys
    from docshift import logs
    from docshift.settings import Settings
    from docshift.tasks import queue as queues
    logs.configure(libraries=("huey",))  # as worker.py does
    queue = queues.Queue(Settings(queue_url=sys.argv[1], queue_key=sys.argv[2]), on_waiting=print)
    queue.consumer(1).run()
""")


def test_a_queue_that_does_not_answer_is_read_again_less_and_less_often(tmp_path):
    """Redis down: each failed read logs a traceback. At huey's steady 20 ms that was 50 a second for the whole
    outage; the waits between reads now double to a second."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "consumer.log"
    with log.open("w") as err:
        process = subprocess.Popen([sys.executable, "-c", REDIS_DOWN, f"redis://127.0.0.1:{port}/0", KEY],
                                   stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 30
        while "Error reading from queue" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(4)
    finally:
        process.kill()
        process.wait()
    failed_reads = log.read_text().count("Error reading from queue")
    assert 3 <= failed_reads <= 12, failed_reads
    # each with its traceback inside one JSON line, not as lines of plain text
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(line["logger"].startswith("huey") and "Traceback" in line["error"] for line in lines), lines[:3]
