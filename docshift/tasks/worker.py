"""The worker process: huey consumer threads, each with its own warm LibreOffice, and a thread
of the service's own duties. ``python worker.py`` (the Procfile's ``worker``) runs ``main``."""

import functools
import logging
import sys
import threading
import time
from pathlib import Path

from docshift import logs, settings
from docshift.accounts import marketplace
from docshift.accounts.metering import report_overage
from docshift.accounts.subscriptions import sync_subscriptions
from docshift.engine.office import Office
from docshift.errors import StorageUnavailable
from docshift.storage import ObjectStore, db
from docshift.tasks import maintenance
from docshift.tasks.conversion import run_next
from docshift.tasks.nodes import Coordinator, Node, run_node
from docshift.tasks.queue import Queue, on_redis

log = logging.getLogger("docshift.worker")


class Worker:
    """What a thread needs, made per thread on first use: a SQLite connection, an object store
    client, a LibreOffice."""

    def __init__(self, config):
        self.config = config
        self.queue = Queue(config, runner=self)
        # on Redis, conversions go to nodes through the coordinator
        self.coordinator = Coordinator(config, self) if on_redis(config) else None
        self._local = threading.local()

    def connection(self):
        if not hasattr(self._local, "db"):
            self._local.db = db.connect(self.config["DATABASE"])
        return self._local.db

    def store(self):
        if not hasattr(self._local, "store"):
            self._local.store = ObjectStore(self.config)
        return self._local.store

    def office(self):
        """This thread's own warm LibreOffice: workers and LibreOffices are one-to-one."""
        if not hasattr(self._local, "office"):
            self._local.office = Office(Path(self.config["DATA_DIR"]) / "office",
                                        max_conversions=int(self.config["OFFICE_MAX_CONVERSIONS"]),
                                        memory_limit_mb=int(self.config["OFFICE_MEMORY_LIMIT_MB"]),
                                        name=threading.current_thread().name)
        return self._local.office

    @functools.cached_property
    def marketplace(self):
        """The configured marketplace, made once per process (the aws one holds three API clients)."""
        return marketplace.backend(self.config)

    # huey hooks and the task

    def thread_started(self):
        try:
            self.office().start()  # warm before the first task arrives
        except Exception as error:
            log.warning("LibreOffice did not start yet, the first task will retry: %r", error)

    def thread_stopping(self):
        if hasattr(self._local, "office"):
            self._local.office.stop()

    def convert(self, hint=None):
        """A message: a task is waiting. On one box, claim the fairest waiting task (not
        necessarily ``hint``) and convert it; with nodes, dispatch to free node slots."""
        if self.coordinator is not None:
            return self.coordinator.dispatch()
        outcome = run_next(self.connection(), self.store(), self.config, self.office(), maintenance.worker_name())
        if outcome == "QUEUED":  # a transient failure: it goes again, after a pause
            self.queue.enqueue(delay=5)
        return outcome

    def apply(self, report):
        """A conversion node's outcome (coordinator only)."""
        return self.coordinator.apply(report)

    @property
    def registry(self):
        return self.coordinator.registry if self.coordinator is not None else None

    # the service's own duties

    def duties(self):
        """(name, every seconds, action), run by ``Duties`` on a thread of their own."""
        return [
            ("heartbeat", float(self.config["HEARTBEAT_SECONDS"]), lambda: maintenance.heartbeat(self.connection())),
            ("sweep", float(self.config["SWEEP_SECONDS"]),
             lambda: maintenance.sweep_once(self.connection(), self.store(), self.config, queue=self.queue,
                                            registry=self.registry)),
            ("subscriptions", 60.0, lambda: sync_subscriptions(self.connection(), self.marketplace)),
            # the ledger only sends ended hours, so running more often than hourly sends nothing twice
            ("metering", 600.0, lambda: report_overage(self.connection(), self.marketplace)),
        ]

    def prepare(self):
        """Once per process, before any conversion: tables, bucket, what a killed worker left."""
        conn = self.connection()
        db.init(conn)
        maintenance.heartbeat(conn)
        try:
            self.store().ensure_bucket()
        except StorageUnavailable as error:  # the store may still be starting; put_input creates it too
            log.warning("bucket not ready yet: %r", error)
        maintenance.recover(conn, self.store(), self.config, self.queue, self.registry)


class Duties(threading.Thread):
    """Runs each duty on its own schedule, whatever the conversions are doing: they run on other
    threads, so a backlog never delays the heartbeat, expiry, recovery, sync or metering."""

    def __init__(self, duties):
        super().__init__(name="duties", daemon=True)
        self.duties = duties
        self.stopping = threading.Event()

    def run(self):
        due = {name: time.monotonic() for name, _, _ in self.duties}
        while not self.stopping.is_set():
            for name, every, action in self.duties:
                if time.monotonic() >= due[name]:
                    try:
                        action()
                    except Exception:  # a duty that fails now runs again on its next turn
                        log.exception("duty %s failed", name)
                    due[name] = time.monotonic() + every
            self.stopping.wait(max(0.0, min(due.values()) - time.monotonic()))


def main(argv=None):
    """``python worker.py``: the worker (on Redis, the coordinator); ``python worker.py node``:
    a conversion node."""
    argv = sys.argv[1:] if argv is None else argv
    config = settings.load()
    logs.configure()
    logging.getLogger("huey").setLevel(logging.INFO)
    worker = Worker(config)
    if argv[:1] == ["node"]:
        if not on_redis(config):
            sys.exit("a conversion node needs DOCSHIFT_QUEUE_URL=redis://host:port/db, the coordinator's queue")
        return run_node(config, worker)
    worker.prepare()
    duties = worker.duties()
    slots = int(config["WORKERS"])
    if worker.coordinator is None:
        threads = slots
        worker.queue.huey.on_startup()(worker.thread_started)
        worker.queue.huey.on_shutdown()(worker.thread_stopping)
    else:
        # the coordinator's threads only claim, dispatch and apply; its own conversions, if
        # DOCSHIFT_WORKERS > 0, run as a node inside this process
        threads = 2
        duties.append(("dispatch", 1.0, worker.coordinator.dispatch))
        if slots > 0:
            Node(config, Worker(config), slots).start()
    Duties(duties).start()
    worker.queue.consumer(threads).run()
