"""Conversion nodes on Redis: the coordinator dispatches jobs, nodes convert, the coordinator
applies their outcomes.

The coordinator owns SQLite. It claims the fairest waiting task (the same claim as on one
box) only when a node slot is free, so fairness and the per-account cap hold across nodes;
the claim's holder is the job (``job:<id>``), and the job carries its lease. A node needs
only the queue, the object store and a scratch dir: it takes a job, converts it in its own
LibreOffice pool, stores the result, and reports the outcome to the coordinator's queue,
which applies it once, in the transaction that counts it (a lease that no longer holds is
ignored). Nodes beat into Redis; the coordinator takes back the jobs of a node that went
silent, and of jobs that were lost between the queue and a node. A job lost before any node
began it (Redis restarted empty, a node that could not open it) costs the file no attempt: that
is the service's fault, and the coordinator only sends it again.

The coordinator writes a probe into Redis, sealed with its queue key: a node that cannot open it,
or whose own sealing key the probe does not list, holds another key and would drop every job it
took, so it refuses to start (``worker.check_queue_key``), and takes nothing while a probe it cannot open
stands.

Redis is not trusted. Every message and entry there is sealed with the queue key
(``docshift.tasks.messages``), and checked before use: a job's values before they reach a path,
an outcome's before they reach the database, and a SUCCEEDED only counts once the store holds
a result of the reported size under the key the lease names. A node counts for at most
``NODE_MAX_SLOTS`` slots. A node holds no credential of the store: each job brings a link to
GET its input and one to PUT its result, valid as long as its lease can be.
"""

from __future__ import annotations

import logging
import secrets
import signal
import threading
import time
from contextlib import ExitStack
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from docshift.contract import Macros, Protection, TaskErrorCode, Verdict
from docshift.errors import ForgedMessage, NoProbe, StorageUnavailable
from docshift.settings import Settings
from docshift.storage import ObjectStore, tasks
from docshift.storage.s3 import Lease, result_key
from docshift.storage.tasks import Task
from docshift.tasks import messages
from docshift.tasks.conversion import (
    Outcome,
    Patience,
    apply_outcome,
    convert_task,
    document_password,
    max_run_seconds,
    slots,
)
from docshift.tasks.leases import JobStore
from docshift.tasks.maintenance import worker_name
from docshift.tasks.queue import Jobs, Queue
from docshift.tasks.registry import Registry

if TYPE_CHECKING:
    from docshift.tasks.shared import Conversions, PerThread

log = logging.getLogger("docshift.nodes")

OUTCOME_FIELDS = messages.outcome_fields(Outcome)
STOP_CHECK_SECONDS = 0.5  # how often a node that converts reads the coordinator's requests to stop its runs
REPORT_RETRY_SECONDS, REPORT_RETRY_MAX_SECONDS = 0.25, 5.0  # an outcome not sent: tried again, twice as late


class Coordinator:
    """The coordinator's side: dispatch jobs into free node slots, apply the outcomes."""

    def __init__(self, config: Settings, local: PerThread) -> None:
        self.config = config
        self.local = local  # a thread's own connection and store
        # a job lives as long as its links and lease can: one older than that is refused
        self.jobs = Jobs(config, ttl=max_run_seconds(config))
        self.registry = Registry(config, self.jobs)
        self._dispatching = threading.Lock()

    def dispatch(self) -> int:
        """Claim and send jobs, fairest first, while nodes have free slots. Returns how many."""
        with self._dispatching:
            conn, sent = self.local.connection(), 0
            capacity = self.registry.capacity()
            free = capacity - tasks.processing_count(conn)
            while free > 0:
                holder = f"job:{secrets.token_hex(8)}"
                claimed = tasks.claim_next(conn, holder, slots(self.config, capacity))
                if claimed is None:
                    break
                task, account = claimed
                if account["status"] != "active":
                    apply_outcome(conn, self.local.store(), self.config, task, Outcome(
                        Verdict.FAILED, code=TaskErrorCode.SUBSCRIPTION_INACTIVE,
                        message="The subscription became inactive before the conversion ran; not billed."))
                    continue
                self.jobs.send(self._job(task, holder))
                sent += 1
                free -= 1
            return sent

    def preempt(self) -> None:
        """Ask a node to stop one run of an account whose long files hold every node's slot while another account's
        file waits (``tasks.to_preempt``, the one box's rule over every job). The node kills its LibreOffice and
        reports the run preempted; applied, it goes back to the queue without using an attempt, and the waiting file
        is dispatched into the slot it freed."""
        run = tasks.to_preempt(self.local.connection(), slots(self.config, self.registry.capacity()), tasks.JOBS)
        if run is not None and run.worker and self.registry.stop(run.worker):
            log.info("task %s: its node is asked to stop it: its account's long files hold every slot while another "
                     "account's waits", run.id)

    def _job(self, task: Task, holder: str) -> dict[str, Any]:
        """What a node needs for one claimed task: what to convert, the lease, and links to GET the
        input and to PUT the result under the key the lease names, valid as long as the lease can be."""
        lease = (holder, task.attempts)
        links = self.local.store().job_links(task.id, result_key(task.id, lease), max_run_seconds(self.config))
        job = {"task_id": task.id, "kind": task.source_type, "macros": task.macros, "holder": holder,
               "attempt": task.attempts, "input": links["input"], "result": links["result"],
               "filename": task.source_filename, "protection": task.protection}
        # a node has no secret key: the password travels inside the job, which is sealed with the queue key
        password = document_password(self.config, task)
        if password is not None:
            job["password"] = password
        return job

    def apply(self, report: Any) -> None:
        """A node's outcome: applied to the task if the job still holds it (a SUCCEEDED only with
        its result in the store), then the freed slot is filled."""
        try:
            report = messages.outcome(report, OUTCOME_FIELDS)
        except ForgedMessage as error:
            log.warning("outcome dropped: %s", error)
            return
        conn, store = self.local.connection(), self.local.store()
        task_id, lease = report["task_id"], (report["holder"], report["attempt"])
        outcome = Outcome(**{name: value for name, value in report.items() if name in OUTCOME_FIELDS})
        if outcome.preempted and not self.registry.to_stop([lease[0]]):  # costs no attempt only when asked for
            outcome = Outcome(Verdict.RETRY, restarts=outcome.restarts)
        task = tasks.get_task(conn, task_id)
        if task is not None and tasks.lease_of(task) == lease:
            apply_outcome(conn, store, self.config, task, self._verified(store, task_id, lease, outcome))
        else:
            log.info("outcome of %s for %s ignored: the task is no longer held by it", task_id, lease[0])
            if outcome.status == Verdict.SUCCEEDED:  # under its lease's own key: nobody reads it
                try:
                    store.delete_result(result_key(task_id, lease))
                except StorageUnavailable as error:  # the bucket's lifecycle rule removes it later
                    log.warning("stale result of %s not removed: %r", task_id, error)
        self.dispatch()

    def _verified(self, store: ObjectStore, task_id: str, lease: Lease, outcome: Outcome) -> Outcome:
        """A SUCCEEDED counts only when the store holds a result of the reported size under the key
        the lease names; otherwise the conversion is tried again."""
        if outcome.status != Verdict.SUCCEEDED:
            return outcome
        stored = Patience(self.config.outage_patience_seconds)(store.result_size, result_key(task_id, lease))
        if stored == outcome.size:
            return outcome
        log.warning("task %s: no result of %s bytes in the store for %s (found %s); not counted, tried again",
                    task_id, outcome.size, lease[0], stored)
        return Outcome(Verdict.RETRY, restarts=outcome.restarts)


class Node:
    """A conversion node: ``slots`` threads, each with its own LibreOffice, taking jobs."""

    def __init__(self, config: Settings, conversions: Conversions, slots: int) -> None:
        self.config = config
        self.conversions = conversions  # the process's engine, and the service's faults
        self.slots = slots
        self.name = f"node:{worker_name()}"
        self.jobs = Jobs(config, ttl=max_run_seconds(config), on_job=self.run_job)
        self.queue = Queue(config)
        self.registry = Registry(config, self.jobs)
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        # the jobs this node converts: said again at every beat, so that Redis restarted empty learns them again
        self._running: dict[str, str] = {}  # job holder -> its task
        self._running_lock = threading.Lock()
        self.key_problem: str | None = None  # while the coordinator's probe says so, nothing is taken

    def run_job(self, job: Any) -> None:
        try:
            job = messages.job(job)
        except ForgedMessage as error:
            log.warning("job dropped: %s", error)
            return
        holder = job["holder"]
        if self.registry.revoked(holder):
            log.info("job %s of task %s was taken back before it started; skipped", holder, job["task_id"])
            return
        if self.registry.to_stop([holder]):  # its slot went to another account's file while it waited here
            log.info("job %s of task %s was asked to stop before it started; skipped", holder, job["task_id"])
            self.report({"task_id": job["task_id"], "holder": holder, "attempt": job["attempt"],
                         **asdict(Outcome(Verdict.RETRY, preempted=True))})
            return
        with self._running_lock:
            self._running[holder] = job["task_id"]
        try:
            try:
                self.registry.running(holder, self.name)
            except RedisError as error:  # the job is in hand: converted, and the next beat writes its run
                log.warning("job %s: its run is not written yet (%r); the next beat writes it", holder, error)
            objects = JobStore(job, lambda: self.registry.revoked(holder))
            with ExitStack() as after:  # the job's workspace goes once its outcome is reported
                outcome = convert_task(job["task_id"], job["kind"], objects, self.config, self.conversions.engine(),
                                       Macros(job["macros"]), job["filename"],
                                       password=job.get("password"),
                                       protection=Protection(job.get("protection", Protection.KEEP)), after=after)
                self.conversions.faults.observe(outcome)
                self.report({"task_id": job["task_id"], "holder": holder, "attempt": job["attempt"],
                             **asdict(outcome)})
        finally:
            with self._running_lock:  # a beat never says again what is done
                self._running.pop(holder, None)
            try:
                self.registry.done(holder)
            except RedisError as error:  # its outcome went, or the coordinator takes it back: the entry is spent
                log.warning("job %s: its run is not cleared (%r)", holder, error)

    def report(self, outcome: dict[str, Any]) -> None:
        """Send a job's outcome to the coordinator; while Redis does not answer, again and again, for as long as the
        job's lease lasts or until the node stops (then the coordinator takes the job back from a node gone). Lost,
        a failure's outcome left its task PROCESSING, and its slot taken, until the lease ran out (27 minutes): the
        node beat on, so the coordinator never took the job back."""
        deadline = time.monotonic() + max_run_seconds(self.config)
        delay = REPORT_RETRY_SECONDS
        while True:
            try:
                self.queue.report(outcome)
                return
            except RedisError as error:
                if time.monotonic() + delay > deadline:  # the coordinator has taken it back by now
                    log.error("outcome of task %s not sent: %r", outcome["task_id"], error)
                    return
                if self.stopping.is_set():  # draining: the coordinator takes the job back once this node is gone
                    log.error("outcome of task %s not sent before the node stopped: %r", outcome["task_id"], error)
                    return
                log.warning("outcome of task %s not sent yet (%r); again in %.1f s", outcome["task_id"], error,
                            delay)
                self.stopping.wait(delay)  # one more try once stopping, then no more
                delay = min(delay * 2, REPORT_RETRY_MAX_SECONDS)

    def start(self) -> None:
        """Beat, then take jobs on ``slots`` threads until ``stop``."""
        self.registry.beat(self.name, self.slots)
        self.threads = [threading.Thread(target=self._beat, name="node-beat", daemon=True),
                        threading.Thread(target=self._stops, name="node-stops", daemon=True)]
        self.threads += [threading.Thread(target=self._take, name=f"node-{n}", daemon=True)
                         for n in range(self.slots)]
        for thread in self.threads:
            thread.start()
        log.info("%s taking jobs with %d LibreOffice processes", self.name, self.slots)

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=self.config.conversion_timeout + 60)
        try:
            self.registry.leave(self.name)
        except Exception as error:  # Redis gone: the coordinator will see the silence
            log.warning("could not leave the registry: %r", error)

    def _beat(self) -> None:
        while not self.stopping.wait(self.config.node_heartbeat_seconds):
            try:
                self._check_key()
                # while a fault of the service or a key that does not fit holds it off, it is sent nothing
                held_off = self.key_problem is not None or self.conversions.faults.wait()
                self.registry.beat(self.name, 0 if held_off else self.slots)
                with self._running_lock:
                    for holder in self._running:
                        self.registry.running(holder, self.name)
            except Exception as error:
                log.warning("node heartbeat failed: %r", error)

    def _stops(self) -> None:
        """Every STOP_CHECK_SECONDS while it converts, kill the LibreOffice of each run the coordinator asked to stop
        (``Coordinator.preempt``); its conversion raises Preempted, and the outcome says so. A run between its
        LibreOffice's steps is looked at again next time."""
        while not self.stopping.wait(STOP_CHECK_SECONDS):
            with self._running_lock:
                running = dict(self._running)
            try:
                for holder in self.registry.to_stop(list(running)):
                    if self.conversions.engine().cancel(running[holder]):
                        log.info("task %s stopped as the coordinator asked (job %s)", running[holder], holder)
            except Exception as error:  # Redis away: the runs go on, and the next look asks again
                log.warning("the requests to stop runs could not be read: %r", error)

    def _check_key(self) -> None:
        try:
            problem = self.registry.key_problem()
        except NoProbe:  # Redis restarted empty: the coordinator writes it again
            problem = None
        if problem != self.key_problem:
            log.log(logging.ERROR if problem else logging.INFO, "%s %s", self.name,
                    f"takes no jobs: {problem}" if problem else "takes jobs: the queue key fits again")
        self.key_problem = problem

    def _take(self) -> None:
        self.conversions.thread_started()  # LibreOffice warm before the first job
        while not self.stopping.is_set():
            pause = self.conversions.faults.wait()
            if pause:  # a fault of the service (faults.py): other nodes take the jobs meanwhile
                self.stopping.wait(pause)
                continue
            if self.key_problem:  # what it took it would drop
                self.stopping.wait(self.config.node_heartbeat_seconds)
                continue
            try:
                self.jobs.take()
            except Exception:
                log.exception("a job could not be taken; trying again")
                self.stopping.wait(1)
        self.conversions.thread_stopping()  # the last of the node's threads to stop closes LibreOffice


def run_node(config: Settings, conversions: Conversions) -> None:
    """``python worker.py node``: a node until SIGTERM or SIGINT, then it finishes what it runs."""
    node = Node(config, conversions, config.workers)
    stopped = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopped.set())
    node.start()
    stopped.wait()
    log.info("%s draining", node.name)
    node.stop()
