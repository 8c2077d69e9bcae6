"""/healthz reports each part: database, object store, worker heartbeat."""

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
