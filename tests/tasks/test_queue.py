"""The SQLite queue's consumers sleep until whoever enqueues, in any process, rings the queue's
doorbell: a task submitted after any idle period is taken at once, without polling."""

import subprocess
import sys
import textwrap
import threading
import time

from docshift.settings import Settings
from docshift.tasks import queue as queues

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
            raise SystemExit(0)

    queue = queues.Queue(Settings(queue_database=sys.argv[1], queue_key="k" * 64), on_waiting=Runner().convert)
    print("ready", flush=True)
    queue.consumer(1).run()
""")


def take_after_idle(tmp_path, mode):
    path = str(tmp_path / "queue.db")
    sender = queues.Queue(Settings(queue_database=path, queue_key="k" * 64))
    sender.pending()  # the queue's tables exist before the consumer looks
    consumer = subprocess.Popen([sys.executable, "-c", CONSUMER, path, mode], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
    try:
        assert consumer.stdout.readline().strip() == "ready"
        time.sleep(2)  # idle, well past any poll interval huey would back off to
        sent = time.time()
        sender.enqueue("tsk_after_idle")
        lines = []
        reader = threading.Thread(target=lambda: lines.append(consumer.stdout.readline()), daemon=True)
        reader.start()
        reader.join(30)
        assert lines and lines[0], "the consumer took nothing within 30 s"
        word, task_id, at = lines[0].split()
        assert (word, task_id) == ("took", "tsk_after_idle")
        return float(at) - sent
    finally:
        consumer.kill()
        consumer.wait()
        consumer.stdout.close()


def test_an_idle_consumer_takes_a_task_when_another_process_enqueues_it(tmp_path):
    # IDLE_POLL_SECONDS is 60 in the consumer: only the doorbell woke it
    assert take_after_idle(tmp_path, "inotify") < 5


def test_without_inotify_the_consumer_polls(tmp_path):
    assert take_after_idle(tmp_path, "no-inotify") < 5


def test_the_doorbell_rings_for_its_file_only(tmp_path):
    bell = queues.Doorbell.open(tmp_path / "queue.db.bell")
    seen = bell.count
    (tmp_path / "queue.db-wal").write_bytes(b"x")  # the queue's own writes: not yet visible
    bell.wait(seen, 0.5)
    assert bell.count == seen
    queues.Doorbell.ring(tmp_path / "queue.db.bell")
    bell.wait(seen, 10)
    assert bell.count > seen
