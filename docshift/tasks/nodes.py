"""Conversion nodes on Redis: the coordinator dispatches jobs, nodes convert, the coordinator
applies their outcomes.

The coordinator owns SQLite. It claims the fairest waiting task (the same claim as on one
box) only when a node slot is free, so fairness and the per-account cap hold across nodes;
the claim's holder is the job (``job:<id>``), and the job carries its lease. A node needs
only the queue, the object store and a scratch dir: it takes a job, converts it in its own
LibreOffice pool, stores the result, and reports the outcome to the coordinator's queue,
which applies it once, in the transaction that counts it (a lease that no longer holds is
ignored). Nodes beat into Redis; the coordinator takes back the jobs of a node that went
silent, and of jobs that were lost between the queue and a node.
"""

import json
import logging
import secrets
import signal
import threading
import time
from dataclasses import asdict

from docshift.storage import db
from docshift.tasks.conversion import Outcome, apply_outcome, convert_task
from docshift.tasks.maintenance import worker_name
from docshift.tasks.queue import Jobs, Queue

log = logging.getLogger("docshift.nodes")

NODES = "docshift:nodes"      # node name -> {"slots": n, "beat": epoch seconds}
RUNNING = "docshift:running"  # job holder -> node name, while a node converts it


class Registry:
    """Which nodes are alive, how many conversions they can run, which node runs which job."""

    def __init__(self, config, jobs):
        self.silence = float(config["NODE_SILENCE_SECONDS"])
        self.jobs = jobs

    @property
    def redis(self):
        return self.jobs.huey.storage.conn

    def beat(self, node, slots):
        self.redis.hset(NODES, node, json.dumps({"slots": slots, "beat": time.time()}))

    def leave(self, node):
        self.redis.hdel(NODES, node)

    def alive(self):
        """{node: slots} of the nodes that beat within the silence limit."""
        now, found = time.time(), {}
        for node, raw in self.redis.hgetall(NODES).items():
            entry = json.loads(raw)
            if now - entry["beat"] <= self.silence:
                found[node.decode()] = entry["slots"]
        return found

    def capacity(self):
        return sum(self.alive().values())

    def running(self, holder, node):
        self.redis.hset(RUNNING, holder, node)

    def done(self, holder):
        self.redis.hdel(RUNNING, holder)

    def job_gone(self, holder, started_at, at):
        """True when the job is certainly not going to report: its node went silent, or it is
        neither waiting in the queue nor running anywhere, well after it was dispatched."""
        node = self.redis.hget(RUNNING, holder)
        if node is not None:
            return node.decode() not in self.alive()
        if any(job["holder"] == holder for job in self.jobs.waiting()):
            return False
        return (at - started_at).total_seconds() > self.silence


class Coordinator:
    """The coordinator's side: dispatch jobs into free node slots, apply the outcomes."""

    def __init__(self, config, worker):
        self.config = config
        self.worker = worker  # the thread-local connection and store of the worker process
        self.jobs = Jobs(config)
        self.registry = Registry(config, self.jobs)
        self._dispatching = threading.Lock()

    def dispatch(self):
        """Claim and send jobs, fairest first, while nodes have free slots. Returns how many."""
        with self._dispatching:
            conn, sent = self.worker.connection(), 0
            free = self.registry.capacity() - db.processing_count(conn)
            while free > 0:
                holder = f"job:{secrets.token_hex(8)}"
                claimed = db.claim_next(conn, holder)
                if claimed is None:
                    break
                task, account = claimed
                if account["status"] != "active":
                    apply_outcome(conn, self.worker.store(), self.config, task, Outcome(
                        "FAILED", code="subscription_inactive",
                        message="The subscription became inactive before the conversion ran; not billed."))
                    continue
                self.jobs.send({"task_id": task["id"], "kind": task["source_type"], "macros": task["macros"],
                                "filename": task["source_filename"], "holder": holder, "attempt": task["attempts"]})
                sent += 1
                free -= 1
            return sent

    def apply(self, report):
        """A node's outcome: applied to the task if the job still holds it, then the freed slot
        is filled."""
        conn = self.worker.connection()
        task = db.get_task(conn, report["task_id"])
        fields = {k: v for k, v in report.items() if k not in ("task_id", "holder", "attempt")}
        if task is not None and db.lease_of(task) == (report["holder"], report["attempt"]):
            apply_outcome(conn, self.worker.store(), self.config, task, Outcome(**fields))
        else:
            log.info("outcome of %s for %s ignored: the task is no longer held by it", report["task_id"],
                     report["holder"])
        self.dispatch()


class Node:
    """A conversion node: ``slots`` threads, each with its own LibreOffice, taking jobs."""

    def __init__(self, config, worker, slots):
        self.config = config
        self.worker = worker  # thread-local store client and LibreOffice
        self.slots = slots
        self.name = f"node:{worker_name()}"
        self.jobs = Jobs(config, runner=self)
        self.queue = Queue(config)
        self.registry = Registry(config, self.jobs)
        self.stopping = threading.Event()
        self.threads = []

    def run_job(self, job):
        self.registry.running(job["holder"], self.name)
        try:
            outcome = convert_task(job["task_id"], job["kind"], self.worker.store(), self.config,
                                   self.worker.office(), job.get("macros", "keep"), job.get("filename"))
            self.worker.faults.observe(outcome)
            self.queue.report({"task_id": job["task_id"], "holder": job["holder"], "attempt": job["attempt"],
                               **asdict(outcome)})
        finally:
            self.registry.done(job["holder"])

    def start(self):
        """Beat, then take jobs on ``slots`` threads until ``stop``."""
        self.registry.beat(self.name, self.slots)
        self.threads = [threading.Thread(target=self._beat, name="node-beat", daemon=True)]
        self.threads += [threading.Thread(target=self._take, name=f"node-{n}", daemon=True)
                         for n in range(self.slots)]
        for thread in self.threads:
            thread.start()
        log.info("%s taking jobs with %d LibreOffice processes", self.name, self.slots)

    def stop(self):
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=float(self.config["CONVERSION_TIMEOUT"]) + 60)
        try:
            self.registry.leave(self.name)
        except Exception as error:  # Redis gone: the coordinator will see the silence
            log.warning("could not leave the registry: %r", error)

    def _beat(self):
        while not self.stopping.wait(float(self.config["NODE_HEARTBEAT_SECONDS"])):
            try:
                # while a fault of the service holds it off, the coordinator sends it nothing
                self.registry.beat(self.name, 0 if self.worker.faults.wait() else self.slots)
            except Exception as error:
                log.warning("node heartbeat failed: %r", error)

    def _take(self):
        try:
            self.worker.office().start()  # warm before the first job
        except Exception as error:
            log.warning("LibreOffice did not start yet, the first job will retry: %r", error)
        while not self.stopping.is_set():
            pause = self.worker.faults.wait()
            if pause:  # a fault of the service (faults.py): other nodes take the jobs meanwhile
                self.stopping.wait(pause)
                continue
            try:
                self.jobs.take()
            except Exception:
                log.exception("a job could not be taken; trying again")
                self.stopping.wait(1)
        self.worker.office().close()


def run_node(config, worker):
    """``python worker.py node``: a node until SIGTERM or SIGINT, then it finishes what it runs."""
    node = Node(config, worker, int(config["WORKERS"]))
    stopped = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopped.set())
    node.start()
    stopped.wait()
    log.info("%s draining", node.name)
    node.stop()
