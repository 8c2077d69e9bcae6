"""A run whose lease was taken back (given up on as stuck) goes on converting; when it finishes, it
neither overwrites the result of the run that holds the task now nor recreates an expired one. Real
SQLite, SeaweedFS and two LibreOffice parents on one box."""

import threading
from datetime import timedelta

import pytest
import requests
from conftest import post_file, wait_for

from docshift.engine import Engine
from docshift.engine.forkit import Forkit
from docshift.storage import ObjectStore, connection, tasks
from docshift.tasks import conversion, maintenance
from docshift.web.context import get_db, get_store


@pytest.mark.parametrize("then", ["current", "expired"])
def test_a_stale_run_leaves_the_result_alone(then, app, client, account, office, tmp_path, slow_xls, legacy):
    task_id = post_file(client, account, slow_xls.read_bytes(), "big.xls").get_json()["task_id"]
    config = app.config["DOCSHIFT"]
    stale_office = Forkit(tmp_path / "stale", name="stale")
    finished = {}

    def stale_run():
        conn = connection.connect(config.database)
        # the worker's step: the only waiting task is this one
        finished["outcome"] = conversion.run_next(conn, ObjectStore(config), config, Engine(stale_office),
                                                  "stale-host:1")

    stale = threading.Thread(target=stale_run)
    try:
        stale_office.start()
        stale.start()
        # it has the big workbook and converts it: now it is given up on
        # (the session's ``office`` is running already: nothing starts in the window where the stale run must
        # still be converting)
        wait_for(lambda: any(path.is_file() and path.stat().st_size == slow_xls.stat().st_size
                             for path in stale_office.tasks_dir.rglob("*")), 60, "the stale run's input")
        with app.app_context():
            conn, store = get_db(), get_store()
            assert tasks.requeue(conn, task_id, ("stale-host:1", 1))
            # the input changes under it (a small workbook), so that the two results are told apart
            store.put_input(task_id, legacy["xls"].read_bytes())
            assert conversion.run_next(conn, store, config, Engine(office), "current-host:2") == "SUCCEEDED"
            if then == "expired":
                maintenance.sweep_once(conn, store, config, at=connection.now() + timedelta(days=1))
                assert tasks.get_task(conn, task_id).status == "EXPIRED"
        assert stale.is_alive(), "the stale run should still be converting the big workbook"
        stale.join(180)
    finally:
        stale_office.close()
    assert finished["outcome"] is None  # nothing of the stale run was applied
    with app.app_context():
        store, task = get_store(), tasks.get_task(get_db(), task_id)
        stored = {item.object_name: item.size for item in
                  store.client.list_objects(store.bucket, prefix=f"results/{task_id}", recursive=True)}
    if then == "expired":
        assert stored == {}
    else:
        assert list(stored.values()) == [task.result_size]
        body = client.get(f"/v1/conversions/{task_id}", headers={"Authorization": f"Bearer {account}"}).get_json()
        assert len(requests.get(body["download_url"], timeout=10).content) == task.result_size
