"""The service's own duties: liveness, retention, leftover inputs, forgotten keys, recovery.

They run on a thread of their own in every worker process (``docshift.tasks.worker``),
never in the queue behind conversions.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, cast

from sqlite_utils import Database

from docshift.contract import TaskErrorCode
from docshift.engine import alive
from docshift.settings import Settings
from docshift.storage import ObjectStore, connection, liveness, tasks
from docshift.storage.tasks import Task
from docshift.tasks.conversion import MAX_ATTEMPTS, drop_input, fail, max_run_seconds
from docshift.tasks.queue import Queue

if TYPE_CHECKING:
    from docshift.tasks.registry import Registry

log = logging.getLogger("docshift.maintenance")

HOST = socket.gethostname()
# a holder on another host is gone when its process has not beaten for this long
HOLDER_SILENCE = timedelta(seconds=90)
# an upload in the spool that no waiting task wants (its row never committed, its removal was missed) goes after
# this long, as the bucket's lifecycle rule removes one from the bucket
SPOOL_BACKSTOP_SECONDS = 3600.0


def worker_name() -> str:
    """host:pid:start, the holder recorded on each claim and the name of this process's heartbeat.
    ``start`` (``process_start``) tells this process from a later one given the same pid, as a
    restarted container's worker is. Read from /proc once per pid (0.25 ms, on the way of each claim): a
    forked child names itself again."""
    pid = os.getpid()
    name = _NAMES.get(pid)
    if name is None:
        name = _NAMES[pid] = f"{HOST}:{pid}:{process_start(pid)}"
    return name


_NAMES: dict[int, str] = {}


def process_start(pid: int) -> str:
    """Which start of ``pid`` runs now: the kernel's boot id and the process's start time since
    that boot (/proc/PID/stat), or "" where /proc cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip().replace("-", "")[:12]
    except OSError:
        return ""
    # the fields after the command name, which may itself hold spaces and parentheses
    return f"{boot}.{stat.rpartition(')')[2].split()[19]}"


def heartbeat(conn: Database, at: datetime | None = None) -> None:
    """This process is alive: its own beat, and the service's 'worker' beat read by /healthz."""
    at = at or connection.now()
    liveness.heartbeat(conn, "worker", at)
    liveness.heartbeat(conn, f"worker:{worker_name()}", at)


def sweep_once(conn: Database, objects: ObjectStore, config: Settings, at: datetime | None = None,
               queue: Queue | None = None, registry: Registry | None = None) -> None:
    """Expire results, delete leftover inputs, forget old Idempotency-Keys, take back stuck
    tasks (``registry`` knows the conversion nodes' jobs), and on the SQLite queue keep a
    message for every QUEUED task."""
    at = at or connection.now()
    heartbeat(conn, at)
    for task in tasks.results_to_expire(conn, at):
        # delete first: a crash in between leaves a SUCCEEDED row that the next sweep finishes
        objects.delete_result(cast(str, task.result_key))  # a SUCCEEDED task names its result's key
        tasks.mark_expired(conn, task.id)
    for row in tasks.final_tasks_with_input(conn):
        drop_input(conn, objects, row["id"])
    objects.spool.sweep(SPOOL_BACKSTOP_SECONDS, functools.partial(tasks.is_unfinished, conn))
    tasks.purge_idempotency_keys(conn, at - timedelta(seconds=config.idempotency_key_ttl_seconds))
    recover_stuck(conn, objects, config, at, registry)
    if registry is None:  # tasks wait in SQLite's queue, not as jobs of the coordinator's
        top_up(conn, queue or Queue(config))


def recover(conn: Database, objects: ObjectStore, config: Settings, queue: Queue | None = None,
            registry: Registry | None = None) -> None:
    """At a worker's start: take back the tasks of dead workers, and on one box (no ``registry`` of nodes) make
    sure every QUEUED task has its message (a killed consumer may have taken messages without claiming)."""
    recover_stuck(conn, objects, config, connection.now(), registry)
    if registry is None:
        top_up(conn, queue or Queue(config))


def recover_stuck(conn: Database, objects: ObjectStore, config: Settings, at: datetime,
                  registry: Registry | None = None) -> None:
    """PROCESSING tasks whose holder is gone, or that were held past the longest legitimate run:
    back to the queue, or FAILED after MAX_ATTEMPTS; a node's job that no node began goes back
    without using an attempt. Only that holder's lease is taken back."""
    longest = timedelta(seconds=max_run_seconds(config))
    for task in tasks.processing_tasks(conn):
        started = connection.parse(cast(str, task.started_at))  # PROCESSING: claimed, so started
        overdue = started + longest < at
        holder = task.worker or ""
        job = holder.startswith("job:")  # a conversion node's job
        node = registry.runner(holder) if job and registry is not None else None
        if job:
            gone = registry is not None and registry.job_gone(holder, node, started, at)
        else:
            gone = holder_gone(conn, task.worker, at)
        if overdue or gone:
            # a job no node began was lost on its way (Redis restarted empty, a node with another
            # key): the service's fault, not the file's, so it costs no attempt. One read of the
            # running jobs decides both: read twice, a node that wrote its running job again in
            # between (its heartbeat after Redis restarted empty) made a lost job use an attempt
            lost = job and registry is not None and node is None
            log.warning("task %s taken back from %s (attempt %d%s)", task.id, task.worker, task.attempts,
                        (", overdue" if overdue else "") + (", never started: no attempt used" if lost else ""))
            if job and registry is not None:  # its node, should it still run it, stores nothing
                registry.revoke(holder)
            if lost:
                tasks.release(conn, task.id, tasks.lease_of(task))
            else:
                retry_or_fail(conn, objects, task)


def holder_gone(conn: Database, holder: str | None, at: datetime) -> bool:
    """True when the process named ``holder`` (host:pid:start) has certainly stopped: on this host
    its pid is gone or now belongs to a later start; elsewhere its heartbeat went silent. An
    unknown holder is never declared gone."""
    host, _, rest = (holder or "").partition(":")
    pid, _, start = rest.partition(":")  # no start: a holder recorded before starts were
    if not pid.isdigit():
        return False
    if host == HOST:
        return not alive(int(pid)) or bool(start and start != process_start(int(pid)))
    beat = liveness.last_heartbeat(conn, f"worker:{holder}")
    return beat is not None and beat + HOLDER_SILENCE < at


def retry_or_fail(conn: Database, objects: ObjectStore, task: Task) -> None:
    lease = tasks.lease_of(task)
    if task.attempts >= MAX_ATTEMPTS:
        fail(conn, objects, task.id, TaskErrorCode.CONVERSION_FAILED, "The conversion failed repeatedly.", lease)
    else:
        tasks.requeue(conn, task.id, lease)


def top_up(conn: Database, queue: Queue, most: int | None = None) -> None:
    """One message per QUEUED task at least: those lost (a killed consumer, a failed enqueue) are
    replaced. Extra messages are harmless: a message that finds nothing to claim does nothing. ``most``: no more
    than that many (a slot come free wakes as many consumers as there are slots, not one per waiting task)."""
    missing = tasks.queued_count(conn) - queue.pending()
    for _ in range(max(0, missing if most is None else min(missing, most))):
        queue.enqueue()
    if missing > 0 and most is None:
        log.info("%d queue messages added for waiting tasks", missing)
