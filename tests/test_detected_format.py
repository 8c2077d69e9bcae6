"""``detected_format``: LibreOffice's type names as stable short names, stored on the task row (also in
databases made before the column existed) and shown on SUCCEEDED, EXPIRED and unsupported_content tasks."""

import sqlite3

import pytest
from conftest import post_file

from docshift.accounts import billing
from docshift.formats import detected_format
from docshift.storage import connection, tasks
from docshift.web.context import get_db


@pytest.mark.parametrize("type_name,short", [
    ("writer_MS_Word_97", "word-97"),
    ("writer_MS_Word_97_Vorlage", "word-97"),
    ("writer_MS_Word_95", "word-6-95"),
    ("calc_MS_Excel_97_VorlageTemplate", "excel-biff8"),
    ("calc_MS_Excel_95", "excel-biff5"),
    ("calc_MS_Excel_40", "excel-biff2-4"),
    ("impress_MS_PowerPoint_97_Vorlage", "powerpoint-97"),
    ("MS Excel 2007 XML", "ooxml"),
    ("writer_MS_Word_2007_VBA", "ooxml"),
    ("writer8", "opendocument"),
    ("generic_Text", "text"),
    ("writer_Rich_Text_Format", "rtf"),
    ("calc_HTML", "html"),
    ("pdf_Portable_Document_Format", "pdf"),
    ("writer_AbiWord_Document", "abiword-document"),  # no entry: derived from LibreOffice's name
    ("Gnumeric XML", "gnumeric-xml"),
    ("", "unknown"),
])
def test_short_names(type_name, short):
    assert detected_format(type_name) == short


def test_images_are_named_by_their_media_type():
    assert detected_format("png_Portable_Network_Graphic", "image/png") == "image"


def test_an_older_database_gains_the_column(tmp_path):
    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    # the conversions table as the first release made it
    old.execute("CREATE TABLE conversions (id TEXT PRIMARY KEY, account_id TEXT NOT NULL, status TEXT NOT NULL, "
                "source_filename TEXT NOT NULL, source_type TEXT NOT NULL, source_size INTEGER NOT NULL, "
                "source_sha256 TEXT NOT NULL, idempotency_key TEXT, attempts INTEGER NOT NULL DEFAULT 0, "
                "worker TEXT, billing_class TEXT, period_started_at TEXT, result_size INTEGER, error_code TEXT, "
                "error_message TEXT, created_at TEXT NOT NULL, started_at TEXT, finished_at TEXT, "
                "result_expires_at TEXT, input_deleted INTEGER NOT NULL DEFAULT 0)")
    old.execute("INSERT INTO conversions (id, account_id, status, source_filename, source_type, source_size, "
                "source_sha256, created_at) VALUES ('t1', 'a', 'QUEUED', 'a.doc', 'doc', 1, 'x', 'now')")
    old.commit()
    old.close()
    conn = connection.connect(str(path))
    connection.init(conn)
    connection.init(conn)  # twice: idempotent
    assert conn["conversions"].get("t1")["detected_format"] is None


def task(app, client, account, legacy, finish):
    response = post_file(client, account, legacy["doc"].read_bytes(), "a.doc")
    task_id = response.get_json()["task_id"]
    with app.app_context():
        tasks.start_processing(get_db(), task_id)
        finish(get_db(), task_id)
    return client.get(f"/v1/conversions/{task_id}", headers={"Authorization": f"Bearer {account}"}).get_json()


def test_shown_on_succeeded_and_expired(app, client, account, legacy):
    def succeed(conn, task_id):
        tasks.mark_succeeded(conn, task_id, 10, 1800, billing.rule(app.config["DOCSHIFT"].plan_quotas),
                             detected_format="rtf")
    assert task(app, client, account, legacy, succeed)["detected_format"] == "rtf"

    def expire(conn, task_id):
        succeed(conn, task_id)
        tasks.mark_expired(conn, task_id)
    view = task(app, client, account, legacy, expire)
    assert (view["status"], view["detected_format"]) == ("EXPIRED", "rtf")


@pytest.mark.parametrize("code,shown", [("unsupported_content", True), ("conversion_failed", False)])
def test_shown_on_unsupported_content_only_among_failures(app, client, account, legacy, code, shown):
    def failed(conn, task_id):
        tasks.mark_failed(conn, task_id, code, "m", detected_format="pdf")
    view = task(app, client, account, legacy, failed)
    assert ("detected_format" in view) == shown
