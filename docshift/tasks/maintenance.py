"""The service's own duties: heartbeat, retention, leftover inputs, forgotten keys, recovery."""

import logging
import os
import socket
from datetime import timedelta

from docshift.engine.office import alive
from docshift.storage import db
from docshift.tasks.conversion import MAX_ATTEMPTS, drop_input, fail
from docshift.tasks.queue import Queue

log = logging.getLogger("docshift.maintenance")

HOST = socket.gethostname()


def sweep_once(conn, objects, config, at=None, enqueue=None):
    """Heartbeat, expire results, delete leftover inputs, forget old Idempotency-Keys,
    recover stuck tasks (``enqueue(task_id)`` hands one to the queue again; by default the
    configured queue)."""
    at = at or db.now()
    enqueue = enqueue or Queue(config).enqueue
    db.heartbeat(conn)
    for task in db.results_to_expire(conn, at):
        # delete first: a crash in between leaves a SUCCEEDED row that the next sweep finishes
        objects.delete_result(task["id"])
        db.mark_expired(conn, task["id"])
    for task in db.final_tasks_with_input(conn):
        drop_input(conn, objects, task["id"])
    db.purge_idempotency_keys(conn, at - timedelta(seconds=int(config["IDEMPOTENCY_KEY_TTL_SECONDS"])))
    recover_orphans(conn, objects, enqueue)
    stuck_after = timedelta(seconds=int(config["CONVERSION_TIMEOUT"]) + 120)
    for task in db.stale_tasks(conn, at - timedelta(minutes=10), at - stuck_after):
        if task["status"] == "PROCESSING":
            retry_or_fail(conn, objects, task, enqueue)
        else:
            log.warning("re-enqueueing task %s, queued since %s", task["id"], task["created_at"])
            enqueue(task["id"])


def recover(conn, objects, enqueue, started_at):
    """At a consumer's start: take back what a killed worker process left behind.

    PROCESSING tasks of dead processes go back to the queue, and QUEUED tasks are
    enqueued again, since a killed consumer may have taken them off huey's queue
    without claiming them. A second enqueue of a task is harmless: only one run
    can claim it.
    """
    recover_orphans(conn, objects, enqueue)
    for task in db.queued_tasks(conn, started_at):
        enqueue(task["id"])


def recover_orphans(conn, objects, enqueue):
    """PROCESSING tasks whose worker process on this host is gone: retried, or failed after
    MAX_ATTEMPTS."""
    for task in db.processing_tasks(conn):
        host, _, pid = (task["worker"] or "").partition(":")
        if host == HOST and pid.isdigit() and not alive(int(pid)):
            log.warning("task %s was left by dead worker %s", task["id"], task["worker"])
            retry_or_fail(conn, objects, task, enqueue)


def retry_or_fail(conn, objects, task, enqueue):
    if task["attempts"] >= MAX_ATTEMPTS:
        fail(conn, objects, task["id"], "conversion_failed", "The conversion failed repeatedly.")
        return
    db.requeue(conn, task["id"])
    enqueue(task["id"])


def worker_name():
    """host:pid, recorded on each claim so that the tasks of a dead process can be found."""
    return f"{HOST}:{os.getpid()}"
