"""/healthz reports each part: database, object store, worker heartbeat."""

import socket
import threading
import time
from dataclasses import replace

import requests


def test_healthy_live_service(live):
    response = requests.get(f"{live.base_url}/healthz", timeout=5)
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": "ok", "worker": "ok", "engine": "ok", "sandbox": "ok",
                                         "object_store": "ok"}


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
