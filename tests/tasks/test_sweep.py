"""The worker's minute sweep: results expire, leftover inputs go, stuck tasks come back."""

import time
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import requests
from conftest import input_stored, overridden, post_file

from docshift.engine import Engine
from docshift.storage import connection, tasks
from docshift.tasks import conversion, maintenance
from docshift.web.context import get_db, get_store


def submit_and_run(app, office, client, key, data, name, **config):
    task_id = post_file(client, key, data, name).get_json()["task_id"]
    with app.app_context():
        conversion.run_next(get_db(), get_store(), overridden(app, config), Engine(office), maintenance.worker_name())
    return task_id


def sweep(app, at=None):
    with app.app_context():
        maintenance.sweep_once(get_db(), get_store(), app.config["DOCSHIFT"], at)


def test_result_expires_and_its_link_dies(office, app, client, account, legacy):
    task_id = submit_and_run(app, office, client, account, legacy["doc"].read_bytes(), "letter.doc",
                             RESULT_RETENTION_SECONDS=2)
    auth = {"Authorization": f"Bearer {account}"}
    link = client.get(f"/v1/conversions/{task_id}", headers=auth).get_json()["download_url"]
    assert requests.get(link, timeout=10).status_code == 200
    time.sleep(2.1)
    # past its retention the task is EXPIRED at once, before any sweep has run
    body = client.get(f"/v1/conversions/{task_id}", headers=auth).get_json()
    assert body["status"] == "EXPIRED" and "download_url" not in body
    with app.app_context():
        assert tasks.get_task(get_db(), task_id).status == "SUCCEEDED"
    sweep(app)
    body = client.get(f"/v1/conversions/{task_id}", headers=auth).get_json()
    assert body["status"] == "EXPIRED" and "download_url" not in body
    assert body["result_expires_at"] <= connection.iso(connection.now())
    assert requests.get(link, timeout=10).status_code == 403  # the link expired with the result
    with app.app_context():
        assert get_store().result_size(tasks.get_task(get_db(), task_id).result_key) is None


def test_a_link_lives_no_longer_than_its_result(office, app, client, account, legacy):
    """A link handed out shortly before the result expires is signed only for the time left,
    and the store refuses it from then on, though no sweep has deleted the object yet."""
    task_id = submit_and_run(app, office, client, account, legacy["xls"].read_bytes(), "late.xls",
                             RESULT_RETENTION_SECONDS=6)
    body = client.get(f"/v1/conversions/{task_id}", headers={"Authorization": f"Bearer {account}"}).get_json()
    assert body["status"] == "SUCCEEDED"
    query = parse_qs(urlsplit(body["download_url"]).query)
    signed_at = datetime.strptime(query["X-Amz-Date"][0], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    expires_at = connection.parse(body["result_expires_at"])
    # the time left, to the second the link is signed to: never past the result
    left = int((expires_at - signed_at).total_seconds())
    assert body["download_expires_in"] == int(query["X-Amz-Expires"][0]) == left
    assert 0 < body["download_expires_in"] < app.config["DOCSHIFT"].download_expires_in
    assert requests.get(body["download_url"], timeout=10).status_code == 200
    time.sleep(max(0.0, (expires_at - connection.now()).total_seconds()) + 0.5)
    refused = requests.get(body["download_url"], timeout=10)
    assert refused.status_code == 403 and b"expired" in refused.content
    with app.app_context():
        assert get_store().result_size(tasks.get_task(get_db(), task_id).result_key) is not None


def test_retained_result_is_left_alone(office, app, client, account, legacy):
    task_id = submit_and_run(app, office, client, account, legacy["xls"].read_bytes(), "n.xls")
    sweep(app)
    with app.app_context():
        task = tasks.get_task(get_db(), task_id)
        assert task.status == "SUCCEEDED" and get_store().result_size(task.result_key) is not None


def test_dead_worker_task_is_requeued_then_failed(app, client, account):
    task_id = post_file(client, account, b"whatever", "x.doc").get_json()["task_id"]
    with app.app_context():
        conn = get_db()
        for attempt in range(1, 4):
            assert tasks.start_processing(conn, task_id) is not None  # a worker claims it, then dies
            later = connection.now() + timedelta(seconds=conversion.max_run_seconds(app.config["DOCSHIFT"]) + 1)
            maintenance.sweep_once(conn, get_store(), app.config["DOCSHIFT"], at=later)
            task = tasks.get_task(conn, task_id)
            if attempt < 3:
                assert task.status == "QUEUED" and task.attempts == attempt
        assert task.status == "FAILED" and task.error_code == "conversion_failed"
        assert not input_stored(get_store(), task_id)


def test_sweep_beats_the_heartbeat(app, client):
    assert client.get("/healthz").get_json()["checks"]["worker"] == "no recent heartbeat"
    sweep(app)
    assert client.get("/healthz").get_json()["checks"]["worker"] == "ok"
