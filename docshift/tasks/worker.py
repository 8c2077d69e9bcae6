"""The worker process in one of its three roles, which ``role_for`` alone picks from the settings and the command
line: ``OneBox`` (SQLite's queue: its consumer threads claim and convert), ``Coordinating`` (Redis: it claims and
dispatches jobs to conversion nodes, applies their outcomes, and converts as a node itself with DOCSHIFT_WORKERS > 0)
and ``Converting`` (``python worker.py node``: a conversion node, no database at all). ``python worker.py`` (the
Procfile's ``worker``) runs ``main``."""

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from redis.exceptions import BusyLoadingError, RedisError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from docshift import logs, settings
from docshift.accounts import marketplace
from docshift.accounts.metering import report_overage
from docshift.accounts.subscriptions import sync_subscriptions
from docshift.contract import Status
from docshift.engine import clear_leftovers, sandbox_problem
from docshift.errors import BadSetting, NoProbe, StorageUnavailable
from docshift.settings import Settings
from docshift.storage import connection, liveness, tasks
from docshift.tasks import maintenance
from docshift.tasks.conversion import max_run_seconds, run_next, slots
from docshift.tasks.nodes import Coordinator, Node, run_node
from docshift.tasks.queue import Jobs, Queue, on_redis
from docshift.tasks.registry import Registry
from docshift.tasks.shared import Conversions, PerThread

# what a duty waits out, said once: Redis, the database or the store away (not a password refused, which keeps its
# traceback at every turn)
OUTAGES = (RedisConnectionError, RedisTimeoutError, BusyLoadingError, StorageUnavailable)
DUTIES_STOP_SECONDS = 5.0  # a duty running when the worker stops is waited for this long
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


def role_for(config: Settings, argv: list[str]) -> "OneBox | Coordinating | Converting":
    """The one place that decides what this process is."""
    if argv[:1] == ["node"]:
        if not on_redis(config):
            sys.exit("a conversion node needs DOCSHIFT_QUEUE_URL=redis://host:port/db, the coordinator's queue")
        return Converting(config)
    return Coordinating(config) if on_redis(config) else OneBox(config)


class OneBox:
    """One box: the queue's consumer threads each claim the fairest waiting task and convert it, with the
    process's one engine."""

    def __init__(self, config: Settings) -> None:
        self.config, self.local = config, PerThread(config)
        self.conversions = Conversions(config, on_change=self.report_engine)
        self.queue = Queue(config, ttl=max_run_seconds(config), on_waiting=self.take_waiting)
        self.held = threading.Event()  # a message found only tasks kept from the last free slot

    def take_waiting(self, hint: str | None = None) -> Any:
        """A message: a task is waiting. Claim the fairest waiting task (not necessarily ``hint``) and convert it."""
        pause = self.conversions.faults.wait()
        if pause:  # a fault of the service stands: the waiting tasks stay QUEUED until the next try
            self.queue.enqueue(delay=pause)
            return None
        conn = self.local.connection()
        outcome = run_next(conn, self.local.store(), self.config, self.conversions.engine(),
                           maintenance.worker_name(), self.conversions.faults)
        if outcome is None:
            if tasks.queued_count(conn):  # kept from the last free slot (tasks.held_back); its message is spent
                self.held.set()
        elif self.held.is_set():  # a slot is free again: the tasks kept back get messages back, one per slot
            self.held.clear()
            maintenance.top_up(conn, self.queue, most=self.config.workers)
        if outcome == Status.QUEUED:  # a transient failure: it goes again, after a pause
            self.queue.enqueue(delay=5)
        return outcome

    def report_engine(self) -> None:
        """Record for /healthz what this process runs LibreOffice with, and whether it keeps failing."""
        report_engine(self.local, self.config, *self.conversions.health())

    def sweep(self) -> None:
        maintenance.sweep_once(self.local.connection(), self.local.store(), self.config, queue=self.queue)
        self.report_engine()

    def preempt(self) -> None:
        """Stop one of the runs of an account whose long files hold every slot while another account's file waits
        (``tasks.to_preempt``): it goes back to the queue, and the waiting file takes its slot."""
        run = tasks.to_preempt(self.local.connection(), slots(self.config, self.config.workers),
                               maintenance.worker_name())
        if run is not None and self.conversions.engine().cancel(run.id):
            log.info("task %s stopped: its account's long files held every slot while another account's waited",
                     run.id)

    def run(self) -> None:
        check_sandbox(self.config)
        clear_leftovers(self.config.data_dir)
        prepare(self.local, self.config, self.report_engine, self.queue)
        self.queue.huey.on_startup()(self.conversions.thread_started)
        self.queue.huey.on_shutdown()(self.conversions.thread_stopping)
        with duties_running(self.local, duties(self.local, self.config, self.sweep) + [("preempt", 1.0, self.preempt)]):
            self.queue.consumer(self.config.workers).run()


class Coordinating:
    """On Redis: claim the fairest waiting task whenever a node has a free slot, send it as a job, apply the
    outcomes nodes report. With DOCSHIFT_WORKERS > 0 this process converts too, as a node of its own."""

    def __init__(self, config: Settings) -> None:
        self.config, self.local = config, PerThread(config)
        self.coordinator = Coordinator(config, self.local)
        # an outcome sealed longer ago than a run may last is refused, as a replayed one
        self.queue = Queue(config, ttl=max_run_seconds(config), on_waiting=self.take_waiting,
                           on_outcome=self.coordinator.apply)
        self.conversions = Conversions(config, on_change=self.report_engine) if config.workers > 0 else None

    def take_waiting(self, hint: str | None = None) -> int:
        return self.coordinator.dispatch()

    def report_engine(self) -> None:
        """For /healthz: this process's own conversions, or with none, whether a node takes jobs. Files wait in
        either case, and /healthz says why (as for a full disk on one box), not "ok" with no node to convert."""
        if self.conversions is not None:
            report_engine(self.local, self.config, *self.conversions.health())
            return
        try:
            alive = self.coordinator.registry.alive()
        except RedisError as error:  # away, or refusing (a password changed, out of memory)
            report_engine(self.local, self.config, "broken", f"the queue's Redis: {error}; files wait in the "
                                                             "database, and go once it answers")
            return
        slots = sum(alive.values())
        if slots:
            report_engine(self.local, self.config, "ok", f"conversions run on nodes ({len(alive)} alive, {slots} "
                                                         "slots)")
        else:
            report_engine(self.local, self.config, "broken", f"no conversion node takes jobs ({len(alive)} alive, "
                                                             "none with a slot); files wait until one does")

    def sweep(self) -> None:
        maintenance.sweep_once(self.local.connection(), self.local.store(), self.config,
                               registry=self.coordinator.registry)
        self.report_engine()

    def run(self) -> None:
        if self.conversions is not None:
            check_sandbox(self.config)
            clear_leftovers(self.config.data_dir)
        wait_for_redis(self.coordinator.registry)
        prepare(self.local, self.config, self.report_engine, registry=self.coordinator.registry)
        extra: list[Duty] = [
            ("dispatch", 1.0, self.coordinator.dispatch),
            ("preempt", 1.0, self.coordinator.preempt),
            # the probe nodes check their queue key against, written again should Redis restart empty
            ("probe", self.config.node_heartbeat_seconds, self.coordinator.registry.announce),
            # nodes come and go at their beat: /healthz says so as soon
            ("nodes", self.config.node_heartbeat_seconds, self.report_engine)]
        with duties_running(self.local, duties(self.local, self.config, self.sweep) + extra):
            if self.conversions is not None:
                Node(self.config, self.conversions, self.config.workers).start()
            # its threads only claim, dispatch and apply
            self.queue.consumer(2).run()


class Converting:
    """A conversion node: jobs from Redis, converted with the process's engine; no database, so its log says
    how its LibreOffice is."""

    def __init__(self, config: Settings) -> None:
        self.config = config
        self.conversions = Conversions(config, on_change=self.report_engine)

    def report_engine(self) -> None:
        state, detail = self.conversions.health()
        log.log(logging.ERROR if state == "broken" else logging.INFO, "LibreOffice: %s %s", state, detail or "")

    def run(self) -> None:
        check_queue_key(self.config)  # first: a node with another key must not take (and drop) a single job
        check_sandbox(self.config)
        clear_leftovers(self.config.data_dir)
        run_node(self.config, self.conversions)


def report_engine(local: PerThread, config: Settings, state: str, detail: str | None) -> None:
    if _STOPPED.is_set():  # a run or a duty still going as the process stops must not write its report back
        return
    liveness.report_engine(local.connection(), maintenance.worker_name(), _on_off(config.sandbox), state, detail)


_STOPPED = threading.Event()  # this process's consumer has stopped: its engine report is taken away


@contextmanager
def duties_running(local: PerThread, scheduled: list[Duty]) -> Iterator[None]:
    """The process's duties, run on their thread while the consumer runs; when it stops, the duties stop (a sweep
    reports the engine) and this process's engine report goes: /healthz must not show a stopped worker's sandbox
    and engine for its silence (a restart with another DOCSHIFT_SANDBOX showed the old)."""
    running = Duties(scheduled)
    running.start()
    try:
        yield
    finally:
        _STOPPED.set()
        running.stopping.set()
        running.join(DUTIES_STOP_SECONDS)
        try:
            liveness.forget_engine(local.connection(), maintenance.worker_name())
        except Exception as error:  # the database away: the report goes stale after the silence instead
            log.warning("engine report not removed: %r", error)


def prepare(local: PerThread, config: Settings, report: Callable[[], object], queue: Queue | None = None,
            registry: Registry | None = None) -> None:
    """Once per process, before any conversion: tables, bucket, what a killed worker left."""
    conn = local.connection()
    connection.init(conn)
    maintenance.heartbeat(conn)
    report()
    try:
        local.store().ensure_bucket()
    except StorageUnavailable as error:  # the store may still be starting; put_input creates it too
        log.warning("bucket not ready yet: %r", error)
    maintenance.recover(conn, local.store(), config, queue, registry)


def duties(local: PerThread, config: Settings, sweep: Callable[[], object]) -> list[Duty]:
    """(name, every seconds, action) of a process that holds the database, run by ``Duties``."""
    market = marketplace.backend(config)  # made once per process: the aws one holds three API clients
    return [
        ("heartbeat", config.heartbeat_seconds, lambda: maintenance.heartbeat(local.connection())),
        ("sweep", config.sweep_seconds, sweep),
        ("subscriptions", 60.0, lambda: sync_subscriptions(local.connection(), market)),
        # the ledger only sends ended hours, so running more often than hourly sends nothing twice
        ("metering", 600.0, lambda: report_overage(local.connection(), market)),
    ]


class Duties(threading.Thread):
    """Runs each duty on its own schedule, whatever the conversions are doing: they run on other
    threads, so a backlog never delays the heartbeat, expiry, recovery, sync or metering."""

    def __init__(self, duties: list[Duty]) -> None:
        super().__init__(name="duties", daemon=True)
        self.duties = duties
        self.stopping = threading.Event()

    def run(self) -> None:
        due = {name: time.monotonic() for name, _, _ in self.duties}
        out: set[str] = set()  # the duties an outage stops: said once, not at every turn
        while not self.stopping.is_set():
            for name, every, action in self.duties:
                if time.monotonic() >= due[name]:
                    try:
                        action()
                        if name in out:
                            out.discard(name)
                            log.info("duty %s runs again", name)
                    except OUTAGES as error:  # Redis, the database or the store away
                        if name not in out:
                            out.add(name)
                            log.warning("duty %s waits for what does not answer: %r", name, error)
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


def wait_for_redis(registry: Registry) -> None:
    """Until Redis answers. A coordinator started during an outage (a failover, both restarted at once) waits, as a
    node does, rather than exit at its first question to Redis: one box's launcher would stop the web with it, and
    the tasks it had accepted would wait for an operator."""
    said = False
    while True:
        try:
            registry.redis.ping()
            return
        except RedisError as error:
            if not said:
                log.warning("the coordinator waits for Redis before it starts: %r", error)
                said = True
        time.sleep(1)


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
    logs.configure(libraries=("huey",))
    role_for(config, argv).run()
