"""Protected files converted with their password (``Document-Password``), through the API and the worker's
conversion path with a real LibreOffice: the result is protected by the same password (``protection=keep``) or
not (``remove``); a wrong password fails ``wrong_password``, none ``encrypted_document``, a key beyond the
derivation bound ``encryption_unsupported``, all unbilled; the password is sealed in the task row while it waits,
erased when it ends, and an Idempotency-Key replays only with the same one."""

import io
import random
import zipfile

import docx
import msoffcrypto
import openpyxl
import pptx
import pytest
import requests
from conftest import ROOT, encrypted_ooxml, register
from werkzeug.test import EnvironBuilder

from docshift import passwords
from docshift.engine import Engine
from docshift.storage import tasks
from docshift.tasks import conversion
from docshift.web.context import get_db, get_settings, get_store

CORPUS = ROOT.parent / "shared" / "corpus"
PASSWORD = "secret"  # the variants' (tests/make_variants.py)
# a protected file of each type, its password, and a word its text holds: Word and Excel files LibreOffice saves
# with a password (RC4), and real PowerPoint files (RC4 CryptoAPI, which LibreOffice neither writes nor reads)
PROTECTED = {
    "doc": ("encrypted.doc", PASSWORD, "docshift"),
    "xls": ("encrypted.xls", PASSWORD, "row"),
    "ppt": ("ppt/Password_Protected-hello.ppt", "hello", None),
}
READERS = {"docx": docx.Document, "xlsx": openpyxl.load_workbook, "pptx": pptx.Presentation}


def protected_file(variants, kind):
    name, password, _word = PROTECTED[kind]
    path = CORPUS / name if "/" in name else variants / name
    return path, password


def submit(client, key, path, name=None, password=None, query="", headers=None):
    sent = dict(headers or {})
    if password is not None:
        # a header's bytes, as WSGI hands them over: latin-1 of the UTF-8
        sent[passwords.HEADER] = password.encode().decode("latin-1")
    builder = EnvironBuilder(path=f"/v1/conversions{query}", method="POST",
                             headers={"Authorization": f"Bearer {key}", **sent},
                             data={"file": (io.BytesIO(path.read_bytes()), name or path.name)})
    environ = builder.get_environ()
    try:
        return client.open(environ)
    finally:
        environ["wsgi.input"].close()
        builder.close()


def convert(app, client, key, office, path, **options):
    response = submit(client, key, path, **options)
    assert response.status_code == 202, response.get_data(as_text=True)
    task_id = response.get_json()["task_id"]
    with app.app_context():
        waiting = tasks.get_task(get_db(), task_id)
        conversion.run_conversion(task_id, get_db(), get_store(), get_settings(), Engine(office))
        row = tasks.get_task(get_db(), task_id)
    view = client.get(f"/v1/conversions/{task_id}", headers={"Authorization": f"Bearer {key}"}).get_json()
    return view, waiting, row


def download(view):
    return requests.get(view["download_url"], timeout=30).content


def decrypted(data, password):
    office = msoffcrypto.OfficeFile(io.BytesIO(data))
    assert office.is_encrypted()
    office.load_key(password=password, verify_password=True)
    out = io.BytesIO()
    office.decrypt(out)
    return out.getvalue()


def usage(client, key):
    return client.get("/v1/account/usage", headers={"Authorization": f"Bearer {key}"}).get_json()


@pytest.mark.parametrize("kind", sorted(PROTECTED))
def test_a_protected_file_converts_with_its_password_and_its_result_opens_only_with_it(
        app, client, account, office, variants, kind):
    path, password = protected_file(variants, kind)
    view, waiting, row = convert(app, client, account, office, path, password=password)
    assert view["status"] == "SUCCEEDED", view
    assert view["billing_class"] == "INCLUDED"
    # the report is counted on the decrypted source and result, before protection
    assert view["fidelity"]["complete"], view["fidelity"]
    data = download(view)
    assert len(data) == view["result_size"]
    extension = view["result_filename"].rsplit(".", 1)[1]
    with pytest.raises(Exception):  # noqa: B017 - each reader raises its own kind for an OLE file
        READERS[extension](io.BytesIO(data))
    with pytest.raises(msoffcrypto.exceptions.InvalidKeyError):
        decrypted(data, "not the password")
    plain = READERS[extension](io.BytesIO(decrypted(data, password)))
    word = PROTECTED[kind][2]
    if word and extension == "docx":
        assert word in "\n".join(paragraph.text for paragraph in plain.paragraphs)
    if word and extension == "xlsx":
        assert word in str(plain.worksheets[0]["A1"].value)
    if extension == "pptx":
        assert len(plain.slides) == view["fidelity"]["counts"]["slides"]["source"] > 0
    # sealed while it waited, never in clear; forgotten once it ended
    assert waiting["sealed_password"] and password not in waiting["sealed_password"]
    assert row["sealed_password"] is None


@pytest.mark.parametrize("kind", sorted(PROTECTED))
def test_protection_remove_gives_an_unprotected_result(app, client, account, office, variants, kind):
    path, password = protected_file(variants, kind)
    view, _waiting, _row = convert(app, client, account, office, path, password=password, query="?protection=remove")
    assert view["status"] == "SUCCEEDED", view
    extension = view["result_filename"].rsplit(".", 1)[1]
    READERS[extension](io.BytesIO(download(view)))
    assert zipfile.is_zipfile(io.BytesIO(download(view)))


@pytest.mark.parametrize("kind", sorted(PROTECTED))
def test_a_wrong_password_fails_unbilled(app, client, office, variants, kind):
    key = register(client, app, f"wrong-{random.randrange(10**9)}")
    path, _password = protected_file(variants, kind)
    view, _waiting, row = convert(app, client, key, office, path, password="not the password")
    assert (view["status"], view["error"]["code"]) == ("FAILED", "wrong_password")
    assert "billing_class" not in view and usage(client, key)["included_used"] == 0
    assert row["sealed_password"] is None


@pytest.mark.parametrize("kind", sorted(PROTECTED))
def test_no_password_is_encrypted_document(app, client, account, office, variants, kind):
    path, _password = protected_file(variants, kind)
    view, _waiting, _row = convert(app, client, account, office, path)
    assert (view["status"], view["error"]["code"]) == ("FAILED", "encrypted_document")


def test_a_password_for_a_file_that_is_not_protected_is_ignored(app, client, account, office, legacy):
    view, _waiting, _row = convert(app, client, account, office, legacy["doc"], password=PASSWORD)
    assert view["status"] == "SUCCEEDED", view
    docx.Document(io.BytesIO(download(view)))  # unprotected: there was nothing to keep


def test_the_default_password_stays_a_file_that_is_not_protected(app, client, account, office, variants):
    """Excel opens a "VelvetSweatshop" workbook without asking: a password sent with it is not its own."""
    view, _waiting, _row = convert(app, client, account, office, variants / "velvet_sweatshop.xls", password="x")
    assert view["status"] == "SUCCEEDED", view
    openpyxl.load_workbook(io.BytesIO(download(view)))


def test_an_encrypted_package_under_a_legacy_name_opens_with_its_password(app, client, account, office, tmp_path):
    path = encrypted_ooxml(tmp_path / "package.xls", password="pässwörd")
    view, _waiting, _row = convert(app, client, account, office, path, password="pässwörd")
    assert view["status"] == "SUCCEEDED", view
    openpyxl.load_workbook(io.BytesIO(decrypted(download(view), "pässwörd")))


def test_a_key_beyond_the_derivation_bound_is_never_derived(app, client, account, office, tmp_path, monkeypatch):
    """A package whose key takes more rounds than Office's 100,000: encryption_unsupported, whatever the password."""
    path = encrypted_ooxml(tmp_path / "slow.xls", password=PASSWORD, spin_count=1_000_000)
    view, _waiting, _row = convert(app, client, account, office, path, password=PASSWORD)
    assert (view["status"], view["error"]["code"]) == ("FAILED", "encryption_unsupported")
    assert "billing_class" not in view


# the API: the header, the parameter, replays ----------------------------------------------------------

@pytest.mark.parametrize("query,header", [("?protection=maybe", None), ("?protection=", None),
                                          ("", ""), ("", "x" * 256)])
def test_a_malformed_protection_or_password_is_refused(client, account, legacy, query, header):
    response = submit(client, account, legacy["doc"], query=query, password=header)
    assert response.status_code == 400 and response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["code"] == "invalid_request"
    assert ("protection" in body["detail"]) == ("protection" in query)
    if header:
        assert header not in response.get_data(as_text=True)


def test_a_password_of_255_characters_of_utf8_is_taken(client, account, legacy):
    assert submit(client, account, legacy["doc"], password="ü" * 255).status_code == 202


def test_an_idempotency_key_replays_only_with_the_same_password(app, client, account, legacy):
    key = {"Idempotency-Key": f"protected-{random.randrange(10**9)}"}
    first = submit(client, account, legacy["doc"], password="one", headers=key)
    assert first.status_code == 202
    again = submit(client, account, legacy["doc"], password="one", headers=key)
    assert again.status_code == 202 and again.headers["Idempotent-Replayed"] == "true"
    assert again.get_json()["task_id"] == first.get_json()["task_id"]
    for other in ({"password": "two"}, {}, {"password": "one", "query": "?protection=remove"}):
        conflict = submit(client, account, legacy["doc"], headers=key, **other)
        assert conflict.status_code == 422 and conflict.get_json()["code"] == "idempotency_conflict"
        assert "one" not in conflict.get_json()["detail"].replace("done", "")
    with app.app_context():
        row = tasks.get_task(get_db(), first.get_json()["task_id"])
    # a keyed hash, never the password; the sealed password opens only with the secret key
    assert row["password_digest"] and row["password_digest"] != "one"
    assert "one" not in row["sealed_password"]
    with app.app_context():
        assert passwords.unseal(get_settings(), row["sealed_password"]) == "one"
        assert row["password_digest"] == passwords.digest(get_settings(), "one")


def test_without_an_idempotency_key_no_hash_of_the_password_is_kept(app, client, account, legacy):
    response = submit(client, account, legacy["doc"], password="one")
    with app.app_context():
        row = tasks.get_task(get_db(), response.get_json()["task_id"])
    assert row["password_digest"] is None and row["sealed_password"]


def test_the_openapi_document_names_the_header_and_the_parameter(client):
    document = client.get("/v1/openapi.json").get_json()
    parameters = {(p["in"], p["name"]) for p in document["paths"]["/v1/conversions"]["post"]["parameters"]}
    assert {("header", "Document-Password"), ("query", "protection")} <= parameters
