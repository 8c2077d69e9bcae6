"""The huey worker: converts queued tasks and sweeps for retention and recovery.

Run by ``huey_consumer worker.huey`` (the Procfile's ``worker``). A task takes
only a task id and re-reads its row, so running it twice is harmless: only the
run that moves the row from QUEUED to PROCESSING converts.
"""

import functools
import logging
import os
import socket
import tempfile
import threading
from datetime import timedelta
from pathlib import Path

from huey import SqliteHuey, crontab

import converter
import marketplace
import observability
import settings
import sniff
from office import Office
from storage import db
from storage.objects import ObjectStore

log = logging.getLogger("docshift.worker")
config = settings.load()
huey = SqliteHuey("docshift", filename=config["QUEUE_DATABASE"], results=False)

MAX_ATTEMPTS = 3
_local = threading.local()
HOST = socket.gethostname()
_recovered = threading.Lock()


def connection():
    """One SQLite connection per worker thread."""
    if not hasattr(_local, "db"):
        _local.db = db.connect(config["DATABASE"])
    return _local.db


def store():
    if not hasattr(_local, "store"):
        _local.store = ObjectStore(config)
    return _local.store


def office():
    """This worker thread's own warm LibreOffice: workers and LibreOffices are one-to-one."""
    if not hasattr(_local, "office"):
        _local.office = Office(Path(config["DATA_DIR"]) / "office",
                               max_conversions=int(config["OFFICE_MAX_CONVERSIONS"]),
                               memory_limit_mb=int(config["OFFICE_MEMORY_LIMIT_MB"]),
                               name=threading.current_thread().name)
    return _local.office


@functools.cache
def marketplace_backend():
    """The configured marketplace, made once per process (the aws one holds three API clients)."""
    return marketplace.backend(config)


@huey.on_startup()
def started():
    # huey_consumer configures only huey's logger; ours would go nowhere below WARNING
    observability.configure_logging()
    db.init(connection())
    db.heartbeat(connection())
    try:
        store().ensure_bucket()
    except Exception as error:  # the store may still be starting; put_input creates it too
        log.warning("bucket not ready yet: %r", error)
    if _recovered.acquire(blocking=False):  # once per process, not per worker thread
        recover(connection(), store(), started_at=db.now())
    try:
        office().start()  # warm before the first task arrives
    except Exception as error:
        log.warning("LibreOffice did not start yet, the first task will retry: %r", error)


@huey.on_shutdown()
def stopping():
    if hasattr(_local, "office"):
        _local.office.stop()


@huey.task(retries=MAX_ATTEMPTS - 1, retry_delay=5)
def convert(task_id):
    run_conversion(task_id, connection(), store(), config, office())


def run_conversion(task_id, conn, objects, config, office):
    """Take a QUEUED task to SUCCEEDED (counted) or FAILED. Transient errors re-raise for a retry."""
    claimed = db.start_processing(conn, task_id, f"{HOST}:{os.getpid()}")
    if claimed is None:
        return None
    task, account = claimed
    if account["status"] != "active":
        _fail(conn, objects, task_id, "subscription_inactive",
              "The subscription became inactive before the conversion ran; not billed.")
        return "FAILED"
    kind = task["source_type"]
    restarts = office.restarts
    try:
        with tempfile.TemporaryDirectory(prefix=f"{task_id}-", dir=_workdir(config)) as tmp:
            source = Path(tmp) / f"input.{kind}"
            objects.fetch_input(task_id, source)
            sniff.check(source, kind)
            result = converter.convert(office, source, kind, tmp, config["CONVERSION_TIMEOUT"])
            size = result.stat().st_size
            objects.put_result(task_id, result, converter.target(kind))
    except converter.ConversionFailed as failure:
        log.info("task %s failed: %s", task_id, failure.code)
        _fail(conn, objects, task_id, failure.code, failure.message)
        return "FAILED"
    except Exception:
        log.exception("task %s: attempt %d broke", task_id, task["attempts"])
        if task["attempts"] >= MAX_ATTEMPTS:
            _fail(conn, objects, task_id, "conversion_failed", "The conversion failed repeatedly.")
            return "FAILED"
        db.requeue(conn, task_id)
        raise
    finally:
        if office.restarts > restarts:
            db.add_tally(conn, "libreoffice_restarts", office.restarts - restarts)
    billing = db.mark_succeeded(conn, task_id, size, config["RESULT_RETENTION_SECONDS"],
                                config["PLAN_QUOTAS"])
    _drop_input(conn, objects, task_id)
    log.info("task %s succeeded (%s, %d bytes)", task_id, billing, size)
    return "SUCCEEDED"


def _fail(conn, objects, task_id, code, message):
    db.mark_failed(conn, task_id, code, message)
    _drop_input(conn, objects, task_id)


def _drop_input(conn, objects, task_id):
    """Inputs go as soon as the task is final; the sweep retries if the store is down now."""
    try:
        objects.delete_input(task_id)
        db.mark_input_deleted(conn, task_id)
    except Exception as error:
        log.warning("input of %s not deleted yet: %r", task_id, error)


def _workdir(config):
    path = Path(config["DATA_DIR"]) / "work"
    path.mkdir(exist_ok=True)
    return path


@huey.periodic_task(crontab(minute="*"))
def subscriptions():
    """Every minute: apply the marketplace's subscription notifications."""
    sync_subscriptions(connection(), marketplace_backend())


def sync_subscriptions(conn, backend):
    """Re-read each notified customer's entitlements and apply them; acknowledge what was applied.

    A subscribe or update whose entitlement is not visible yet stays in the queue and
    comes back after the queue's visibility timeout, as does anything the marketplace
    did not answer for.
    """
    try:
        notifications = backend.notifications()
    except marketplace.MarketplaceUnavailable as error:
        log.warning("marketplace notifications unavailable: %s", error)
        return []
    applied = []
    for notification in notifications:
        try:
            customer = backend.customer(notification.customer_id)
        except marketplace.MarketplaceUnavailable as error:
            log.warning("entitlements of %s unavailable: %s", notification.customer_id, error)
            continue
        if customer.status == "pending" and notification.action in ("subscribe-success", "entitlement-updated"):
            log.info("%s for %s: no entitlement visible yet", notification.action, notification.customer_id)
            continue
        account = db.apply_subscription(conn, backend.name, customer)
        backend.acknowledge(notification)
        log.info("%s: account %s is %s on %s", notification.action, account["id"], account["status"],
                 account["plan"])
        applied.append(account)
    return applied


@huey.periodic_task(crontab(minute="5"))
def meter_overage():
    """Hourly: report each account's overage of the hours that have ended."""
    report_overage(connection(), marketplace_backend())


METERING_WINDOW = timedelta(hours=6)  # the marketplace refuses records older than this


def report_overage(conn, backend, at=None):
    """Send the overage of every ended hour not yet in the ledger (or still pending there).

    Each (account, hour) is written to the ledger as pending before it is sent and closed
    after; hours that fell out of the marketplace's window unsent are recorded as missed.
    Returns what the marketplace settled.
    """
    at = at or db.now()
    this_hour = db.hour_of(at)
    due = []
    for account, hour, quantity in db.overage_to_report(conn, this_hour - timedelta(days=7), this_hour):
        db.open_overage_report(conn, account["id"], hour, quantity)
        if db.parse(hour) < at - METERING_WINDOW:
            db.close_overage_report(conn, account["id"], hour, "missed")
            log.error("overage of account %s for %s was never reported in time", account["id"], hour)
        else:
            due.append((account, hour, quantity))
    settled = backend.meter(due) if due else {}
    for (account_id, hour), (status, record_id) in settled.items():
        db.close_overage_report(conn, account_id, hour, status, record_id)
    db.miss_overage_reports(conn, at - METERING_WINDOW)
    return settled


@huey.periodic_task(crontab(minute="*"))
def sweep():
    """Every minute: heartbeat, expire results, delete leftover inputs, forget old
    Idempotency-Keys, recover stuck tasks."""
    sweep_once(connection(), store(), config)


def sweep_once(conn, objects, config, at=None):
    at = at or db.now()
    db.heartbeat(conn)
    for task in db.results_to_expire(conn, at):
        # delete first: a crash in between leaves a SUCCEEDED row that the next sweep finishes
        objects.delete_result(task["id"])
        db.mark_expired(conn, task["id"])
    for task in db.final_tasks_with_input(conn):
        _drop_input(conn, objects, task["id"])
    db.purge_idempotency_keys(conn, at - timedelta(seconds=int(config["IDEMPOTENCY_KEY_TTL_SECONDS"])))
    recover_orphans(conn, objects)
    stuck_after = timedelta(seconds=int(config["CONVERSION_TIMEOUT"]) + 120)
    for task in db.stale_tasks(conn, at - timedelta(minutes=10), at - stuck_after):
        if task["status"] == "PROCESSING":
            _retry_or_fail(conn, objects, task)
        else:
            log.warning("re-enqueueing task %s, queued since %s", task["id"], task["created_at"])
            convert(task["id"])


def recover(conn, objects, started_at):
    """At a consumer's start: take back what a killed worker process left behind.

    PROCESSING tasks of dead processes go back to the queue, and QUEUED tasks are
    enqueued again, since a killed consumer may have taken them off huey's queue
    without claiming them. A second enqueue of a task is harmless: only one run
    can claim it.
    """
    recover_orphans(conn, objects)
    for task in db.queued_tasks(conn, started_at):
        convert(task["id"])


def recover_orphans(conn, objects):
    """PROCESSING tasks whose worker process on this host is gone: retried, or failed after
    MAX_ATTEMPTS."""
    for task in db.processing_tasks(conn):
        host, _, pid = (task["worker"] or "").partition(":")
        if host == HOST and pid.isdigit() and not _alive(int(pid)):
            log.warning("task %s was left by dead worker %s", task["id"], task["worker"])
            _retry_or_fail(conn, objects, task)


def _retry_or_fail(conn, objects, task):
    if task["attempts"] >= MAX_ATTEMPTS:
        _fail(conn, objects, task["id"], "conversion_failed", "The conversion failed repeatedly.")
        return
    db.requeue(conn, task["id"])
    convert(task["id"])


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
