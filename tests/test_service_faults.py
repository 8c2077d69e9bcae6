"""Faults that are the service's, not the file's, and the reverse.

A task whose stored input is gone ends FAILED ``input_missing`` at once, unbilled, never
requeued."""

import requests
from conftest import Service

from docshift.storage import db


def usage(service, key):
    return requests.get(f"{service.base_url}/v1/account/usage", headers={"Authorization": f"Bearer {key}"},
                        timeout=10).json()


def row(service, task_id):
    return db.get_task(db.connect(service.config()["DATABASE"]), task_id)


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
        assert not store.input_exists(task_id)
        service.start_worker(workers=1)
        task = service.wait(key, task_id, timeout=60)
        assert task["status"] == "FAILED" and task["error"]["code"] == "input_missing"
        assert task["error"]["message"] and "billing_class" not in task
        stored = row(service, task_id)
        assert stored["attempts"] == 1 and stored["billing_class"] is None  # tried once, not requeued
        assert usage(service, key)["included_used"] == 0
    finally:
        service.stop()
