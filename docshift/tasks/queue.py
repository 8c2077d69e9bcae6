"""The huey queues, built from configuration when first used (never at import).

One box (the default): one SQLite queue. A message says "a task is waiting"; the
worker thread that takes it claims the fairest waiting task in the database (see
``storage.tasks.claim_next``), not necessarily the one that sent it, so one account's
backlog never holds another account's task behind it. The sweep keeps at least as
many messages as there are QUEUED tasks, so a lost message only delays a task.

Conversion nodes (``DOCSHIFT_QUEUE_URL=redis://...``): two queues on Redis. The
coordinator's queue (``docshift``) carries "a task is waiting" from the web and
outcomes from the nodes; the nodes' queue (``docshift-jobs``) carries conversion
jobs, which the coordinator dispatches one per free node slot, in fair order.

Both are huey's own classes, given two things through its public arguments:

- ``serializer=``: every message is JSON of plain fields, sealed with the queue key
  (``messages.SealedJSON``), never a pickle. One that is not sealed with the key (or, on Redis,
  sealed longer ago than the ``ttl`` its reader gives) makes the serializer log it and raise.
  huey's consumer and scheduler have taken it off the queue by then, and log the error and go
  on (``pending`` skips it): it is dropped, never run. docshift revokes nothing, so the only
  revocation huey could find (on Redis) is a forged one: its read raises the same way, and the
  messages it names are dropped, as whoever can write there could drop them anyway; the sweep
  and the leases bring their tasks back. (huey looks for one before each task: 11 us on SQLite,
  0.15 ms on Redis.)
- ``storage_class=`` (SQLite only): huey's SQLite storage with two of its methods extended, the
  one thing huey has no hook for. huey's consumer polls an empty SQLite queue with a backoff up
  to 10 s, which a task submitted after idle would wait for; ``enqueue`` rings a doorbell once the
  message is committed and ``dequeue`` sleeps until one rings (``blocking``, huey's flag for a
  storage that waits in ``dequeue``). Measured from enqueue to the task starting, on 2 busy
  cores: huey alone took 2.4 s (median) after 30 s of idle, and takes up to 10 s after longer;
  held to polling every 20 ms (its ``initial_delay``, ``backoff`` and ``max_delay``), 14 ms, at
  1.6% of a core while idle for 2 threads and 2.3% for 8; with the doorbell, 3-6 ms at 0.2%.
  Redis needs neither: huey's Redis storage blocks on BRPOP.
"""

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from huey import RedisHuey, SqliteHuey
from huey.exceptions import HueyException
from huey.storage import SqliteStorage
from inotify_simple import INotify, flags

from docshift.errors import ForgedMessage
from docshift.settings import Settings, on_redis
from docshift.tasks.messages import SealedJSON, queue_keys

log = logging.getLogger("docshift.queue")

# where the kernel cannot say that the SQLite queue changed, each worker thread polls it this
# often (huey's default backs off to 10 s, which a task submitted after idle would wait for)
POLL_SECONDS = 0.02
# where it can, a thread sleeps until an enqueue rings the queue's doorbell; it looks anyway this
# often, as a safety net
IDLE_POLL_SECONDS = 1.0
READ_RETRY_SECONDS = 1.0  # the longest wait between a consumer's reads of a queue that failed


def _told_already(record: logging.LogRecord) -> bool:
    """huey logs a message the serializer refused as an error, with a traceback of its own and
    the serializer's; the serializer's one line has said what it was."""
    return not (record.exc_info and isinstance(record.exc_info[1], ForgedMessage))


def _huey(config: Settings, name: str | None, ttl: float | None = None) -> Any:
    for where in ("huey", "huey.consumer.Worker"):  # pending, scheduled, the scheduler; the consumer
        logging.getLogger(where).addFilter(_told_already)  # once: a filter already there is not added again
    # only Redis is reached by others, who could replay what they saw; the SQLite queue is this box's file
    serializer = SealedJSON(queue_keys(config), name, ttl if on_redis(config) else None)
    if on_redis(config):
        return RedisHuey(name, url=config.queue_url, results=False, blocking=True, read_timeout=1,
                         serializer=serializer)
    from docshift.storage import connection
    # unsynced: a message only says that a task waits; the record is its row, which the sweep sends a lost one for
    return SqliteHuey(name, filename=config.queue_database, results=False,
                      factory=connection.connection_class(synced=False), serializer=serializer,
                      storage_class=WakingSqliteStorage)


class Doorbell:
    """A file that whoever enqueues touches once the message is committed, and that the threads
    waiting to dequeue sleep on: inotify (through ``inotify_simple``) tells this process, which
    wakes them. (The queue's own WAL would not do: a commit becomes visible only after its last
    write to it.) ``open`` gives None where inotify is missing (not Linux, no watches left)."""

    # a touch is an ATTRIB, or a CLOSE_WRITE where it creates the file; not MODIFY, which every
    # SQLite commit in the folder would send. An overflow may have lost a ring: it counts as one
    WATCH = flags.ATTRIB | flags.CLOSE_WRITE | flags.MOVED_TO

    def __init__(self, inotify: INotify, name: str) -> None:
        self._inotify, self._name = inotify, name
        self._rung = threading.Condition()
        self.count, self.alive = 0, True
        threading.Thread(target=self._listen, name="queue-doorbell", daemon=True).start()

    @staticmethod
    def ring(path: str | Path) -> None:
        try:
            Path(path).touch()
        except OSError as error:  # the waiting threads' safety-net poll finds the message
            log.warning("queue doorbell not rung: %r", error)

    @classmethod
    def open(cls, path: str | Path) -> "Doorbell | None":
        path = Path(path).absolute()
        try:
            inotify = INotify()
        except (OSError, AttributeError):  # AttributeError: a libc without inotify
            return None
        try:  # the folder, not the file: the file may not exist yet, or be replaced
            inotify.add_watch(path.parent, cls.WATCH)
        except OSError:
            inotify.close()
            return None
        return cls(inotify, path.name)

    def _listen(self) -> None:
        while True:
            try:
                events = self._inotify.read()
            except (OSError, ValueError) as error:
                self._stop(repr(error))
                return
            if any(event.mask & flags.IGNORED for event in events):  # the folder is gone: no more rings
                self._stop("the watch ended")
                return
            if any(event.name == self._name or event.mask & flags.Q_OVERFLOW for event in events):
                with self._rung:
                    self.count += 1
                    self._rung.notify_all()

    def _stop(self, why: str) -> None:
        self._inotify.close()
        log.warning("queue doorbell stopped (%s): idle threads poll every %s s", why, POLL_SECONDS)
        with self._rung:
            self.alive = False
            self._rung.notify_all()

    def wait(self, seen: int | None, timeout: float) -> None:
        """Until a ring after ``seen`` (the ``count`` read before the queue was last looked at),
        or ``timeout`` (``POLL_SECONDS`` once the doorbell has stopped)."""
        with self._rung:
            self._rung.wait_for(lambda: self.count != seen or not self.alive,
                                timeout if self.alive else POLL_SECONDS)


class WakingSqliteStorage(SqliteStorage):
    """huey's SQLite queue, whose consumer threads sleep until a message is enqueued (by the web or
    anyone else: ``enqueue`` rings the doorbell) instead of polling: a task submitted after any
    idle period is taken at once, and an idle worker costs almost nothing."""

    blocking = True  # huey's consumer then never sleeps between dequeues: ``dequeue`` waits

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bell_path = f"{self.filename}.bell"
        self._bell: Doorbell | Literal[False] | None
        self._bell, self._bell_lock = None, threading.Lock()

    def enqueue(self, data: bytes, priority: int | None = None) -> None:
        super().enqueue(data, priority)
        Doorbell.ring(self.bell_path)

    def _doorbell(self) -> Doorbell | Literal[False]:
        with self._bell_lock:  # opened by the first dequeue: a side that only enqueues never watches
            if self._bell is None:
                self._bell = Doorbell.open(self.bell_path) or False
            return self._bell

    def dequeue(self) -> bytes | None:
        bell = self._doorbell()
        seen = bell.count if bell else None
        data = super().dequeue()
        if data is None:
            if bell:
                bell.wait(seen, IDLE_POLL_SECONDS)
            else:
                time.sleep(POLL_SECONDS)
        return data


class _Huey:
    """A huey instance named ``name``, made on first use, with the tasks ``_register`` adds. Each kind of
    message is handed to the function given for it (``handlers``, by kind); a side that only enqueues gives
    none: the queue knows nothing of who does the work. A side that reads gives ``ttl``: on Redis, a
    message sealed longer ago than that is dropped."""

    name: str | None = None

    def __init__(self, config: Settings, ttl: float | None = None, **handlers: Callable[[Any], Any]) -> None:
        self.config = config
        self.ttl = ttl
        self.handlers = handlers
        self._huey = None

    def _hand(self, kind: str, message: Any) -> Any:
        handler = self.handlers.get(kind)
        if handler is None:
            raise RuntimeError(f"the {self.name} queue has no handler for {kind} messages here")
        return handler(message)

    @property
    def huey(self) -> Any:
        if self._huey is None:
            huey = _huey(self.config, self.name, self.ttl)
            self._register(huey)
            self._huey = huey
        return self._huey

    def _register(self, huey: Any) -> None:
        raise NotImplementedError


class Queue(_Huey):
    """The coordinator's queue: the web says a task is waiting (to ``on_waiting(task_id)``); a node reports an
    outcome (to ``on_outcome(outcome)``)."""

    name = "docshift"

    def _register(self, huey: Any) -> None:
        self._convert = huey.task(name="convert")(self._waiting)
        self._outcome = huey.task(name="outcome")(self._reported)

    def enqueue(self, task_id: str | None = None, delay: float | None = None) -> None:
        """Say that a task is waiting (``task_id`` names the one that caused it, for the log)."""
        self.huey  # noqa: B018 - builds the task wrappers on first use
        if delay:
            self._convert.schedule(args=(task_id,), delay=delay)
        else:
            self._convert(task_id)

    def report(self, outcome: dict[str, Any]) -> None:
        """A node's outcome of one job, for the coordinator to apply (a dict: see ``Node``)."""
        self.huey  # noqa: B018
        self._outcome(outcome)

    def pending(self) -> int:
        """Messages not yet taken, including retries waiting for their time."""
        return self.huey.pending_count() + self.huey.scheduled_count()

    def consumer(self, workers: int) -> Any:
        # both storages block in dequeue, so huey's delays only space its retries after a failed read: Redis
        # down, they double from 20 ms to READ_RETRY_SECONDS (each failed read logs a traceback: 50 a second
        # at a steady 20 ms), and the first task read sets them back
        return self.huey.create_consumer(workers=workers, worker_type="thread", initial_delay=POLL_SECONDS,
                                         backoff=2, max_delay=READ_RETRY_SECONDS)

    def _waiting(self, task_id: str | None) -> Any:
        return self._hand("on_waiting", task_id)

    def _reported(self, outcome: dict[str, Any]) -> Any:
        return self._hand("on_outcome", outcome)


class Jobs(_Huey):
    """The conversion nodes' queue (Redis only): one message per dispatched conversion (to ``on_job(job)``)."""

    name = "docshift-jobs"

    def _register(self, huey: Any) -> None:
        self._job = huey.task(name="job")(self._run)

    def send(self, job: dict[str, Any]) -> None:
        self.huey  # noqa: B018
        self._job(job)

    def waiting(self) -> list[dict[str, Any]]:
        """The jobs not yet taken by a node."""
        return [task.args[0] for task in self.huey.pending()]

    def take(self) -> bool:
        """Run the next job if one comes within a second (Redis blocks meanwhile); False if none."""
        try:
            task = self.huey.dequeue()
        except ForgedMessage:  # taken off the queue already, and logged by the serializer
            return False
        except HueyException as error:  # sealed, but it names no task of this queue
            log.warning("queue message dropped (%s): %s", self.name, error)
            return False
        if task is None:
            return False
        self.huey.execute(task)
        return True

    def _run(self, job: Any) -> Any:
        return self._hand("on_job", job)
