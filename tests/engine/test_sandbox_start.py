"""The worker's start without a sandbox, and what LibreOffice leaves behind: nothing, whatever its files did and
even when its worker is killed."""

import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import olefile
import pytest
import requests
from conftest import BIN, Service, ended_children_dirs, soffice_pids, wait_for

from docshift.engine import Engine
from docshift.engine.forkit import Forkit

# the worker's start ----------------------------------------------------------------------

@pytest.fixture
def unusable_bwrap():
    """``path(how)``: a PATH on which bubblewrap fails for real: a ``bwrap`` that exits 1, or none
    at all. Not under /tmp, which a root worker's sandbox stage covers before it runs bwrap."""
    fake = Path(tempfile.mkdtemp(prefix="docshift-fake-bwrap-", dir="/var/tmp"))
    fake.chmod(0o755)  # a root worker runs bwrap as nobody
    yield lambda how: str(BIN) if how == "missing" else fake_bwrap(fake)
    shutil.rmtree(fake)


def fake_bwrap(fake):
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    return f"{fake}:{os.environ['PATH']}"


@pytest.mark.parametrize("how", ["failing", "missing"])
def test_the_worker_refuses_to_start_without_a_sandbox(s3, tmp_path, unusable_bwrap, how):
    service = Service(tmp_path / "data", s3["env"])
    service.env["PATH"] = unusable_bwrap(how)
    service.start_worker()
    try:
        assert service.processes["worker"].wait(60) == 78
        log = (service.data_dir / "worker.log").read_text()
        assert "the LibreOffice sandbox cannot be made here" in log and "DOCSHIFT_SANDBOX=off" in log
        # in a container, the runtime options it lacks
        assert "seccomp=deploy/container/seccomp.json" in log and "systempaths=unconfined" in log
        assert ("No permissions to create new namespace" if how == "failing" else "bwrap") in log
    finally:
        service.stop()


def test_sandbox_off_runs_and_shows_in_healthz(s3, tmp_path, unusable_bwrap, legacy):
    service = Service(tmp_path / "data", s3["env"], SANDBOX="off")
    service.env["PATH"] = unusable_bwrap("failing")  # not even asked
    try:
        service.start(workers=1)
        checks = requests.get(f"{service.base_url}/healthz", timeout=10).json()["checks"]
        assert checks["sandbox"] == "off" and checks["engine"] == "ok"
        key = service.register("sandbox-off")
        task = service.wait(key, service.submit(key, legacy["doc"]).json()["task_id"])
        assert task["status"] == "SUCCEEDED"
        log = (service.data_dir / "worker.log").read_text()
        assert "DOCSHIFT_SANDBOX=off: LibreOffice runs without its sandbox" in log
        assert "WITHOUT a sandbox" in log
    finally:
        service.stop()


def test_an_engine_that_keeps_failing_makes_healthz_say_so(s3, tmp_path):
    # an address space too small for LibreOffice: every start fails, for real
    service = Service(tmp_path / "data", s3["env"], OFFICE_MEMORY_LIMIT_MB=250)
    try:
        service.start_web()
        service.start_worker(workers=1)

        def broken():
            response = requests.get(f"{service.base_url}/healthz", timeout=5)
            return response.status_code == 503 and response.json()["checks"]["engine"].startswith("failing: ")
        wait_for(broken, 120, "the broken engine report")
        assert "failed 3 starts in a row" in (service.data_dir / "worker.log").read_text()
    finally:
        service.stop()


# nothing left behind ----------------------------------------------------------------------

def garbled_doc(legacy, tmp_path):
    """A .doc whose WordDocument stream is noise: it passes the pre-check and fails in LibreOffice."""
    path = tmp_path / "garbled.doc"
    shutil.copy(legacy["doc"], path)
    with olefile.OleFileIO(str(path), write_mode=True) as ole:
        size = ole.get_size("WordDocument")
        ole.write_stream("WordDocument", os.urandom(size))
    return path


def own_dirs(data_dir):
    return {kind: sorted(p.name for p in (data_dir / kind).iterdir()) for kind in ("work", "office", "tasks")
            if (data_dir / kind).is_dir()}


def test_nothing_is_left_behind(s3, legacy, slow_xls, tmp_path):
    """20 conversions (some failing) leave nothing of LibreOffice's in /tmp (its UNO pipe sockets and lu*.tmp
    dirs), no child's temp dir in the sandbox's /profile/tmp and no task's files in the worker's tasks dir; a
    SIGKILLed worker's job, profile and tasks dirs are gone after a restart. The data dir lives outside /tmp, so
    that only LibreOffice's own names count."""
    outside = Path(tempfile.mkdtemp(prefix="docshift-sandbox-test-", dir="/var/tmp"))
    before = libreoffice_leftovers()
    service = Service(outside / "data", s3["env"])
    try:
        service.start_web()
        service.start_worker(workers=1)
        service.wait_healthy()
        key = service.register("nothing-left")
        files = [legacy["doc"], legacy["xls"], legacy["ppt"]] * 5 + [garbled_doc(legacy, tmp_path)] * 3
        files += [(legacy["xls"], "not-a-doc.doc")] * 2
        task_ids = []
        for item in files:
            path, name = item if isinstance(item, tuple) else (item, None)
            task_ids.append(service.submit(key, path, name=name).json()["task_id"])
        statuses = [service.wait(key, task_id)["status"] for task_id in task_ids]
        assert statuses.count("SUCCEEDED") == 15 and statuses.count("FAILED") == 5, statuses
        assert_nothing_new(before)
        old = service.processes["worker"]
        parent = soffice_pids(old.pid)[0]
        if os.geteuid() == 0:  # the host may look into the sandbox from outside
            wait_for(lambda: ended_children_dirs(parent) == [], 10, "the ended children's temp dirs to go")
        tasks = service.data_dir / "tasks"

        def workspaces():
            return [p.name for d in tasks.iterdir() for p in d.iterdir()]

        # a run's workspace goes once its outcome is recorded, after the client sees it (``convert_task``)
        wait_for(lambda: workspaces() == [], 10, "the runs' workspaces to go")

        slow = service.submit(key, slow_xls).json()["task_id"]
        wait_for(lambda: service.wait_status(key, slow) == "PROCESSING", 60, "the slow task")
        time.sleep(0.5)
        left = own_dirs(service.data_dir)
        assert any(f".{old.pid}." in name for name in left["tasks"]), left  # the kill has something to leave
        os.kill(old.pid, signal.SIGKILL)
        old.wait()
        wait_for(lambda: not soffice_pids(old.pid), 30, "the killed worker's LibreOffice to go")
        service.start_worker(workers=1)
        assert service.wait(key, slow, timeout=180)["status"] == "SUCCEEDED"
        new = service.processes["worker"].pid
        now = own_dirs(service.data_dir)
        assert all(f".{new}." in name for kind in now.values() for name in kind), now
        # the sandbox's job dir (/job) stays empty: the files go to LibreOffice as descriptors
        job_dirs = list((service.data_dir / "work").iterdir())
        assert job_dirs and [p.name for d in job_dirs for p in d.iterdir()] == []
        wait_for(lambda: workspaces() == [], 10, "the slow run's workspace to go")
        assert_nothing_new(before)
    finally:
        service.stop()
        shutil.rmtree(outside, ignore_errors=True)
    assert soffice_pids(new) == []


def assert_nothing_new(before, settle=30):
    """Nothing of LibreOffice's is in /tmp that was not there ``before``. The suite's own test-file maker (a plain
    soffice of another pytest worker, which runs outside any sandbox) holds its pipe and temp dir there while it
    runs and removes them when it ends, so a new name may go within ``settle`` seconds; one that stays fails."""
    deadline = time.monotonic() + settle
    while (new := libreoffice_leftovers() - before) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert new == set()


def libreoffice_leftovers():
    """What LibreOffice leaves in the host's /tmp when it runs there: its UNO pipe sockets
    (OSL_PIPE_<uid>_<name>) and its lu*.tmp dirs."""
    return {name for name in os.listdir("/tmp")
            if name.startswith("OSL_PIPE_") or (name.startswith("lu") and name.endswith(".tmp"))}


def test_a_sandboxed_office_cleans_up_after_itself(tmp_path, legacy):
    """An engine's conversions leave no task's files and no child's temp dir; once closed, nothing of its
    Forkit's dirs (profile seed, job dir, tasks dir) is left."""
    engine = Engine(Forkit(tmp_path / "office", name="tidy"))
    try:
        engine.start()
        for kind in ("doc", "xls", "ppt"):
            with engine.workspace(f"task-{kind}") as work:
                assert engine.convert(legacy[kind], kind, work, 60).path.stat().st_size > 0
        assert list(engine.office.job_dir.iterdir()) == [] and list(engine.office.tasks_dir.iterdir()) == []
        if os.geteuid() == 0:
            parent = soffice_pids(engine.office.process.pid)[0]
            wait_for(lambda: ended_children_dirs(parent) == [], 10, "the ended children's temp dirs to go")
    finally:
        engine.close()
    assert not engine.office.profile.exists() and not engine.office.job_dir.exists()
    # no file of its own anywhere (its tasks dir itself is left, empty, for the next start's clear_leftovers)
    left = [str(p.relative_to(tmp_path)) for p in (tmp_path / "office").rglob("*") if engine.office.own in p.parts
            and not (p == engine.office.tasks_dir and not any(p.iterdir()))]
    assert left == [], left
