"""The worker process: huey consumer threads, each with its own warm LibreOffice, and a thread
of the service's own duties. ``python worker.py`` (the Procfile's ``worker``) runs ``main``."""

import functools
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from redis.exceptions import RedisError
from sqlite_utils import Database

from docshift import logs, settings
from docshift.accounts import marketplace
from docshift.accounts.metering import report_overage
from docshift.accounts.subscriptions import sync_subscriptions
from docshift.contract import Status
from docshift.engine import Engine, clear_leftovers, sandbox_problem
from docshift.errors import BadSetting, NoProbe, StorageUnavailable
from docshift.settings import Settings
from docshift.storage import ObjectStore, connection, liveness
from docshift.tasks import maintenance
from docshift.tasks.conversion import max_run_seconds, run_next
from docshift.tasks.faults import Faults
from docshift.tasks.nodes import Coordinator, Node, Registry, run_node
from docshift.tasks.queue import Jobs, Queue, on_redis

log = logging.getLogger("docshift.worker")
# what a worker process does on its own schedule: (name, every seconds, action)
Duty = tuple[str, float, Callable[[], object]]

# EX_CONFIG: the host cannot run the sandbox; restarting will not help (systemd: RestartPreventExitStatus)
EXIT_NO_SANDBOX = 78
# EX_CONFIG too: a node whose queue key is not the coordinator's would drop every job it took
EXIT_WRONG_KEY = 78
# what the sandbox needs from a container runtime (compose.yaml has them, the README says why)
CONTAINER_OPTIONS = ("--security-opt seccomp=deploy/container/seccomp.json (in the image: "
                     "/usr/local/share/docshift/seccomp.json), --security-opt systempaths=unconfined "
                     "(podman: unmask=/proc/*) and, where AppArmor runs, --security-opt apparmor=unconfined")


class Worker:
    """What a thread needs, made per thread on first use: a SQLite connection, an object store
    client, a LibreOffice."""

    def __init__(self, config: Settings) -> None:
        self.config = config
        # on Redis, an outcome sealed longer ago than a run may last is refused, as a replayed one
        self.queue = Queue(config, ttl=max_run_seconds(config), on_waiting=self.take_waiting, on_outcome=self.apply)
        # on Redis, conversions go to nodes through the coordinator
        self.coordinator = Coordinator(config, self) if on_redis(config) else None
        self._local = threading.local()
        self.is_node = False  # a conversion node: no database at all
        self._engine: Engine | None = None  # the process's LibreOffice, made when first asked for
        self._engine_state: tuple[str, str | None] | None = None  # (state, detail) of its last start
        self._engine_users = 0  # worker threads that started it: the last to stop closes it
        self._engine_lock = threading.Lock()
        # a full disk, an engine that cannot start: held off, and named in /healthz while it stands
        self.faults = Faults(on_change=self.fault_changed)

    def connection(self) -> Database:
        if not hasattr(self._local, "db"):
            self._local.db = connection.connect(self.config.database)
        return self._local.db

    def store(self) -> ObjectStore:
        if not hasattr(self._local, "store"):
            self._local.store = ObjectStore(self.config)
        return self._local.store

    def engine(self) -> Engine:
        """The process's engine: one LibreOffice parent, shared by its worker threads, which forks a child for
        every file."""
        with self._engine_lock:
            if self._engine is None:
                config = self.config
                self._engine = Engine.made(
                    config.data_dir, memory_limit_mb=config.office_memory_limit_mb,
                    cpu_seconds=config.office_cpu_limit_seconds, scratch_mb=config.office_scratch_limit_mb,
                    sandboxed=config.sandbox, threads=config.workers, on_start=self.office_started)
            return self._engine

    def office_started(self, state: str, detail: str | None) -> None:
        with self._engine_lock:
            self._engine_state = (state, detail)
        if self.is_node:  # a conversion node has no database: its log says it
            log.log(logging.ERROR if state == "broken" else logging.INFO, "LibreOffice: %s %s", state, detail or "")
        else:
            self.report_engine()

    def fault_changed(self) -> None:
        if not self.is_node:  # a node has no database; the conversion's log line says it
            self.report_engine()

    def report_engine(self) -> None:
        """Record for /healthz what this process runs LibreOffice with, and whether its LibreOffice keeps
        failing its self-test."""
        if not self.converts:  # a coordinator whose conversions all run on nodes
            nodes = len(self.registry.alive())  # type: ignore[union-attr]  # a coordinator has a registry
            liveness.report_engine(self.connection(), maintenance.worker_name(), _on_off(self.config.sandbox), "ok",
                                   f"conversions run on nodes ({nodes} alive)")
            return
        with self._engine_lock:
            started = self._engine_state
        broken = started[1] if started and started[0] == "broken" else None
        # a standing fault says more than the starts that failed with it
        detail = self.faults.describe() or (f"LibreOffice fails its self-test at every start ({broken})"
                                            if broken else None)
        state = "broken" if detail else "ok" if started else "starting"
        liveness.report_engine(self.connection(), maintenance.worker_name(), _on_off(self.config.sandbox), state,
                               detail)

    @functools.cached_property
    def marketplace(self) -> marketplace.Marketplace:
        """The configured marketplace, made once per process (the aws one holds three API clients)."""
        return marketplace.backend(self.config)

    # huey hooks and the task

    def thread_started(self) -> None:
        engine = self.engine()
        with self._engine_lock:
            self._engine_users += 1
        try:
            engine.start()  # warm before the first task arrives
        except Exception as error:
            log.warning("LibreOffice did not start yet, the first task will retry: %r", error)

    def thread_stopping(self) -> None:
        with self._engine_lock:
            self._engine_users -= 1
            last = self._engine_users <= 0
        if last and self._engine is not None:  # the others' conversions are done
            self._engine.close()

    def take_waiting(self, hint: str | None = None) -> Any:
        """A message: a task is waiting. On one box, claim the fairest waiting task (not
        necessarily ``hint``) and convert it; with nodes, dispatch to free node slots."""
        if self.coordinator is not None:
            return self.coordinator.dispatch()
        pause = self.faults.wait()
        if pause:  # a fault of the service stands: the waiting tasks stay QUEUED until the next try
            self.queue.enqueue(delay=pause)
            return None
        outcome = run_next(self.connection(), self.store(), self.config, self.engine(), maintenance.worker_name(),
                           self.faults)
        if outcome == Status.QUEUED:  # a transient failure: it goes again, after a pause
            self.queue.enqueue(delay=5)
        return outcome

    def apply(self, report: Any) -> None:
        """A conversion node's outcome (coordinator only)."""
        # only the coordinator's queue carries outcomes
        return self.coordinator.apply(report)  # type: ignore[union-attr, return-value]

    @property
    def registry(self) -> Registry | None:
        return self.coordinator.registry if self.coordinator is not None else None

    # the service's own duties

    def duties(self) -> list[Duty]:
        """(name, every seconds, action), run by ``Duties`` on a thread of their own."""
        return [
            ("heartbeat", self.config.heartbeat_seconds, lambda: maintenance.heartbeat(self.connection())),
            ("sweep", self.config.sweep_seconds, self.sweep),
            ("subscriptions", 60.0, lambda: sync_subscriptions(self.connection(), self.marketplace)),
            # the ledger only sends ended hours, so running more often than hourly sends nothing twice
            ("metering", 600.0, lambda: report_overage(self.connection(), self.marketplace)),
        ]

    def sweep(self) -> None:
        maintenance.sweep_once(self.connection(), self.store(), self.config, queue=self.queue, registry=self.registry)
        self.report_engine()

    @property
    def converts(self) -> bool:
        """Whether this process runs LibreOffice: not a coordinator with DOCSHIFT_WORKERS=0."""
        return self.coordinator is None or self.config.workers > 0

    def prepare(self) -> None:
        """Once per process, before any conversion: tables, bucket, what a killed worker left."""
        conn = self.connection()
        connection.init(conn)
        maintenance.heartbeat(conn)
        self.report_engine()
        try:
            self.store().ensure_bucket()
        except StorageUnavailable as error:  # the store may still be starting; put_input creates it too
            log.warning("bucket not ready yet: %r", error)
        maintenance.recover(conn, self.store(), self.config, self.queue, self.registry)


class Duties(threading.Thread):
    """Runs each duty on its own schedule, whatever the conversions are doing: they run on other
    threads, so a backlog never delays the heartbeat, expiry, recovery, sync or metering."""

    def __init__(self, duties: list[Duty]) -> None:
        super().__init__(name="duties", daemon=True)
        self.duties = duties
        self.stopping = threading.Event()

    def run(self) -> None:
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


def _on_off(sandboxed: bool) -> str:
    """How the engines table and /healthz name the sandbox's state."""
    return "on" if sandboxed else "off"


def check_sandbox(config: Settings) -> None:
    """Exit with EXIT_NO_SANDBOX, saying why, when the sandbox cannot be made here, unless the
    operator turned it off (then warn)."""
    if not config.sandbox:
        log.warning("DOCSHIFT_SANDBOX=off: LibreOffice runs without its sandbox, as this worker's user, "
                    "seeing what this worker sees")
        return
    why = sandbox_problem(config.data_dir)
    if why:
        log.error("the worker does not start: the LibreOffice sandbox cannot be made here (%s). It needs "
                  "bubblewrap and unprivileged user namespaces; in a container, run it with %s; "
                  "DOCSHIFT_SANDBOX=off runs LibreOffice without it", why, CONTAINER_OPTIONS)
        sys.exit(EXIT_NO_SANDBOX)


def check_queue_key(config: Settings) -> None:
    """Before a node starts: wait for the coordinator's probe, then exit with EXIT_WRONG_KEY,
    saying why, if this node's queue key does not fit the coordinator's."""
    registry, said = Registry(config, Jobs(config)), None
    while True:
        try:
            problem = registry.key_problem()
            break
        except NoProbe:
            why = "no coordinator has written its probe into Redis yet"
        except RedisError as error:  # not reachable yet
            why = f"Redis does not answer ({error!r})"
        if why != said:
            log.warning("the node waits before it takes jobs: %s", why)
            said = why
        time.sleep(1)
    if problem:
        log.error("the node does not start: %s", problem)
        sys.exit(EXIT_WRONG_KEY)


def main(argv: list[str] | None = None) -> None:
    """``python worker.py``: the worker (on Redis, the coordinator); ``python worker.py node``:
    a conversion node."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        config = settings.load()
    except BadSetting as error:  # a setting that cannot work (a wrong type, an open Redis, no queue key)
        sys.exit(f"docshift: {error}")
    logs.configure()
    logging.getLogger("huey").setLevel(logging.INFO)
    worker = Worker(config)
    node = argv[:1] == ["node"]
    if node and not on_redis(config):
        sys.exit("a conversion node needs DOCSHIFT_QUEUE_URL=redis://host:port/db, the coordinator's queue")
    if node:  # first: a node with another key must not take (and drop) a single job
        check_queue_key(config)
    if node or worker.converts:
        check_sandbox(config)
        clear_leftovers(config.data_dir)
    if node:
        worker.is_node = True
        return run_node(config, worker)
    worker.prepare()
    duties = worker.duties()
    slots = config.workers
    if worker.coordinator is None:
        threads = slots
        worker.queue.huey.on_startup()(worker.thread_started)
        worker.queue.huey.on_shutdown()(worker.thread_stopping)
    else:
        # the coordinator's threads only claim, dispatch and apply; its own conversions, if
        # DOCSHIFT_WORKERS > 0, run as a node inside this process
        threads = 2
        duties.append(("dispatch", 1.0, worker.coordinator.dispatch))
        # the probe nodes check their queue key against, written again should Redis restart empty
        duties.append(("probe", config.node_heartbeat_seconds, worker.coordinator.registry.announce))
        if slots > 0:  # the same Worker, so its LibreOffices are the ones report_engine sees
            Node(config, worker, slots).start()
    Duties(duties).start()
    worker.queue.consumer(threads).run()
