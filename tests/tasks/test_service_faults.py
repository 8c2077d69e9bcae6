"""Faults that are the service's, not the file's, and the reverse.

A task whose stored input is gone ends FAILED ``input_missing`` at once, unbilled, never
requeued. A full disk and a LibreOffice that cannot start are retried without using the
file's attempts and never end a task FAILED; ``/healthz`` says what is wrong meanwhile. A
LibreOffice that dies after a conversion and cannot start again keeps the finished result."""

import os
import shutil
import signal
import subprocess

import pytest
import requests
from conftest import Service, input_stored, post_file, stop_process_group, wait_for

from docshift.engine import Engine
from docshift.engine.forkit import Forkit
from docshift.storage import connection, tasks
from docshift.tasks import conversion, maintenance
from docshift.web.context import get_db, get_store

# an address space too small for LibreOffice: every start fails, for real
TOO_LITTLE_MEMORY_MB = 250


def usage(service, key):
    return requests.get(f"{service.base_url}/v1/account/usage", headers={"Authorization": f"Bearer {key}"},
                        timeout=10).json()


def row(service, task_id):
    return tasks.get_task(connection.connect(service.config().database), task_id)


def health(service):
    response = requests.get(f"{service.base_url}/healthz", timeout=10)
    return response.status_code, response.json()["checks"]


def tries_given_up(service, task_id):
    """How often the worker put this task back for a fault of its own (its log says so)."""
    log = (service.data_dir / "worker.log").read_text()
    return log.count(f"task {task_id}: a fault of the service")


@pytest.fixture
def small_disk():
    """``mount(path)``: a 16 MiB tmpfs of its own on ``path``, to fill for real (mounting needs
    root, as the sandbox's root path does)."""
    mounted = []

    def mount(path, size="16m"):
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "docshift-test", str(path)],
                       check=True)
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        subprocess.run(["umount", "--lazy", str(path)], check=True)


def fill(directory, leave):
    """Fill the file system of ``directory`` until ``leave`` bytes are free."""
    with open(directory / "filler", "wb") as filler:
        filler.write(bytes(shutil.disk_usage(directory).free - leave))


# the input is gone: the file's fault, final at once ------------------------------------------

def test_a_missing_input_fails_input_missing_at_once(s3, tmp_path, legacy):
    service = Service(tmp_path / "svc", s3["env"])
    service.start_web()
    try:
        service.wait_healthy_web()
        key = service.register("input-gone")
        task_id = service.submit(key, legacy["doc"]).json()["task_id"]
        store = service.store()
        store.delete_input(task_id)  # as the bucket's lifecycle rule does after a long outage
        assert not input_stored(store, task_id)
        service.start_worker(workers=1)
        task = service.wait(key, task_id, timeout=60)
        assert task["status"] == "FAILED" and task["error"]["code"] == "input_missing"
        assert task["error"]["message"] and "billing_class" not in task
        stored = row(service, task_id)
        assert stored.attempts == 1 and stored.billing_class is None  # tried once, not requeued
        assert usage(service, key)["included_used"] == 0
    finally:
        service.stop()


# faults of the service: retried without using an attempt, never FAILED ------------------------

def test_an_engine_that_cannot_start_never_fails_a_task(s3, tmp_path, legacy):
    service = Service(tmp_path / "svc", s3["env"], OFFICE_MEMORY_LIMIT_MB=TOO_LITTLE_MEMORY_MB)
    service.start_web()
    service.start_worker(workers=1)
    try:
        service.wait_healthy_web()
        key = service.register("engine-down")
        task_id = service.submit(key, legacy["xls"]).json()["task_id"]
        # tried again and again, holding off longer each time (5 s, then 10 s): a try that used the file's attempt
        # would show from the second on
        wait_for(lambda: tries_given_up(service, task_id) >= 2 or service.wait_status(key, task_id) == "FAILED",
                 120, "the retries")
        assert service.wait_status(key, task_id) in ("QUEUED", "PROCESSING")
        assert row(service, task_id).attempts <= 1
        status, checks = health(service)
        assert status == 503 and checks["engine"].startswith("failing: ") and "LibreOffice" in checks["engine"]
        assert "ended before it was ready (exit status" in checks["engine"]  # not an empty answer: what happened

        # the operator gives LibreOffice its memory back: the same task converts, counted once
        stop_process_group(service.processes["worker"])
        service.env["DOCSHIFT_OFFICE_MEMORY_LIMIT_MB"] = "8192"
        service.start_worker(workers=1)
        task = service.wait(key, task_id, timeout=120)
        assert task["status"] == "SUCCEEDED" and task["billing_class"] == "INCLUDED"
        assert usage(service, key)["included_used"] == 1
    finally:
        service.stop()


def test_a_full_disk_is_retried_not_failed(s3, tmp_path, small_disk, slow_xls):
    service = Service(tmp_path / "svc", s3["env"])
    # where the worker keeps each task's input and copies its result (LibreOffice exports to memory)
    work = small_disk(service.data_dir / "tasks")
    try:
        service.start(workers=1)
        key = service.register("disk-full")
        # the input fits, the result does not
        fill(work, leave=slow_xls.stat().st_size + 64 * 1024)
        task_id = service.submit(key, slow_xls).json()["task_id"]

        def says_disk_full():
            status, checks = health(service)
            return status == 503 and checks["engine"].startswith("failing: ") and "disk" in checks["engine"]
        wait_for(lambda: says_disk_full() or service.wait_status(key, task_id) == "FAILED", 120,
                 "the full disk in /healthz")
        assert service.wait_status(key, task_id) in ("QUEUED", "PROCESSING")
        assert row(service, task_id).attempts <= 1

        (work / "filler").unlink()  # the operator frees the disk: the same task converts, counted once
        task = service.wait(key, task_id, timeout=120)
        assert task["status"] == "SUCCEEDED" and usage(service, key)["included_used"] == 1
        wait_for(lambda: health(service)[0] == 200, 60, "a healthy service")
    finally:
        service.stop()


def test_a_file_failing_for_its_own_sake_leaves_a_full_disk_standing(tmp_path, small_disk, caplog):
    """A full disk stands until a conversion gets through. A file that fails for its own sake (an encrypted one,
    refused before LibreOffice writes anything) while the disk is still full does not say it has passed: /healthz
    keeps naming it, the log does not say "passed", and the hold-off is not started again from its first pause.
    Once the disk has room, such a failure does pass it."""
    from docshift import settings
    from docshift.contract import TaskErrorCode, Verdict
    from docshift.tasks.conversion import Outcome
    from docshift.tasks.shared import Conversions

    data = small_disk(tmp_path / "data", size="96m")  # room beyond the reserve the service keeps free
    conversions = Conversions(settings.load({"DATA_DIR": str(data)}), on_change=lambda: None)
    conversions.engine()  # built, not started: where its files go is known
    fill(data, leave=1024 * 1024)
    own_sake = Outcome(Verdict.FAILED, code=TaskErrorCode.ENCRYPTED_DOCUMENT, message="encrypted")
    faults = conversions.faults
    caplog.set_level("INFO", logger="docshift.faults")

    faults.observe(Outcome(Verdict.RETRY, fault="the disk of the work directory is full"))
    faults.observe(Outcome(Verdict.RETRY, fault="the disk of the work directory is full"))
    pause = faults.pause
    faults.observe(own_sake)
    assert conversions.health()[0] == "broken" and "disk" in conversions.health()[1]
    assert faults.pause == pause and faults.wait() > 0
    assert "has passed" not in caplog.text

    (data / "filler").unlink()
    faults.observe(own_sake)
    assert conversions.health()[0] != "broken" and faults.wait() == 0
    assert "has passed" in caplog.text


def test_a_parent_that_dies_and_cannot_start_again_keeps_the_finished_result(app, client, account, legacy,
                                                                              tmp_path):
    """The conversion is done when LibreOffice's parent dies and its restarts fail: the result stands, and the
    next task, meeting an engine that cannot start, goes back to the queue without using an attempt."""
    office = Forkit(tmp_path / "office", name="dying")
    office.start()
    try:
        submitted = [post_file(client, account, legacy["doc"].read_bytes(), "letter.doc").get_json()["task_id"]
                     for _ in range(2)]
        with app.app_context():
            conn, store = get_db(), get_store()
            config = app.config["DOCSHIFT"]
            # the worker's step takes the account's oldest waiting task first: submitted[0], then submitted[1]
            worker = maintenance.worker_name()
            assert conversion.run_next(conn, store, config, Engine(office), worker) == "SUCCEEDED"
            office.memory_limit = TOO_LITTLE_MEMORY_MB << 20  # from now on every start fails, for real
            os.killpg(office.process.pid, signal.SIGKILL)
            wait_for(lambda: not office.running, 10, "the parent's sandbox to go")
            assert store.result_size(tasks.get_task(conn, submitted[0]).result_key)
            assert conversion.run_next(conn, store, config, Engine(office), worker) == "QUEUED"
            assert office.broken and office.starts == 1 + 3, office.starts  # three attempts, each failed
            task = tasks.get_task(conn, submitted[1])
            assert task.status == "QUEUED" and task.attempts == 0 and task.error_code is None
            assert tasks.get_task(conn, submitted[0]).status == "SUCCEEDED"
    finally:
        office.close()
