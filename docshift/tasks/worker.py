"""The worker process: huey consumer threads, each with its own warm LibreOffice, plus the
service's periodic duties. ``python worker.py`` (the Procfile's ``worker``) runs ``main``."""

import functools
import logging
import os
import sys
import threading
from pathlib import Path

from huey import crontab

from docshift import logs, settings
from docshift.accounts import marketplace
from docshift.accounts.metering import report_overage
from docshift.accounts.subscriptions import sync_subscriptions
from docshift.engine import office, sandbox
from docshift.errors import StorageUnavailable
from docshift.storage import ObjectStore, db
from docshift.tasks import maintenance
from docshift.tasks.conversion import run_conversion
from docshift.tasks.queue import Queue

log = logging.getLogger("docshift.worker")

# EX_CONFIG: the host cannot run the sandbox; restarting will not help (systemd: RestartPreventExitStatus)
EXIT_NO_SANDBOX = 78


class Worker:
    """What a consumer thread needs, made per thread on first use: a SQLite connection, an
    object store client, a LibreOffice."""

    def __init__(self, config):
        self.config = config
        self.queue = Queue(config, runner=self)
        self._local = threading.local()
        self._recovered = threading.Lock()
        self._engines = {}  # Office name -> (state, detail) of its last start
        self._engines_lock = threading.Lock()

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
            self._local.office = office.Office(self.config["DATA_DIR"],
                                               max_conversions=int(self.config["OFFICE_MAX_CONVERSIONS"]),
                                               memory_limit_mb=int(self.config["OFFICE_MEMORY_LIMIT_MB"]),
                                               name=threading.current_thread().name,
                                               sandboxed=self.config["SANDBOX"] == "on",
                                               on_start=self.office_started)
        return self._local.office

    def office_started(self, started, state, detail):
        with self._engines_lock:
            self._engines[started.name] = (state, detail)
        self.report_engine()

    def report_engine(self):
        """Record for /healthz what this process runs LibreOffice with, and whether any of its
        LibreOffices keeps failing its self-test."""
        with self._engines_lock:
            engines = dict(self._engines)
        broken = [f"{name}: {detail}" for name, (state, detail) in sorted(engines.items()) if state == "broken"]
        state = "broken" if broken else "ok" if engines else "starting"
        db.report_engine(self.connection(), maintenance.worker_name(), self.config["SANDBOX"], state,
                         "; ".join(broken) or None)

    @functools.cached_property
    def marketplace(self):
        """The configured marketplace, made once per process (the aws one holds three API clients)."""
        return marketplace.backend(self.config)

    # huey hooks and tasks

    def thread_started(self):
        db.init(self.connection())
        db.heartbeat(self.connection())
        try:
            self.store().ensure_bucket()
        except StorageUnavailable as error:  # the store may still be starting; put_input creates it too
            log.warning("bucket not ready yet: %r", error)
        if self._recovered.acquire(blocking=False):  # once per process, not per worker thread
            maintenance.recover(self.connection(), self.store(), self.queue.enqueue, started_at=db.now())
        try:
            self.office().start()  # warm before the first task arrives
        except Exception as error:
            log.warning("LibreOffice did not start yet, the first task will retry: %r", error)

    def thread_stopping(self):
        if hasattr(self._local, "office"):
            self._local.office.close()

    def convert(self, task_id):
        return run_conversion(task_id, self.connection(), self.store(), self.config, self.office(),
                              maintenance.worker_name())

    def sweep(self):
        maintenance.sweep_once(self.connection(), self.store(), self.config, enqueue=self.queue.enqueue)
        self.report_engine()

    def subscriptions(self):
        sync_subscriptions(self.connection(), self.marketplace)

    def metering(self):
        report_overage(self.connection(), self.marketplace)


def check_sandbox(config):
    """Exit with EXIT_NO_SANDBOX, saying why, when the sandbox cannot be made here, unless the
    operator turned it off (then warn)."""
    if config["SANDBOX"] == "off":
        log.warning("DOCSHIFT_SANDBOX=off: LibreOffice runs without its sandbox, as this worker's user, "
                    "seeing what this worker sees")
        return
    why = sandbox.problem(Path(config["DATA_DIR"]) / "work" / f"{office.HOST}.{os.getpid()}.probe")
    if why:
        log.error("the worker does not start: the LibreOffice sandbox cannot be made here (%s). It needs "
                  "bubblewrap and unprivileged user namespaces; DOCSHIFT_SANDBOX=off runs LibreOffice "
                  "without it", why)
        sys.exit(EXIT_NO_SANDBOX)


def main():
    config = settings.load()
    logs.configure()
    check_sandbox(config)
    office.clear_leftovers(config["DATA_DIR"])
    worker = Worker(config)
    db.init(worker.connection())
    worker.report_engine()
    huey = worker.queue.huey
    huey.on_startup()(worker.thread_started)
    huey.on_shutdown()(worker.thread_stopping)
    huey.periodic_task(crontab(minute="*"), name="sweep")(worker.sweep)
    huey.periodic_task(crontab(minute="*"), name="subscriptions")(worker.subscriptions)
    huey.periodic_task(crontab(minute="5"), name="metering")(worker.metering)
    logging.getLogger("huey").setLevel(logging.INFO)
    huey.create_consumer(workers=int(config["WORKERS"]), worker_type="thread").run()
