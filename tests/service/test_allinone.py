"""``python -m docshift.allinone``, the container image's default command: web, worker and objects
in one process tree; SIGTERM drains them in order, and one that exits stops the others."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests
import sqlite_utils
from conftest import BIN, ROOT, free_port_block, stop_process_group, wait_for

from docshift import allinone as allinone_module
from docshift import settings
from docshift.accounts import marketplace


def allinone(cwd, env, *names, log_dir=None, ignore=()):
    """Started in ``cwd`` (its Procfile), its output in ``allinone.log`` of ``log_dir`` (``cwd``), with the
    signals ``ignore`` ignored on entry."""

    def ignoring():
        for number in ignore:
            signal.signal(number, signal.SIG_IGN)

    with open(Path(log_dir or cwd) / "allinone.log", "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "docshift.allinone", *names], cwd=cwd, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=ignoring)


def children(pid):
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def stop(process):
    """Each process runs in a group of its own: a test that fails leaves none of them behind."""
    for pid in children(process.pid):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    stop_process_group(process)


def running(tmp_path, **settings_env):
    """The real web, worker and object store under allinone, healthy: (process, base URL, an API key, data dir)."""
    data = tmp_path / "data"
    port, s3_port = free_port_block(), free_port_block((0, 1, 2, 3, 4, 10000, 10001, 10002, 10003, 10004))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCSHIFT_")}
    env.update(PATH=f"{BIN}:{env['PATH']}", DOCSHIFT_DATA_DIR=str(data), DOCSHIFT_PORT=str(port),
               DOCSHIFT_S3_PORT=str(s3_port), DOCSHIFT_WORKERS="1",
               **{f"DOCSHIFT_{name}": value for name, value in settings_env.items()})
    process = allinone(ROOT, env, log_dir=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: requests.get(f"{base}/healthz", timeout=2).status_code == 200, 120, "all in one")
        config = settings.load({"DATA_DIR": str(data), "S3_ENDPOINT": None, "S3_ACCESS_KEY": None,
                                "S3_SECRET_KEY": None, "S3_PORT": s3_port})
        token = marketplace.LocalMarketplace(config).issue_token("allinone", "starter")
        key = requests.post(f"{base}/marketplace/register", data={"x-amzn-marketplace-token": token},
                            headers={"Accept": "application/json"}, timeout=10).json()["api_key"]
    except BaseException:
        stop(process)
        raise
    return process, base, key, data


def test_sigterm_drains_a_running_conversion_and_stops_the_store_last(tmp_path, slow_xls):
    # a worker that finds the store gone gives the task back at once: QUEUED, not SUCCEEDED
    process, base, key, data = running(tmp_path, OUTAGE_PATIENCE_SECONDS="3")
    try:
        with open(slow_xls, "rb") as f:
            task_id = requests.post(f"{base}/v1/conversions", headers={"Authorization": f"Bearer {key}"},
                                    files={"file": ("big.xls", f)}, timeout=30).json()["task_id"]
        tasks = sqlite_utils.Database(data / "docshift.db")["conversions"]
        wait_for(lambda: tasks.get(task_id)["status"] == "PROCESSING", 60, "the conversion")
        started = children(process.pid)
        assert len(started) == 3

        process.send_signal(signal.SIGTERM)
        assert process.wait(180) == 0
        assert tasks.get(task_id)["status"] == "SUCCEEDED"
        assert [pid for pid in started if Path(f"/proc/{pid}").exists()] == []
    finally:
        stop(process)


def test_a_killed_object_store_is_started_again_and_the_api_stays_up(tmp_path, legacy):
    """SIGKILL to weed (as the OOM killer sends it): allinone starts the store again, the web and the worker run on,
    and a file sent after it converts. Stopping them all instead kept the API down for minutes, while the worker
    waited out its patience for a store nothing started again."""
    process, base, key, _ = running(tmp_path)
    try:
        (objects,) = [pid for pid in children(process.pid) if b"seaweed" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        weed = [pid for pid in descendants(objects) if Path(f"/proc/{pid}/comm").read_text().strip() == "weed"]
        assert weed, "no weed under the object store's launcher"
        os.kill(weed[0], signal.SIGKILL)
        wait_for(lambda: "objects was killed (SIGKILL); starting it again" in
                 (tmp_path / "allinone.log").read_text(), 30, "the store started again")
        assert process.poll() is None
        assert requests.get(f"{base}/v1/account/usage", headers={"Authorization": f"Bearer {key}"},
                            timeout=10).status_code == 200
        answer = requests.post(f"{base}/v1/conversions", headers={"Authorization": f"Bearer {key}"},
                               files={"file": ("after.doc", legacy["doc"].read_bytes())}, timeout=30)
        assert answer.status_code == 202, answer.text
        task_url = answer.json()["status_url"]

        def finished():
            return requests.get(task_url, headers={"Authorization": f"Bearer {key}"}, timeout=10).json()["status"] \
                in ("SUCCEEDED", "FAILED")

        wait_for(finished, 120, "the file sent after the kill")
        task = requests.get(task_url, headers={"Authorization": f"Bearer {key}"}, timeout=10).json()
        assert task["status"] == "SUCCEEDED", task
        assert requests.get(task["download_url"], timeout=10).status_code == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(120) == 0
    finally:
        stop(process)


def descendants(pid):
    found = children(pid)
    return found + [grandchild for child in found for grandchild in descendants(child)]


def fake_procfile(cwd, **commands):
    (cwd / "Procfile").write_text("".join(f"{name}: sh -c {command!r}\n" for name, command in commands.items()))


def drained_once_three_are_ready(process, cwd):
    """SIGTERM once the three fake processes wrote ``ready``; allinone must then exit 0."""
    ready = cwd / "ready"
    try:
        wait_for(lambda: ready.exists() and len(ready.read_text().split()) == 3, 10, "three processes")
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    finally:
        stop(process)


# each process notes the signal that stopped it in ``stops``, after the time it takes to stop
WAITS = "while :; do sleep 0.1; done"


@pytest.mark.parametrize("ignored", [False, True], ids=["", "started-with-sigint-ignored"])
def test_the_worker_gets_sigint_and_the_store_stops_after_it(tmp_path, ignored):
    """Also when started with SIGINT and SIGQUIT ignored, as from a background shell: its children still
    get a SIGINT they can act on."""
    # each says it is ready once its trap is set: a signal before that would only test the shell's start
    fake_procfile(tmp_path,
                  web=f"trap 'echo web TERM >> stops; exit 0' TERM; echo web >> ready; {WAITS}",
                  worker=f"trap 'sleep 1; echo worker INT >> stops; exit 0' INT; echo worker >> ready; {WAITS}",
                  objects=f"trap 'echo objects TERM >> stops; exit 0' TERM; echo objects >> ready; {WAITS}")
    process = allinone(tmp_path, os.environ, ignore=(signal.SIGINT, signal.SIGQUIT) if ignored else ())
    drained_once_three_are_ready(process, tmp_path)
    stops = (tmp_path / "stops").read_text().splitlines()
    assert sorted(stops[:2]) == ["web TERM", "worker INT"] and stops[2] == "objects TERM"


def test_a_process_that_exits_stops_the_others_with_its_status(tmp_path):
    fake_procfile(tmp_path, web=f"trap 'exit 0' TERM; {WAITS}", worker="sleep 0.5; exit 78",
                  objects=f"trap 'exit 0' TERM; {WAITS}")
    process = allinone(tmp_path, os.environ)
    try:
        assert process.wait(30) == 78
    finally:
        stop(process)
    assert "worker exited with status 78; stopping the others" in (tmp_path / "allinone.log").read_text()


def test_a_killed_process_is_started_again_and_one_killed_too_often_stops_the_others(tmp_path):
    """The object store kills itself on its first start: it is started again and the three stop in order as usual.
    A worker killed on every start is started again RESTARTS times, and its next death stops the others."""
    fake_procfile(tmp_path, web=f"trap 'echo web TERM >> stops; exit 0' TERM; echo web >> ready; {WAITS}",
                  worker=f"trap 'echo worker INT >> stops; exit 0' INT; echo worker >> ready; {WAITS}",
                  objects="if [ ! -e killed ]; then touch killed; kill -KILL $$; fi; "
                          f"trap 'echo objects TERM >> stops; exit 0' TERM; echo objects >> ready; {WAITS}")
    process = allinone(tmp_path, os.environ)
    drained_once_three_are_ready(process, tmp_path)
    assert "objects was killed (SIGKILL); starting it again" in (tmp_path / "allinone.log").read_text()
    assert (tmp_path / "stops").read_text().splitlines()[2] == "objects TERM"

    again = tmp_path / "again"
    again.mkdir()
    fake_procfile(again, web=f"trap 'exit 0' TERM; {WAITS}", worker="echo started >> starts; kill -KILL $$",
                  objects=f"trap 'exit 0' TERM; {WAITS}")
    process = allinone(again, os.environ)
    try:
        assert process.wait(30) == 128 + signal.SIGKILL  # 137, as a shell or a container runtime reports it
    finally:
        stop(process)
    assert len((again / "starts").read_text().split()) == allinone_module.RESTARTS + 1
    assert "worker exited with status -9; stopping the others" in (again / "allinone.log").read_text()


def test_only_procfile_processes(tmp_path):
    fake_procfile(tmp_path, web="true")
    process = allinone(tmp_path, os.environ, "web", "scheduler")
    assert process.wait(10) == 1
    assert "not in the Procfile: scheduler" in (tmp_path / "allinone.log").read_text()
