"""Idempotency-Key: replays answer with the original task, conflicts are 422, races make one task."""

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import requests
from conftest import input_stored, post_file

from docshift.engine import Engine
from docshift.storage import connection
from docshift.tasks import conversion, maintenance
from docshift.web.context import get_db, get_store


def submit(client, key, data, name, idempotency_key):
    return post_file(client, key, data, name, headers={"Idempotency-Key": idempotency_key})


def test_replay_returns_the_original_task_with_its_current_status(app, client, account, legacy, office):
    data = legacy["doc"].read_bytes()
    first = submit(client, account, data, "a.doc", "retry-me-0001")
    assert first.status_code == 202 and first.get_json()["idempotent_replay"] is False
    assert "Idempotent-Replayed" not in first.headers
    task_id = first.get_json()["task_id"]
    with app.app_context():
        conversion.run_next(get_db(), get_store(), app.config["DOCSHIFT"], Engine(office), maintenance.worker_name())
    again = submit(client, account, data, "a.doc", "retry-me-0001")
    body = again.get_json()
    assert again.status_code == 202 and again.headers["Idempotent-Replayed"] == "true"
    assert body == {"task_id": task_id, "status": "SUCCEEDED", "status_url": first.get_json()["status_url"],
                    "idempotent_replay": True}
    assert again.headers["Location"] == body["status_url"]
    with app.app_context():
        assert get_db()["conversions"].count == 1
        assert not input_stored(get_store(), task_id)  # the replay stored nothing
    usage = client.get("/v1/account/usage", headers={"Authorization": f"Bearer {account}"}).get_json()
    assert usage["included_used"] == 1


def test_same_key_other_bytes_or_name_is_a_conflict(client, account):
    assert submit(client, account, b"one", "a.doc", "conflicting-key").status_code == 202
    for data, name in ((b"two", "a.doc"), (b"one", "b.doc")):
        response = submit(client, account, data, name, "conflicting-key")
        assert response.status_code == 422
        assert response.get_json()["code"] == "idempotency_conflict"


def test_names_that_are_kept_alike_but_were_sent_apart_are_a_conflict(client, account):
    """The name kept is cleaned (its last path component, shortened to 255 characters) and can be one for two names
    sent: a replay compares the name as sent. The same name sent again is still a replay."""
    for number, (first, second) in enumerate((("a" * 300 + "-version1.doc", "a" * 300 + "-version2.doc"),
                                              ("monday/report.doc", "tuesday/report.doc"),
                                              ("report\x01.doc", "report.doc"))):
        key = f"kept-alike-{number}"
        accepted = submit(client, account, b"same bytes", first, key)
        assert accepted.status_code == 202
        assert submit(client, account, b"same bytes", first, key).get_json()["task_id"] == \
            accepted.get_json()["task_id"]
        response = submit(client, account, b"same bytes", second, key)
        assert response.status_code == 422, (first, second)
        assert response.get_json()["code"] == "idempotency_conflict"


def test_a_task_stored_before_the_sent_name_was_kept_still_replays(app, client, account):
    accepted = submit(client, account, b"older row", "older.doc", "older-row-key")
    with app.app_context():
        get_db().execute("UPDATE conversions SET filename_digest = NULL WHERE id = ?",
                         [accepted.get_json()["task_id"]])
        get_db().conn.commit()
    again = submit(client, account, b"older row", "older.doc", "older-row-key")
    assert again.status_code == 202 and again.get_json()["idempotent_replay"] is True
    assert submit(client, account, b"older row", "other.doc", "older-row-key").status_code == 422


def test_keys_are_scoped_to_the_account(app, client, account):
    from conftest import register

    other = register(client, app, "other-account")
    a = submit(client, account, b"same", "a.doc", "shared-key-123").get_json()["task_id"]
    b = submit(client, other, b"same", "a.doc", "shared-key-123").get_json()["task_id"]
    assert a != b


def test_edge_lengths_and_characters_are_accepted(client, account):
    for value in ("12345678", "k" * 128, "!#$%&'()*+,-./:;<=>?@[]^_`{|}~"):
        assert submit(client, account, value.encode(), "a.doc", value).status_code == 202


def test_purged_key_starts_a_new_task(app, client, account):
    first = submit(client, account, b"data", "a.doc", "old-key-0001").get_json()["task_id"]
    with app.app_context():
        maintenance.sweep_once(get_db(), get_store(), app.config["DOCSHIFT"], at=connection.now() + timedelta(hours=23))
    assert submit(client, account, b"data", "a.doc", "old-key-0001").get_json()["task_id"] == first
    with app.app_context():
        maintenance.sweep_once(get_db(), get_store(), app.config["DOCSHIFT"],
                               at=connection.now() + timedelta(hours=24, minutes=1))
    again = submit(client, account, b"data", "a.doc", "old-key-0001").get_json()
    assert again["task_id"] != first and again["idempotent_replay"] is False


def test_concurrent_identical_requests_make_one_task(live, legacy):
    """24 identical submissions at once, across gunicorn's workers: one task, charged once. The losers' constraint
    errors, handled, leave no traceback in the web's log (gevent's hub prints what its thread pool raises)."""
    key = live.register("racing-client")
    data = legacy["xls"].read_bytes()
    web_log = live.data_dir / "web.log"
    logged_before = web_log.stat().st_size

    def post(_):
        return requests.post(f"{live.base_url}/v1/conversions",
                             headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "race-key-42"},
                             files={"file": ("race.xls", data)}, timeout=60)

    with ThreadPoolExecutor(24) as pool:
        responses = list(pool.map(post, range(24)))
    assert [r.status_code for r in responses] == [202] * 24, [r.text for r in responses if r.status_code != 202][:3]
    task_ids = {r.json()["task_id"] for r in responses}
    assert len(task_ids) == 1
    assert sum(not r.json()["idempotent_replay"] for r in responses) == 1
    with open(web_log, "rb") as log:
        log.seek(logged_before)
        logged = log.read()
    assert b"Traceback" not in logged and b"IntegrityError" not in logged, logged[-2000:]
    task = live.wait(key, task_ids.pop())
    assert task["status"] == "SUCCEEDED"
    usage = requests.get(f"{live.base_url}/v1/account/usage", headers={"Authorization": f"Bearer {key}"},
                         timeout=10).json()
    assert (usage["included_used"], usage["overage_used"]) == (1, 0)
    conn = connection.connect(live.config().database)
    assert conn.execute("SELECT count(*) FROM conversions WHERE idempotency_key = 'race-key-42'").fetchone()[0] == 1
    conn.close()
