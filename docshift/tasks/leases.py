"""The object store as one run of a task sees it: the task's input, and a result that goes under
the key the run's lease names (``storage.s3.result_key``), only while the lease holds.

A run that was given up on (its lease taken back as stuck) may still be converting. Checking the
lease before the upload keeps it from storing anything; the key of its own keeps it, should the
lease be lost between the check and the upload, from overwriting the result of the run that holds
the task now, or from recreating one that expired. The task's row names the key it serves.
"""

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from docshift.errors import LeaseLost
from docshift.storage import ObjectStore, tasks
from docshift.storage.s3 import Links, result_key
from docshift.storage.tasks import Task

log = logging.getLogger("docshift.tasks")


class RunStore:
    """One box: the store and the database, for the run holding ``task`` (a claimed row)."""

    def __init__(self, objects: ObjectStore, conn: Database, task: Task) -> None:
        self.objects, self.conn = objects, conn
        self.task_id, self.lease = task.id, tasks.lease_of(task)

    def fetch_input(self, task_id: str, path: Path) -> None:
        return self.objects.fetch_input(task_id, path)

    def put_result(self, task_id: str, path: Path, extension: str) -> None:
        if not tasks.holds(self.conn, self.task_id, self.lease):
            raise LeaseLost(f"task {self.task_id} is no longer held by {self.lease}")
        self.objects.put_result(result_key(self.task_id, self.lease), path, extension)

    def discard_result(self) -> None:
        """Remove what this run stored as its result (none, or one its conversion then failed): a key of its own."""
        self.objects.delete_result(result_key(self.task_id, self.lease))

    def __getattr__(self, name: str) -> Any:  # what else a run may ask of the store
        return getattr(self.objects, name)


class JobStore:
    """A conversion node: no credential, only the job's links (a GET of its input, a PUT of its
    result under the key its lease names); ``taken_back()`` asks the coordinator's registry."""

    def __init__(self, job: dict[str, Any], taken_back: Callable[[], bool]) -> None:
        self.job, self.taken_back = job, taken_back
        self.links = Links()

    def fetch_input(self, task_id: str, path: Path) -> None:
        self.links.fetch(self.job["input"], path)

    def put_result(self, task_id: str, path: Path, extension: str) -> None:
        if self.taken_back():
            raise LeaseLost(f"job {self.job['holder']} of task {self.job['task_id']} was taken back")
        self.links.put(self.job["result"], path, extension)
