"""Every kind of file a .doc, .xls or .ppt may really be, through the worker's conversion path with a
real LibreOffice: what LibreOffice converts for the extension's family SUCCEEDS, with what it found
as ``detected_format``; text, images, PDFs, archives, random bytes and other families fail
``unsupported_content`` saying what they are; password-protected files fail ``encrypted_document``,
except the ones Office opens with its default password."""

import re
import zipfile

import pytest
from conftest import post_file

from docshift.engine import Engine
from docshift.tasks import conversion, maintenance
from docshift.web.context import get_db, get_store

# file: the detected_format of its SUCCEEDED task
ACCEPTED = {
    "rtf.doc": "rtf",
    "word_html.doc": "html",
    "word_mht.doc": "mht",
    "excel_mht.xls": "mht",
    "docx_named.doc": "ooxml",
    "upper_case.doc": "word-97",
    "spreadsheetml.xls": "spreadsheetml-2003",
    "html_table.xls": "html",
    "biff5.xls": "excel-biff5",
    "biff5_upper_case.xls": "excel-biff5",
    "biff4.xls": "excel-biff2-4",
    "upper_case.xls": "excel-biff8",
    "chart_sheet.xls": "ooxml",
    "velvet_sweatshop.xls": "excel-biff8",
    "upper_case.ppt": "powerpoint-97",
    "pptx_named.ppt": "ooxml",
}
# file: the detected_format of its FAILED unsupported_content task
REFUSED = {
    "text.doc": "text",
    "text.xls": "text",
    "random.doc": "text",
    "zip.xls": "text",
    "png.ppt": "image",
    "pdf.doc": "pdf",
    "xls_named.doc": "excel-biff8",
    "doc_named.xls": "word-97",
    "docx_named.xls": "ooxml",
}
# file: what its message says it is, and the name that converts it (None: a file of none of the legacy types)
NAMED = {"xls_named.doc": ("an Excel document", ".xls"), "doc_named.xls": ("a Word document", ".doc"),
         "docx_named.xls": ("a Word document", ".doc")}
ENCRYPTED = ["encrypted.doc", "encrypted.xls", "encrypted_ooxml.xls"]


def convert(app, client, account, office, path):
    response = post_file(client, account, path.read_bytes(), path.name)
    assert response.status_code == 202, response.get_data(as_text=True)
    task_id = response.get_json()["task_id"]
    with app.app_context():
        conversion.run_next(get_db(), get_store(), app.config["DOCSHIFT"], Engine(office), maintenance.worker_name())
    view = client.get(f"/v1/conversions/{task_id}", headers={"Authorization": f"Bearer {account}"})
    return view.get_json()


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_variant_converts(app, client, account, office, variants, name):
    task = convert(app, client, account, office, variants / name)
    assert task["status"] == "SUCCEEDED", task
    assert task["detected_format"] == ACCEPTED[name]


def test_a_chart_sheet_stays_a_sheet(app, client, account, office, variants, tmp_path):
    import requests

    task = convert(app, client, account, office, variants / "chart_sheet.xls")
    (tmp_path / "out.xlsx").write_bytes(requests.get(task["download_url"], timeout=30).content)
    with zipfile.ZipFile(tmp_path / "out.xlsx") as package:
        workbook = package.read("xl/workbook.xml").decode()
    assert re.findall(r'<sheet name="([^"]+)"', workbook) == ["Data", "Chart", "After"]


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_kind_says_what_it_is(app, client, account, office, variants, name):
    task = convert(app, client, account, office, variants / name)
    assert (task["status"], task["error"]["code"], task["detected_format"]) == \
        ("FAILED", "unsupported_content", REFUSED[name])
    assert "billing_class" not in task
    message = task["error"]["message"]
    assert message.startswith(f"LibreOffice recognises this file as {REFUSED[name]}")
    if name in NAMED:  # an OOXML Word document named .xls said "ooxml" only, not what to name it
        what, extension = NAMED[name]
        assert f"{REFUSED[name]}, {what}: " in message and f"Send it named {extension} " in message, message
    else:
        assert "Send it named" not in message, message


@pytest.mark.parametrize("name", ENCRYPTED)
def test_password_protected_variant(app, client, account, office, variants, name):
    task = convert(app, client, account, office, variants / name)
    assert (task["status"], task["error"]["code"]) == ("FAILED", "encrypted_document")
    assert "Document-Password header" in task["error"]["message"]
    assert "detected_format" not in task

