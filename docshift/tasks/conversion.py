"""One conversion task, from its QUEUED row to SUCCEEDED (counted) or FAILED.

A task takes only a task id and re-reads its row, so running it twice is
harmless: only the run that moves the row from QUEUED to PROCESSING converts.
"""

import logging
import tempfile
from pathlib import Path

from docshift.engine import convert, precheck
from docshift.errors import ConversionFailed, StorageUnavailable
from docshift.formats import FORMATS
from docshift.storage import db

log = logging.getLogger("docshift.tasks")

MAX_ATTEMPTS = 3


def run_conversion(task_id, conn, objects, config, office, worker=None):
    """Take a QUEUED task to SUCCEEDED (counted) or FAILED. Transient errors re-raise for a retry."""
    claimed = db.start_processing(conn, task_id, worker)
    if claimed is None:
        return None
    task, account = claimed
    if account["status"] != "active":
        fail(conn, objects, task_id, "subscription_inactive",
             "The subscription became inactive before the conversion ran; not billed.")
        return "FAILED"
    kind = task["source_type"]
    restarts = office.restarts
    try:
        # the office's job dir: the only host directory its sandbox can see
        office.job_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"{task_id}-", dir=office.job_dir) as tmp:
            source = Path(tmp) / f"input.{kind}"
            objects.fetch_input(task_id, source)
            precheck.check(source, kind)
            result = convert.convert(office, source, kind, tmp, config["CONVERSION_TIMEOUT"], task_id)
            size = result.stat().st_size
            objects.put_result(task_id, result, FORMATS[kind].target)
    except ConversionFailed as failure:
        log.info("task %s failed: %s", task_id, failure.code)
        fail(conn, objects, task_id, failure.code, failure.message)
        return "FAILED"
    except Exception:
        log.exception("task %s: attempt %d broke", task_id, task["attempts"])
        if task["attempts"] >= MAX_ATTEMPTS:
            fail(conn, objects, task_id, "conversion_failed", "The conversion failed repeatedly.")
            return "FAILED"
        db.requeue(conn, task_id)
        raise
    finally:
        if office.restarts > restarts:
            db.add_tally(conn, "libreoffice_restarts", office.restarts - restarts)
    billing = db.mark_succeeded(conn, task_id, size, config["RESULT_RETENTION_SECONDS"],
                                config["PLAN_QUOTAS"])
    drop_input(conn, objects, task_id)
    log.info("task %s succeeded (%s, %d bytes)", task_id, billing, size)
    return "SUCCEEDED"


def fail(conn, objects, task_id, code, message):
    db.mark_failed(conn, task_id, code, message)
    drop_input(conn, objects, task_id)


def drop_input(conn, objects, task_id):
    """Inputs go as soon as the task is final; the sweep retries if the store is down now."""
    try:
        objects.delete_input(task_id)
        db.mark_input_deleted(conn, task_id)
    except StorageUnavailable as error:
        log.warning("input of %s not deleted yet: %r", task_id, error)
