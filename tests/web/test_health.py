"""/healthz reports each part: database, object store, worker heartbeat."""

import json
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace

import requests
from conftest import ROOT


def test_healthy_live_service(live):
    response = requests.get(f"{live.base_url}/healthz", timeout=5)
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": "ok", "worker": "ok", "engine": "ok", "sandbox": "ok",
                                         "disk": "ok", "object_store": "ok"}


def test_store_down_and_no_worker(app, client):
    from docshift.storage.s3 import ObjectStore

    app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], s3_endpoint="127.0.0.1:9")
    store = ObjectStore(app.config["DOCSHIFT"])
    app.extensions["docshift.store"] = store
    response = client.get("/healthz")
    assert response.status_code == 503
    checks = response.get_json()["checks"]
    assert checks["database"] == "ok"
    assert checks["object_store"].startswith("error")
    assert checks["worker"] == "no recent heartbeat"
    assert checks["engine"] == "no report" and checks["sandbox"] == "unknown"


def test_a_stopped_worker_takes_its_report_with_it(s3, tmp_path):
    """A worker run with DOCSHIFT_SANDBOX=off, then stopped (to start it again with its sandbox): /healthz says at
    once that no worker reports, not "sandbox off" and "engine ok" for the silence that follows."""
    from conftest import Service, stop_process_group

    service = Service(tmp_path / "svc", s3["env"], SANDBOX="off")
    try:
        service.start(workers=1)
        checks = requests.get(f"{service.base_url}/healthz", timeout=5).json()["checks"]
        assert (checks["engine"], checks["sandbox"]) == ("ok", "off")
        stop_process_group(service.processes.pop("worker"))
        response = requests.get(f"{service.base_url}/healthz", timeout=5)
        checks = response.json()["checks"]
        assert (checks["engine"], checks["sandbox"]) == ("no report", "unknown") and response.status_code == 503
    finally:
        service.stop()


def test_a_store_that_hangs_is_reported_to_the_requests_that_do_not_wait(app, monkeypatch):
    """The store accepts connections and never answers (weed stopped by SIGSTOP). One request from beyond
    loopback reads the checks and waits on the store's ping, for minutes with its client's retries; the others
    took the last checks, "ok", for as long. Once the ping has taken HEALTH_STALLED, they get 503 and why."""
    import docshift.web as web
    from docshift.storage.s3 import ObjectStore

    monkeypatch.setattr(web, "HEALTH_READ_EVERY", 0.0)
    monkeypatch.setattr(web, "HEALTH_STALLED", 0.5)
    app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], metrics_token="health-token")
    outside = {"environ_base": {"REMOTE_ADDR": "203.0.113.5"}, "headers": {"Authorization": "Bearer health-token"}}
    first = app.test_client().get("/healthz", **outside)
    assert first.get_json()["checks"]["object_store"] == "ok"

    with socket.socket() as silent:  # a store that takes connections and says nothing
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], s3_endpoint=f"127.0.0.1:{silent.getsockname()[1]}")
        app.extensions["docshift.store"] = ObjectStore(app.config["DOCSHIFT"])
        waiting = threading.Thread(target=lambda: app.test_client().get("/healthz", **outside), daemon=True)
        waiting.start()
        time.sleep(1.0)
        answer = app.test_client().get("/healthz", **outside)
        assert answer.status_code == 503
        assert answer.get_json()["checks"]["object_store"].startswith("not answering for ")
    waiting.join(120)  # the listener closed: the ping ends in an error
    assert not waiting.is_alive()


def test_a_store_that_hangs_is_reported_on_loopback_within_seconds(app):
    """A request on loopback reads the checks itself: with the store stopped mid-answer it waited for the store's
    read timeout and retries (no answer in 150 s). The store's ping now gives up after a few seconds."""
    from docshift.storage.s3 import ObjectStore

    with socket.socket() as silent:  # a store that takes connections and says nothing
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], s3_endpoint=f"127.0.0.1:{silent.getsockname()[1]}")
        app.extensions["docshift.store"] = ObjectStore(app.config["DOCSHIFT"])
        started = time.monotonic()
        answer = app.test_client().get("/healthz")
        took = time.monotonic() - started
    assert answer.status_code == 503 and answer.get_json()["checks"]["object_store"].startswith("error")
    assert took < 10, took


SPOOL_FULL = """
import io, json, os, sys
sys.path.insert(0, "tests")
from conftest import register
from docshift.web import create_app

data, elsewhere, source = sys.argv[1:]
app = create_app({"TESTING": True, "DATA_DIR": data, "DATABASE": elsewhere + "/docshift.db",
                  "QUEUE_DATABASE": elsewhere + "/queue.db"})
client = app.test_client()
key = register(client, app, "full-disk")
filler = os.open(data + "/filler", os.O_WRONLY | os.O_CREAT)  # the data dir's disk, full
try:
    while True:
        os.write(filler, bytes(1 << 16))
except OSError:
    os.close(filler)
with open(source, "rb") as f:
    answer = client.post("/v1/conversions", headers={"Authorization": f"Bearer {key}"},
                         data={"file": (io.BytesIO(f.read()), "report.doc")})
print(json.dumps({"status": answer.status_code, "problem": answer.get_json(),
                  "retry": answer.headers.get("Retry-After"),
                  "disk": client.get("/healthz").get_json()["checks"]["disk"]}))
"""


def test_a_full_data_disk_is_named_as_such_and_keeps_nothing(tmp_path, legacy):
    """The disk of the data dir, where one box keeps uploads until their run, is full (a tmpfs filled, in a
    mount namespace of the test's own; the database elsewhere): the submission is a 503 that says the service
    has no room, not that the object store does not answer, no task is made, and /healthz names the disk."""
    data, elsewhere = tmp_path / "data", tmp_path / "db"
    data.mkdir()
    elsewhere.mkdir()
    script = 'mount -t tmpfs -o size=8m tmpfs "$1" && exec "$4" -c "$5" "$1" "$2" "$3"'
    run = subprocess.run(["unshare", "--mount", "sh", "-c", script, "sh", str(data), str(elsewhere),
                          str(legacy["doc"]), sys.executable, SPOOL_FULL], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.splitlines()[-1])
    assert seen["status"] == 503 and seen["retry"] == "30"
    assert seen["problem"]["detail"] == "The service has no room to keep this file right now; retry later."
    assert seen["disk"] == "the disk of the data directory is full (0 MiB free)"
    with sqlite3.connect(elsewhere / "docshift.db") as db:
        assert db.execute("SELECT count(*) FROM conversions").fetchone() == (0,)
