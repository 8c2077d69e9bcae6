"""The worker's task code on real SQLite, S3 and LibreOffice: failures sorted into the
documented codes, counting per plan, inputs deleted once final."""

import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import ROOT, input_stored, overridden, post_file, register
from msoffcrypto.format.ooxml import OOXMLFile

from docshift.accounts import keys
from docshift.contract import TaskErrorCode
from docshift.engine import Engine, inventory
from docshift.errors import ConversionFailed
from docshift.storage import accounts, connection, periods, tasks
from docshift.storage.s3 import result_key
from docshift.tasks import conversion, maintenance
from docshift.tasks.leases import RunStore
from docshift.web.context import get_db, get_store


@pytest.fixture
def submit(app, client, account):
    """Submit ``data`` as ``name`` through the API; returns the task id."""
    def submit(data, name, key=account):
        response = post_file(client, key, data, name)
        assert response.status_code == 202, response.get_data(as_text=True)
        return response.get_json()["task_id"]
    return submit


def run(app, office, task_id, engine=None, **config):
    """The worker's step (``run_next``): the fairest waiting task, here the only one, ``task_id``, claimed and
    converted (by ``engine``, else a real one on ``office``); returns the status it came to (None when nothing waits)
    and the task's row."""
    with app.app_context():
        outcome = conversion.run_next(get_db(), get_store(), overridden(app, config), engine or Engine(office),
                                      maintenance.worker_name())
        return outcome, tasks.get_task(get_db(), task_id)


def encrypted_container(path, tmp_path):
    """A password-protected OOXML package: an OLE file with EncryptionInfo + EncryptedPackage."""
    import docx

    plain = tmp_path / "plain.docx"
    docx.Document().save(plain)
    target = tmp_path / path
    with open(plain, "rb") as source, open(target, "wb") as out:
        OOXMLFile(source).encrypt("secret", out)
    return target.read_bytes()


def test_success_deletes_the_input_and_keeps_the_result(office, app, submit, legacy):
    task_id = submit(legacy["doc"].read_bytes(), "letter.doc")
    with app.app_context():
        assert input_stored(get_store(), task_id)
    outcome, task = run(app, office, task_id)
    assert outcome == "SUCCEEDED" and task.status == "SUCCEEDED" and task.billing_class == "INCLUDED"
    with app.app_context():
        assert not input_stored(get_store(), task_id)
        # the upload began while the engine checked the file: what went up is the whole of the checked file
        assert get_store().result_size(task.result_key) == task.result_size > 0
    assert task.input_deleted


class Watched(Engine):
    """The real engine, which notes each run's workspace."""

    def __init__(self, office):
        super().__init__(office)
        self.workspaces = []

    def convert(self, source, kind, workdir, *args, **kwargs):
        self.workspaces.append(Path(workdir))
        return super().convert(source, kind, workdir, *args, **kwargs)


def test_a_runs_workspace_goes_once_its_success_is_recorded_not_on_the_way_to_it(office, app, submit, legacy,
                                                                                 monkeypatch):
    task_id = submit(legacy["doc"].read_bytes(), "letter.doc")
    engine, there = Watched(office), []
    record = conversion.apply_outcome

    def recorded(conn, objects, config, task, outcome):
        there.append([path.is_dir() for path in engine.workspaces])
        return record(conn, objects, config, task, outcome)

    monkeypatch.setattr(conversion, "apply_outcome", recorded)
    outcome, task = run(app, office, task_id, engine)
    assert outcome == "SUCCEEDED" and task.status == "SUCCEEDED"
    assert there == [[True]]  # still there while the success was recorded
    assert not engine.workspaces[0].exists()


class RefusedOnceFinal(Engine):
    """The real engine, whose checks refuse a text's result once it is final, as they refuse one that lost content:
    by then its upload has begun (``ready``)."""

    uploads_begun, pause = 0, 0.5

    def convert(self, *args, ready=None, **kwargs):
        def then_refused(path, extension):
            ready(path, extension)
            self.uploads_begun += 1
            time.sleep(self.pause)  # the upload ends first: what it stored must go again
            raise ConversionFailed(TaskErrorCode.OUTPUT_INVALID, "The converted file failed validation: test.")

        return super().convert(*args, ready=then_refused if ready else None, **kwargs)


def test_a_result_refused_after_its_upload_began_is_removed_from_the_store(office, app, submit, legacy):
    task_id = submit(legacy["doc"].read_bytes(), "letter.doc")
    engine = RefusedOnceFinal(office)
    with app.app_context():
        outcome = conversion.run_next(get_db(), get_store(), app.config["DOCSHIFT"], engine,
                                      maintenance.worker_name())
        task = tasks.get_task(get_db(), task_id)
        store = get_store()
        left = [entry.object_name for entry in store.client.list_objects(store.bucket, prefix=f"results/{task_id}/",
                                                                            recursive=True)]
    assert engine.uploads_begun == 1
    assert (outcome, task.error_code, task.billing_class) == ("FAILED", "output_invalid", None)
    assert left == []


def test_a_refused_result_does_not_wait_out_a_store_outage_for_its_upload(office, own_store, legacy, tmp_path):
    """The store is down when the upload begins and the checks then refuse the result: the upload stops waiting (a
    run's patience with an outage is minutes), and the task fails at once."""
    from docshift.web import create_app

    app = create_app({"TESTING": True, "DATA_DIR": str(tmp_path / "data"), "S3_BUCKET": "refused-in-outage",
                      "S3_ENDPOINT": own_store.config.s3_endpoint, "S3_ACCESS_KEY": own_store.config.s3_access_key,
                      "S3_SECRET_KEY": own_store.config.s3_secret_key})
    with app.app_context():
        get_store().ensure_bucket()
    client = app.test_client()
    key = register(client, app, "refused-in-outage")
    task_id = post_file(client, key, legacy["doc"].read_bytes(), "letter.doc").get_json()["task_id"]
    own_store.stop()  # one box: the upload waits in the spool, on the worker's disk
    engine = RefusedOnceFinal(office)
    engine.pause = 0
    began = time.monotonic()
    with app.app_context():
        assert app.config["DOCSHIFT"].outage_patience_seconds >= 60
        outcome = conversion.run_next(get_db(), get_store(), app.config["DOCSHIFT"], engine,
                                      maintenance.worker_name())
        task = tasks.get_task(get_db(), task_id)
    assert engine.uploads_begun == 1
    assert (outcome, task.error_code) == ("FAILED", "output_invalid")
    assert time.monotonic() - began < 30


class Told(Engine):
    """The real engine, counting how often it told the run that the result file was written whole (``ready``)."""

    told = 0

    def convert(self, *args, ready=None, **kwargs):
        def counted(path, extension):
            self.told += 1
            ready(path, extension)

        return super().convert(*args, ready=counted if ready else None, **kwargs)


def test_a_workbook_whose_stored_values_go_in_after_its_checks_is_stored_with_them(office, app, submit, tmp_path):
    """A call of a VBA function: LibreOffice's export holds #VALUE!, and the value Excel stored goes in after the checks
    have read it. Its upload began before that, and the file goes up again: the store keeps the one with the value."""
    source = ROOT.parent / "shared" / "corpus" / "xls" / "27852.xls"
    task_id = submit(source.read_bytes(), "udf.xls")
    engine = Told(office)
    outcome, task = run(app, office, task_id, engine)
    with app.app_context():
        store = get_store()
        kept = store.client.get_object(store.bucket, task.result_key).read()
    assert outcome == "SUCCEEDED" and engine.told == 2
    (tmp_path / "kept.xlsm").write_bytes(kept)
    cells = inventory.report(inventory.of_source(source, "xls"),
                             inventory.of_result(tmp_path / "kept.xlsm", "xls"))["counts"]["cells"]
    assert len(kept) == task.result_size and cells["result"] == cells["source"]


class SlowFirstPut(RunStore):
    """The run's real store, whose first put of a result reads the file at once and sends it a while later."""

    puts = ended = 0

    def put_result(self, task_id, path, extension):
        self.puts += 1
        if self.puts == 1:
            held = Path(path).with_name("read-at-once")
            held.write_bytes(Path(path).read_bytes())
            time.sleep(0.5)
            path = held
        super().put_result(task_id, path, extension)
        self.ended += 1


def test_an_upload_told_again_puts_the_new_file_after_the_first_put_ends(app, submit, tmp_path):
    task_id = submit(b"\xd0\xcf\x11\xe0" + b"\0" * 100, "letter.doc")
    result = tmp_path / "result.docx"
    result.write_bytes(b"as LibreOffice wrote it")
    with app.app_context():
        task, _ = tasks.claim_next(get_db(), "test")
        objects = SlowFirstPut(get_store(), get_db(), task)
        upload = conversion._Upload(objects, task_id, time.monotonic() + 60)
        upload.start(result, "docx")
        written = tmp_path / "written"
        written.write_bytes(b"with what went in after the checks")
        os.replace(written, result)
        upload.start(result, "docx")
        assert upload.finish()
        assert objects.ended == 2  # no put is left to land after the run has counted its result
        store = get_store()
        kept = store.client.get_object(store.bucket, result_key(task_id, tasks.lease_of(task))).read()
    assert objects.puts == 2 and kept == b"with what went in after the checks"


@pytest.mark.parametrize("name,content", [
    ("random.doc", os.urandom(4096)),
    ("text.xls", b"just,some,csv\n1,2,3\n"),
    ("truncated.ppt", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100),
])
def test_not_a_document(office, app, submit, name, content):
    """LibreOffice's type detection takes these for plain text: refused unloaded, unbilled."""
    outcome, task = run(app, office, submit(content, name))
    assert outcome == "FAILED" and task.error_code == "unsupported_content"
    assert task.detected_format == "text" and task.billing_class is None


def test_rtf_named_doc_converts(office, app, submit):
    outcome, task = run(app, office, submit(b"{\\rtf1\\ansi hello}", "rtf.doc"))
    assert (outcome, task.detected_format) == ("SUCCEEDED", "rtf")


@pytest.mark.parametrize("real,claimed,found", [("doc", "ppt", "word-97"), ("xls", "doc", "excel-biff8"),
                                                ("ppt", "xls", "powerpoint-97")])
def test_wrong_type_for_its_extension(office, app, submit, legacy, real, claimed, found):
    _outcome, task = run(app, office, submit(legacy[real].read_bytes(), f"mislabelled.{claimed}"))
    assert task.status == "FAILED" and task.error_code == "unsupported_content"
    assert task.detected_format == found


def test_encrypted_document(office, app, submit, tmp_path):
    _outcome, task = run(app, office, submit(encrypted_container("locked.docx", tmp_path), "locked.doc"))
    assert task.status == "FAILED" and task.error_code == "encrypted_document"


def test_timeout_fails_the_task(office, app, client, slow_xls, account):
    task_id = post_file(client, account, slow_xls.read_bytes(), "big.xls").get_json()["task_id"]
    _outcome, task = run(app, office, task_id, CONVERSION_TIMEOUT=0.5)
    assert task.status == "FAILED" and task.error_code == "conversion_timeout"
    assert task.billing_class is None


def test_inactive_account_fails_unbilled(office, app, client, submit, legacy, account):
    """Deactivated, an account's waiting tasks fail at once, unbilled: made active again before a worker came to
    them, the account once had them converted and billed."""
    task_id = submit(legacy["xls"].read_bytes(), "numbers.xls")
    with app.app_context():
        conn = get_db()
        account_id = accounts.account_for_key(conn, keys.digest(account))["id"]
        accounts.set_account(conn, account_id, status="inactive")
        task = tasks.get_task(conn, task_id)
        assert (task.status, task.error_code, task.billing_class) == ("FAILED", "subscription_inactive", None)
        accounts.set_account(conn, account_id, status="active")
    outcome, task = run(app, office, task_id)
    assert outcome is None  # nothing waits
    assert (task.status, task.error_code, task.billing_class) == ("FAILED", "subscription_inactive", None)
    with app.app_context():
        maintenance.sweep_once(get_db(), get_store(), app.config["DOCSHIFT"])
        assert not input_stored(get_store(), task_id)


def test_successes_beyond_the_quota_are_overage(office, app, client, legacy):
    app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], plan_quotas={**app.config["DOCSHIFT"].plan_quotas,
                                                                          "starter": 2})
    key = register(client, app, "tiny-quota")
    data = legacy["xls"].read_bytes()
    classes = []
    for _ in range(3):
        response = post_file(client, key, data, "n.xls")
        classes.append(run(app, office, response.get_json()["task_id"])[1].billing_class)
    failed = post_file(client, key, b"nonsense", "n.xls").get_json()["task_id"]
    assert run(app, office, failed)[1].status == "FAILED"
    assert classes == ["INCLUDED", "INCLUDED", "OVERAGE"]
    usage = client.get("/v1/account/usage", headers={"Authorization": f"Bearer {key}"}).get_json()
    assert (usage["included_quota"], usage["included_used"], usage["remaining"], usage["overage_used"]) \
        == (2, 2, 0, 1)


def test_running_a_task_twice_converts_and_counts_once(office, app, client, submit, legacy, account):
    task_id = submit(legacy["doc"].read_bytes(), "letter.doc")
    assert run(app, office, task_id)[0] == "SUCCEEDED"
    assert run(app, office, task_id)[0] is None
    usage = client.get("/v1/account/usage", headers={"Authorization": f"Bearer {account}"}).get_json()
    assert usage["included_used"] == 1


def test_failed_task_view(office, app, client, submit, account):
    task_id = submit(b"not office", "x.ppt")
    run(app, office, task_id)
    body = client.get(f"/v1/conversions/{task_id}", headers={"Authorization": f"Bearer {account}"}).get_json()
    assert body["status"] == "FAILED"
    assert body["error"]["code"] == "unsupported_content" and body["error"]["message"]
    assert "download_url" not in body and "billing_class" not in body


def test_a_workers_threads_share_one_libreoffice_parent_and_the_last_to_stop_closes_it(app):
    """The worker threads of a process share one engine (one LibreOffice parent, a child per file), started by
    the first thread and closed by the last to stop, never under another thread's conversion."""
    from docshift.tasks.shared import Conversions

    worker = Conversions(app.config["DOCSHIFT"], on_change=lambda: None)
    engines = []

    def run():
        worker.thread_started()
        engines.append(worker.engine())

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first, second = engines
    assert first is second and first.office.running
    parent = first.office.process.pid
    worker.thread_stopping()
    assert first.office.running and first.office.process.pid == parent, "one thread stopped: the other's stays"
    worker.thread_stopping()
    assert not first.office.running, "the last thread to stop closes it"


def test_an_account_deactivated_while_its_file_converts_is_not_billed(office, app, submit, legacy, account):
    """The file converts; its account goes inactive before the success is recorded. Its customer can no longer
    fetch the result, nor see the task: the task ends FAILED subscription_inactive, as its waiting ones do, nothing
    is counted, and neither the result nor the input stays in the store."""
    task_id = submit(legacy["doc"].read_bytes(), "letter.doc")
    with app.app_context():
        account_id = accounts.account_for_key(get_db(), keys.digest(account))["id"]

    class DeactivatedMeanwhile(Engine):
        def convert(self, *args, **kwargs):
            converted = super().convert(*args, **kwargs)
            with app.app_context():  # as `flask marketplace deactivate` would, from another process
                accounts.set_account(get_db(), account_id, status="inactive")
            return converted

    outcome, task = run(app, office, task_id, engine=DeactivatedMeanwhile(office))
    assert outcome == "FAILED"
    assert (task.status, task.error_code, task.billing_class) == ("FAILED", "subscription_inactive", None)
    with app.app_context():
        conn = get_db()
        with connection.transaction(conn):
            row = accounts.account_for_key(conn, keys.digest(account))
            period = periods.current_period(conn, row, connection.now())
        assert (period["included_used"], period["overage_used"]) == (0, 0)
        assert get_store().result_size(result_key(task_id, tasks.lease_of(task))) is None
        assert not input_stored(get_store(), task_id)
