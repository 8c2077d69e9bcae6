"""A document's password (``Document-Password``) through the real service, gunicorn and the huey worker, and
through conversion nodes on a real Redis: the file converts with it, and the password is in clear in none of
the SQLite files, the logs, the object store's files, nor anything sent to Redis."""

import io
import secrets
import subprocess
import threading
from pathlib import Path

import msoffcrypto
import pytest
import redis
import requests
from conftest import ROOT, Cluster

from docshift.engine.forkit import UNO_PYTHON

# saves a .doc and an .xls with the password given, in a LibreOfficeKit of its own, as tests/make_variants.py does
MAKE = """
import os, sys
from pathlib import Path
sys.path[:0] = [sys.argv[1] + "/docshift/engine/uno", sys.argv[1] + "/tests"]
import make_variants
out, password, profile = Path(sys.argv[2]), sys.argv[3], sys.argv[4]
office = make_variants.start_office(profile)  # the profile is pytest's: LibreOfficeKit writes in it till os._exit
make_variants.save(make_variants.writer(office), out / "locked.doc", "MS Word 97", Password=password)
make_variants.save(make_variants.calc(office), out / "locked.xls", "MS Excel 97", Password=password)
os._exit(0)  # LibreOfficeKit's threads hold the process otherwise
"""


@pytest.fixture(scope="module")
def locked(tmp_path_factory):
    """``(password, {"doc": path, "xls": path})``: files LibreOffice saved with a password no other file holds,
    longer than the 15 characters Office 97-2003 (and LibreOffice) keep of one: the whole opens them."""
    password = f"pw-{secrets.token_hex(8)}-ü"
    out = tmp_path_factory.mktemp("locked")
    profile = tmp_path_factory.mktemp("locked-profile")
    subprocess.run([UNO_PYTHON, "-c", MAKE, str(ROOT), str(out), password, str(profile)], capture_output=True,
                   timeout=180, start_new_session=True)
    files = {"doc": out / "locked.doc", "xls": out / "locked.xls"}
    assert all(path.exists() for path in files.values())
    return password, files


def header(password):
    """The header's value as requests sends it: the password's UTF-8 bytes."""
    return password.encode()


def found_in(root, password):
    """The files under ``root`` whose bytes hold the password, in UTF-8 or UTF-16 (the form key derivation takes)."""
    forms = [password.encode(), password.encode("utf-16-le")]
    return [str(path) for path in Path(root).rglob("*")
            if path.is_file() and any(form in path.read_bytes() for form in forms)]


def opens_only_with(data, password):
    office = msoffcrypto.OfficeFile(io.BytesIO(data))
    assert office.is_encrypted()
    office.load_key(password=password, verify_password=True)


def test_the_password_is_in_no_database_log_or_stored_object(live, locked, s3):
    password, files = locked
    key = live.register("password-secrecy")
    for kind, path in files.items():
        submitted = live.submit(key, path, **{"Document-Password": header(password),
                                              "Idempotency-Key": f"secrecy-{kind}-{secrets.token_hex(4)}"})
        assert submitted.status_code == 202, submitted.text
        task = live.wait(key, submitted.json()["task_id"])
        assert task["status"] == "SUCCEEDED", task
        opens_only_with(requests.get(task["download_url"], timeout=30).content, password)
    # Word 97-2003 keeps 15 characters of a password (so did LibreOffice saving these): the start differs here
    wrong = live.submit(key, files["doc"], **{"Document-Password": header("x" + password)})
    assert live.wait(key, wrong.json()["task_id"])["error"]["code"] == "wrong_password"
    databases = list(Path(live.data_dir).glob("*.db*"))
    assert any(p.name == "docshift.db" for p in databases) and any(p.name.startswith("queue.db") for p in databases)
    assert any(p.suffix == ".log" for p in Path(live.data_dir).iterdir())
    assert found_in(live.data_dir, password) == []
    assert found_in(s3["data_dir"], password) == []


@pytest.fixture
def cluster(s3, tmp_path, redis_url):
    cluster = Cluster(tmp_path, s3["env"], redis_url).start()
    yield cluster
    cluster.stop()


def test_a_node_converts_with_the_password_and_redis_never_sees_it(cluster, locked, redis_url):
    """Every command sent to Redis while a node converts the file (MONITOR): the job that carries the password
    is sealed with the queue key."""
    password, files = locked
    seen = []
    monitor = redis.Redis.from_url(cluster.queue_url).monitor()
    connection = monitor.__enter__()
    stop = threading.Event()

    def watch():
        for command in connection.listen():
            seen.append(command["command"])
            if stop.is_set():
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        cluster.start_node("node-a")
        key = cluster.coordinator.register("node-password")
        submitted = cluster.coordinator.submit(key, files["xls"], **{"Document-Password": header(password)})
        task = cluster.coordinator.wait(key, submitted.json()["task_id"], timeout=180)
        assert task["status"] == "SUCCEEDED", task
        opens_only_with(requests.get(task["download_url"], timeout=30).content, password)
    finally:
        stop.set()
        cluster.redis.ping()  # one more command, for the watcher to see the stop
        watcher.join(timeout=10)
    # the job went through Redis (huey's queue of docshift-jobs)
    assert any(command.startswith(("LPUSH", "RPUSH")) and "docshiftjobs" in command for command in seen)
    # MONITOR shows bytes beyond ASCII escaped: the password's ASCII part is what would show
    core = password.encode("ascii", "ignore").decode().rstrip("-")
    assert len(core) > 10 and not [command for command in seen if core in command]
    assert found_in(cluster.tmp_path, password) == []
