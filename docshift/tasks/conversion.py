"""One conversion task, from its QUEUED row to SUCCEEDED (counted) or FAILED.

A run claims a task (the fairest waiting one, or a given one), which makes the
run the task's lease holder: only the holder (its worker and attempt) may
finish it, so a run that was given up on can never overwrite what a later run
did. An outage of the database or the object store is waited out (up to
``OUTAGE_PATIENCE_SECONDS`` per run), then the task goes back to the queue
without using up an attempt; so does a fault of the service (a full disk, a
LibreOffice that cannot start: ``faults.py``). An input that is gone fails
``input_missing`` at once.
"""

import logging
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sqlite_utils import Database

from docshift import passwords
from docshift.accounts import billing
from docshift.contract import Macros, Protection, Status, TaskErrorCode, Verdict
from docshift.engine import LONG_RUN_SHARE, LONGEST_START_SECONDS, Engine
from docshift.errors import (
    ConversionFailed,
    InputMissing,
    LeaseLost,
    Preempted,
    ServiceFault,
    StorageUnavailable,
    UploadCancelled,
)
from docshift.formats import source_name
from docshift.settings import Settings
from docshift.storage import ObjectStore, accounts, liveness, tasks
from docshift.storage.connection import Row
from docshift.storage.s3 import LONGEST_CALL, result_key
from docshift.storage.tasks import Task
from docshift.tasks.faults import Faults, diagnose
from docshift.tasks.leases import JobStore, RunStore

log = logging.getLogger("docshift.tasks")
_T = TypeVar("_T")

MAX_ATTEMPTS = 3
INPUT_MISSING = ("The uploaded file was no longer stored when its conversion ran (inputs are kept at most a day); "
                 "submit it again. Not billed.")


def max_run_seconds(config: Settings) -> float:
    """The longest one run can legitimately hold a task; past it, the task is declared stuck.

    Three LibreOffice starts (the warm one may be replaced before the file, after a crash,
    and after recycling), the file converted twice (a crash is retried once), a wait behind
    another file's retry after an OOM kill (which runs alone once the conversions running
    end), the input fetched and the result stored with every try of the store client timing
    out, and the run's whole patience with an outage.
    """
    conversions = 3 * LONGEST_START_SECONDS + 4 * config.conversion_timeout
    transfers = 2 * LONGEST_CALL
    return conversions + transfers + config.outage_patience_seconds + 60


class Patience:
    """Retries a storage call while the database or the object store is unavailable, with
    backoff, until the run's budget is spent; then the error goes on."""

    def __init__(self, budget: float, sleep: Callable[[float], object] = time.sleep) -> None:
        self.deadline = time.monotonic() + float(budget)
        self.sleep = sleep

    def __call__(self, action: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        delay = 0.5
        while True:
            try:
                return action(*args, **kwargs)
            except StorageUnavailable as error:
                if time.monotonic() + delay > self.deadline:
                    raise
                log.warning("%s: %s; retrying in %.1f s", getattr(action, "__name__", action), error, delay)
                self.sleep(delay)
                delay = min(delay * 2, 15)


@dataclass
class Outcome:
    """What one conversion of a task came to, wherever it ran; applied to the task's row by
    ``apply_outcome`` (in the worker, or on the coordinator for a conversion node)."""
    status: Verdict             # SUCCEEDED, FAILED, or RETRY (a transient failure: queue it again)
    size: int | None = None     # bytes of the stored result
    code: TaskErrorCode | None = None  # FAILED: the documented error code
    message: str | None = None
    detected_format: str | None = None  # what LibreOffice recognised in the upload
    extension: str | None = None  # SUCCEEDED: the result's type (docx, docm, ...)
    fidelity: dict[str, Any] | None = None  # SUCCEEDED: what the source holds against what the result holds
    outage: bool = False        # RETRY because storage stayed away, not because of the file
    fault: str | None = None    # RETRY because of a fault of the service (``faults.py``): what it was
    preempted: bool = False     # RETRY because its slot went to another account's waiting file
    restarts: int = 0           # LibreOffice processes replaced during the conversion


def long_seconds(config: Settings) -> float:
    """How long a run lasts before it counts as long (``tasks.held_back``): a twelfth of the timeout, 10 s
    by default. The corpus's files take 0.05-5 s; a file made to run until the timeout is past it early."""
    return config.conversion_timeout * LONG_RUN_SHARE


def slots(config: Settings, total: int) -> tasks.Slots:
    return tasks.Slots(total, long_seconds(config))


def run_next(conn: Database, objects: ObjectStore, config: Settings, engine: Engine, worker: str,
             faults: Faults | None = None) -> Status | None:
    """Claim the fairest waiting task and run it; None when nothing waits or nothing may start now (the
    box's ``config.workers`` slots, ``tasks.claim_next``). ``faults`` (a ``faults.Faults``) hears how the
    conversion went."""
    claimed = Patience(config.outage_patience_seconds)(tasks.claim_next, conn, worker, slots(config, config.workers))
    return None if claimed is None else _run(*claimed, conn, objects, config, engine, faults)


def _run(task: Task, account: Row, conn: Database, objects: ObjectStore, config: Settings, engine: Engine,
         faults: Faults | None = None) -> Status | None:
    if account["status"] != "active":
        outcome = Outcome(Verdict.FAILED, code=TaskErrorCode.SUBSCRIPTION_INACTIVE,
                          message=accounts.INACTIVE_MESSAGE)
        return apply_outcome(conn, objects, config, task, outcome)
    with ExitStack() as after:  # the run's workspace goes once its outcome is recorded, not on the client's wait
        outcome = convert_task(task.id, task.source_type, RunStore(objects, conn, task), config, engine,
                               task.macros, task.source_filename,
                               password=document_password(config, task), protection=task.protection, after=after)
        if faults is not None:
            faults.observe(outcome)
        return apply_outcome(conn, objects, config, task, outcome)


def document_password(config: Settings, task: Task) -> str | None:
    """The password the task's row keeps sealed (``passwords.py``), if any; None once the task is final."""
    if not task.sealed_password:
        return None
    password = passwords.unseal(config, task.sealed_password)
    if password is None:
        log.warning("task %s: its Document-Password was sealed with another secret key; it goes without", task.id)
    return password


def convert_task(task_id: str, kind: str, objects: RunStore | JobStore, config: Settings, engine: Engine,
                 macros: Macros = Macros.KEEP, filename: str | None = None,
                 password: str | None = None, protection: Protection = Protection.KEEP, *,
                 after: ExitStack) -> Outcome:
    """Fetch the input, convert it, store the result: the part of a task that needs no database
    (a conversion node runs only this). Never raises for the file's sake: returns an Outcome.
    LibreOffice gets the file under the customer's ``filename``, made safe (``source_name``).

    ``password`` opens a protected source; its result is protected by it again unless ``protection`` is REMOVE.
    The run's workspace is removed as the caller's ``after`` closes: once the outcome is recorded, off the client's
    wait."""
    patiently = Patience(config.outage_patience_seconds)
    restarts = engine.restarts
    try:
        # the engine's workspace: no sandbox sees it, and LibreOffice gets copies
        tmp = after.enter_context(engine.workspace(task_id))
        # what LibreOffice derives from the name (a FILENAME field, a sheet) shows the customer's
        source = tmp / source_name(filename, kind)
        patiently(objects.fetch_input, task_id, source)
        # one box: the result goes up while the engine checks and counts it (a node's link cannot take it back)
        upload = _Upload(objects, task_id, patiently.deadline) if isinstance(objects, RunStore) else None
        try:
            converted = engine.convert(source, kind, tmp, config.conversion_timeout, task_id, macros,
                                       password=password, protect=protection != Protection.REMOVE,
                                       ready=upload.start if upload else None)
            if upload is None or not upload.finish():
                patiently(objects.put_result, task_id, converted.path, converted.extension)
        except BaseException:
            if upload is not None:
                upload.discard()
            raise
        size = converted.path.stat().st_size
        outcome = Outcome(Verdict.SUCCEEDED, size=size, detected_format=converted.detected_format,
                          extension=converted.extension, fidelity=converted.fidelity)
    except InputMissing:
        log.warning("task %s: its stored input is gone; it fails input_missing", task_id)
        outcome = Outcome(Verdict.FAILED, code=TaskErrorCode.INPUT_MISSING, message=INPUT_MISSING)
    except ConversionFailed as failure:
        fault = diagnose(failure, engine)  # a full disk fails a conversion too
        if fault is not None:
            outcome = _held_back(task_id, fault)
        else:
            log.info("task %s failed: %s%s", task_id, failure.code,
                     f" (LibreOffice recognised {failure.detected_format})" if failure.detected_format else "")
            outcome = Outcome(Verdict.FAILED, code=failure.code, message=failure.message,
                              detected_format=failure.detected_format)
    except Preempted:
        log.info("task %s: stopped to give its slot to another account's file; back to the queue", task_id)
        outcome = Outcome(Verdict.RETRY, preempted=True)
    except StorageUnavailable:
        log.exception("task %s: storage unavailable past the run's patience; back to the queue", task_id)
        outcome = Outcome(Verdict.RETRY, outage=True)
    except LeaseLost as lost:  # given up on while it ran: a later run has the task, this one stores nothing
        log.warning("task %s: result not stored: %s", task_id, lost)
        outcome = Outcome(Verdict.RETRY)
    except Exception as error:
        fault = diagnose(error, engine)
        if fault is not None:
            outcome = _held_back(task_id, fault)
        else:
            log.exception("task %s: the conversion broke", task_id)
            outcome = Outcome(Verdict.RETRY)
    outcome.restarts = engine.restarts - restarts
    return outcome


class _Upload:
    """A run's result upload on a thread of its own, from the moment the engine says the file is written whole
    (``start``) while it checks and counts what the file holds. Told again (a workbook's stored values went in), it
    puts the file again once the earlier put has ended: the last put is what the store keeps. ``finish`` waits for
    it; ``discard`` (the conversion failed after all, or broke) stops it and removes what it may have stored. Waits
    out an outage until ``deadline`` (the run's)."""

    def __init__(self, objects: RunStore, task_id: str, deadline: float) -> None:
        self.objects, self.task_id = objects, task_id
        self.cancelled = threading.Event()
        self.patiently = Patience(max(0.0, deadline - time.monotonic()), sleep=self._sleep)
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self, path: Path, extension: str) -> None:
        earlier = self.thread

        def run() -> None:
            if earlier is not None:  # its file was replaced: what it stores (whatever it read) is put over
                earlier.join()
            self.error = None
            if self.cancelled.is_set():
                return
            try:
                self.patiently(self.objects.put_result, self.task_id, path, extension)
            except BaseException as error:
                self.error = error

        self.thread = threading.Thread(target=run, daemon=True, name="result-upload")
        self.thread.start()

    def _sleep(self, delay: float) -> None:
        if self.cancelled.wait(delay):
            raise UploadCancelled

    def finish(self) -> bool:
        """True once this upload stored the result, False if it never started; raises what the upload raised."""
        if self.thread is None:
            return False
        self.thread.join()
        if self.error is not None:
            raise self.error
        return True

    def discard(self) -> None:
        if self.thread is None:
            return
        self.cancelled.set()
        self.thread.join()
        try:
            self.objects.discard_result()
        except StorageUnavailable as error:  # the bucket's lifecycle rule removes it later
            log.warning("result of %s not removed after its conversion failed: %r", self.task_id, error)


def _held_back(task_id: str, fault: ServiceFault) -> Outcome:
    log.error("task %s: a fault of the service, not of the file (%s); back to the queue without using an attempt",
              task_id, fault)
    return Outcome(Verdict.RETRY, fault=str(fault))


def apply_outcome(conn: Database, objects: ObjectStore, config: Settings, task: Task,
                  outcome: Outcome) -> Status | None:
    """Record an Outcome on the task it was claimed for, if that claim still holds the task:
    SUCCEEDED and counted in one transaction, FAILED, or QUEUED again (FAILED after
    MAX_ATTEMPTS). Returns the final status, QUEUED, or None when the lease was lost."""
    task_id, lease = task.id, tasks.lease_of(task)
    patiently = Patience(config.outage_patience_seconds)
    if not (outcome.outage or outcome.fault):  # how long the file took, not an outage
        _quietly(tasks.note_run, conn, task, long_seconds(config))
    if outcome.restarts:
        _quietly(liveness.add_tally, conn, "libreoffice_restarts", outcome.restarts)
    if outcome.status == Verdict.SUCCEEDED:
        billed = patiently(tasks.mark_succeeded, conn, task_id, outcome.size, config.result_retention_seconds,
                           billing.rule(config.plan_quotas), lease=lease, detected_format=outcome.detected_format,
                           result_extension=outcome.extension, fidelity=outcome.fidelity)
        if billed is None and patiently(tasks.ended_inactive, conn, task_id):
            log.info("task %s: its account became inactive while it converted; failed, not billed", task_id)
            _quietly(objects.delete_result, result_key(task_id, lease))
            drop_input(conn, objects, task_id)
            return Status.FAILED
        if billed is None:
            log.warning("task %s: lease %s lost before the result was recorded; not counted here", task_id, lease)
            return None
        drop_input(conn, objects, task_id)
        log.info("task %s succeeded (%s, %s, %d bytes)", task_id, outcome.detected_format, billed, outcome.size)
        return Status.SUCCEEDED
    if outcome.status == Verdict.RETRY and (outcome.outage or outcome.fault or outcome.preempted):
        if not patiently(tasks.release, conn, task_id, lease):
            return None
        if outcome.preempted:
            _quietly(liveness.add_tally, conn, "runs_stopped", 1)
        return Status.QUEUED
    if outcome.status == Verdict.RETRY and task.attempts < MAX_ATTEMPTS:
        return Status.QUEUED if patiently(tasks.requeue, conn, task_id, lease) else None
    if outcome.status == Verdict.RETRY:
        outcome = Outcome(Verdict.FAILED, code=TaskErrorCode.CONVERSION_FAILED,
                          message="The conversion failed repeatedly.")
    return Status.FAILED if patiently(fail, conn, objects, task_id, outcome.code, outcome.message, lease,
                                 outcome.detected_format) else None


def fail(conn: Database, objects: ObjectStore, task_id: str, code: str, message: str,
         lease: tuple[str | None, int] | None = None, detected_format: str | None = None) -> bool:
    if not tasks.mark_failed(conn, task_id, code, message, lease, detected_format):
        return False
    drop_input(conn, objects, task_id)
    return True


def drop_input(conn: Database, objects: ObjectStore, task_id: str) -> None:
    """Inputs go as soon as the task is final; the sweep retries if the store is down now."""
    try:
        objects.delete_input(task_id)
        tasks.mark_input_deleted(conn, task_id)
    except StorageUnavailable as error:
        log.warning("input of %s not deleted yet: %r", task_id, error)


def _quietly(action: Callable[..., object], *args: Any) -> None:
    try:
        action(*args)
    except StorageUnavailable as error:
        log.warning("%s skipped: %r", action.__name__, error)
