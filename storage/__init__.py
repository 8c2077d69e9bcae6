"""The only code that talks SQL (``connection`` and a module per concern) or S3 (``s3``).

Installed as ``docshift.storage``. It speaks the domain: verbs on tasks,
accounts and results, and its own errors (``docshift.errors.StorageUnavailable``
and its kin), never a driver's. The verbs that span the database and the
bucket live here.
"""

import logging

from sqlite_utils import Database

from docshift.contract import Macros, Protection, Status
from docshift.errors import StorageUnavailable
from docshift.storage import tasks
from docshift.storage.connection import Row, iso, new_id, now
from docshift.storage.s3 import ObjectStore
from docshift.storage.tasks import Task

__all__ = ["ObjectStore", "Task", "submit_task"]
log = logging.getLogger("docshift.storage")


def submit_task(conn: Database, objects: ObjectStore, *, account_id: str, filename: str, kind: str, data: bytes,
                sha256: str, idempotency_key: str | None = None, max_unfinished: int | None = None,
                macros: Macros = Macros.KEEP, protection: Protection = Protection.KEEP,
                sealed_password: str | None = None, password_digest: str | None = None,
                filename_digest: str | None = None) -> Task:
    """Store the input, then commit its QUEUED task row; returns the task.

    When the row cannot be committed (the database is down; an identical request with the
    same Idempotency-Key committed first: ``IdempotencyKeyTaken``; the account has
    ``max_unfinished`` tasks waiting or running: ``TooManyUnfinished``), the stored input is
    removed again before the error goes on: no row, no input. ``sealed_password`` is the document's password as
    ``docshift.passwords.seal`` made it; ``password_digest`` its keyed hash, and ``filename_digest`` that of the file
    name as the client sent it, both kept only beside an Idempotency-Key.
    """
    task: Row = {"id": new_id("tsk"), "account_id": account_id, "status": Status.QUEUED,
                 "source_filename": filename, "source_type": kind, "source_size": len(data),
                 "source_sha256": sha256, "idempotency_key": idempotency_key, "macros": macros,
                 "protection": protection, "sealed_password": sealed_password,
                 "password_digest": password_digest if idempotency_key else None,
                 "filename_digest": filename_digest if idempotency_key else None, "created_at": iso(now())}
    objects.put_input(task["id"], data)
    try:
        tasks.create_task(conn, task, max_unfinished)
    except BaseException:
        try:
            objects.delete_input(task["id"])
        except StorageUnavailable as error:  # the bucket's lifecycle rule removes it later
            log.warning("input of uncommitted task %s not removed: %r", task["id"], error)
        raise
    return Task.from_row(task)
