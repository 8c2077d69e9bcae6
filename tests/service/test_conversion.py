"""A .doc, .xls and .ppt made by the suite go through the live HTTP API, the real huey
worker and LibreOffice, and come back through the presigned link with their content."""

import io
import time

import docx
import openpyxl
import pptx
import pytest
import requests
from conftest import DOC_PARAGRAPHS, PPT_TITLES, XLS_SHEETS

from docshift.formats import MEDIA_TYPES
from docshift.storage import connection, tasks
from docshift.storage.s3 import ObjectStore


def _check_content(kind, data):
    if kind == "doc":
        text = [p.text for p in docx.Document(io.BytesIO(data)).paragraphs if p.text]
        assert text == DOC_PARAGRAPHS
    elif kind == "xls":
        book = openpyxl.load_workbook(io.BytesIO(data))
        assert book.sheetnames == list(XLS_SHEETS)
        for title, cells in XLS_SHEETS.items():
            for ref, value in cells.items():
                assert book[title][ref].value == value
    else:
        deck = pptx.Presentation(io.BytesIO(data))
        assert [slide.shapes.title.text for slide in deck.slides] == PPT_TITLES


@pytest.fixture(scope="module")
def key(live):
    return live.register("conversion-tests")


@pytest.mark.parametrize("kind,extension", [("doc", "docx"), ("xls", "xlsx"), ("ppt", "pptx")])
def test_round_trip_keeps_content(live, key, legacy, kind, extension):
    submitted = live.submit(key, legacy[kind])
    assert submitted.status_code == 202
    body = submitted.json()
    assert body["status"] == "QUEUED" and body["idempotent_replay"] is False
    assert submitted.headers["Location"] == body["status_url"]
    assert body["status_url"] == f"{live.base_url}/v1/conversions/{body['task_id']}"

    task = live.wait(key, body["task_id"])
    assert task["status"] == "SUCCEEDED", task
    assert task["billing_class"] == "INCLUDED"
    assert task["source_filename"] == legacy[kind].name
    assert task["download_expires_in"] == 300
    assert task["created_at"].endswith("Z") and task["result_expires_at"].endswith("Z")

    download = requests.get(task["download_url"], timeout=10)  # no Authorization
    assert download.status_code == 200
    assert download.headers["Content-Type"] == MEDIA_TYPES[extension]
    assert download.headers["Content-Disposition"] == \
        f'attachment; filename="{legacy[kind].stem}.{extension}"'
    assert len(download.content) == task["result_size"]
    _check_content(kind, download.content)


def test_poll_while_queued_says_retry_after(live, key, legacy):
    task_id = live.submit(key, legacy["doc"]).json()["task_id"]
    first = requests.get(f"{live.base_url}/v1/conversions/{task_id}",
                         headers={"Authorization": f"Bearer {key}"}, timeout=10)
    if first.json()["status"] in ("QUEUED", "PROCESSING"):
        assert first.headers["Retry-After"] == "2"
    final = live.wait(key, task_id)
    done = requests.get(f"{live.base_url}/v1/conversions/{task_id}",
                        headers={"Authorization": f"Bearer {key}"}, timeout=10)
    assert final["status"] == "SUCCEEDED" and "Retry-After" not in done.headers


def test_expired_link_is_refused_and_a_new_query_gives_a_working_one(live, key, legacy):
    task_id = live.submit(key, legacy["xls"]).json()["task_id"]
    first = live.wait(key, task_id)
    assert first["status"] == "SUCCEEDED"
    # the same signer the API uses, with a life of 3 s instead of 300: links are signed to the second, so a
    # link of 1 s signed late in its second had a tenth of one left, and a loaded machine missed it
    conn = connection.connect(live.config().database)
    stored = tasks.get_task(conn, task_id).result_key
    conn.conn.close()
    short = ObjectStore(live.config()).presign_result(stored, 'attachment; filename="numbers.xlsx"', "xlsx", 3)
    assert requests.get(short, timeout=10).status_code == 200
    time.sleep(4.5)
    refused = requests.get(short, timeout=10)
    assert refused.status_code == 403 and b"expired" in refused.content

    time.sleep(1)  # links are signed to the second: the next one must differ
    again = live.wait(key, task_id)
    assert again["download_url"] != first["download_url"]
    assert requests.get(again["download_url"], timeout=10).status_code == 200


def test_links_need_a_valid_signature(live, key, legacy):
    task = live.wait(key, live.submit(key, legacy["ppt"]).json()["task_id"])
    url = task["download_url"]
    assert requests.get(url.split("?")[0], timeout=10).status_code == 403
    tampered = url.replace("X-Amz-Expires=300", "X-Amz-Expires=900")
    assert requests.get(tampered, timeout=10).status_code == 403


def test_usage_counts_successes(live, legacy):
    key = live.register("usage-counting")
    for kind in ("doc", "xls"):
        assert live.wait(key, live.submit(key, legacy[kind]).json()["task_id"])["status"] == "SUCCEEDED"
    usage = requests.get(f"{live.base_url}/v1/account/usage",
                         headers={"Authorization": f"Bearer {key}"}, timeout=10).json()
    assert usage["plan"] == "starter" and usage["subscription_status"] == "active"
    assert (usage["included_quota"], usage["included_used"], usage["remaining"], usage["overage_used"]) \
        == (500, 2, 498, 0)
    assert usage["period_started_at"] < usage["period_ends_at"]
