"""Every documented error: status, problem+json body with its code, nothing leaked."""

import gzip
import io
import socket
from dataclasses import replace

import pytest
from conftest import post_file, register

from docshift.accounts import keys
from docshift.storage import accounts

LIMIT = 4 * 1024 * 1024


def assert_problem(response, status, code):
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["status"] == status and body["code"] == code
    assert set(body) == {"type", "title", "status", "detail", "code"}
    assert "Traceback" not in body["detail"]
    return body


def bearer(key):
    return {"Authorization": f"Bearer {key}"}


def upload(client, key, name="a.doc", data=b"\xd0\xcf\x11\xe0 not converted here", **fields):
    return post_file(client, key, data, name, **fields)


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Basic dXNlcjpwYXNz"}, {"Authorization": "Bearer"},
                                     {"Authorization": "Bearer   "}, {"Authorization": "dsk_abc"}])
@pytest.mark.parametrize("path", ["/v1/conversions/tsk_000000000000000000000000", "/v1/account/usage"])
def test_missing_api_key(client, headers, path):
    response = client.get(path, headers=headers)
    assert_problem(response, 401, "missing_api_key")
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_missing_api_key_on_submit(client):
    response = client.post("/v1/conversions", data={"file": (io.BytesIO(b"x"), "a.doc")})
    assert_problem(response, 401, "missing_api_key")


def test_invalid_api_key_mistyped_unknown_and_rotated(app, client, account):
    mistyped = account[:-1] + ("A" if account[-1] != "A" else "B")
    assert not keys.well_formed(mistyped)
    unknown = keys.generate()
    for key in (mistyped, unknown, "dsk_short", account.replace("dsk_", "xyz_")):
        assert_problem(client.get("/v1/account/usage", headers=bearer(key)), 401, "invalid_api_key")


def test_subscription_inactive(app, client, account):
    with app.app_context():
        from docshift.web.context import get_db
        conn = get_db()
        row = accounts.account_for_key(conn, keys.digest(account))
        accounts.set_account(conn, row["id"], status="inactive")
    assert_problem(client.get("/v1/account/usage", headers=bearer(account)), 403,
                   "subscription_pending_or_inactive")
    assert_problem(upload(client, account), 403, "subscription_pending_or_inactive")


@pytest.mark.parametrize("task_id", ["tsk_000000000000000000000000", "nope", "x" * 300, "tsk_" + "g" * 24, "%2e%2e",
                                     "tsk_%00"])
def test_unknown_task(client, account, task_id):
    assert_problem(client.get(f"/v1/conversions/{task_id}", headers=bearer(account)), 404, "task_not_found")


def test_another_accounts_task_is_not_found(app, client, account):
    task_id = upload(client, account).get_json()["task_id"]
    assert client.get(f"/v1/conversions/{task_id}", headers=bearer(account)).status_code == 200
    other = register(client, app, "someone-else")
    assert_problem(client.get(f"/v1/conversions/{task_id}", headers=bearer(other)), 404, "task_not_found")


def test_unknown_path_and_wrong_method(client, account):
    assert_problem(client.get("/v1/nothing-here", headers=bearer(account)), 404, "not_found")
    assert_problem(client.get("/nothing-here"), 404, "not_found")
    wrong = client.delete("/v1/conversions", headers=bearer(account))
    assert_problem(wrong, 405, "method_not_allowed")
    assert "POST" in wrong.headers["Allow"]
    assert_problem(client.put("/v1/account/usage", headers=bearer(account)), 405, "method_not_allowed")


def test_exactly_4_mib_is_accepted_and_one_byte_more_is_not(client, account):
    accepted = upload(client, account, data=b"\0" * LIMIT)
    assert accepted.status_code == 202, accepted.get_data(as_text=True)
    assert_problem(upload(client, account, data=b"\0" * (LIMIT + 1)), 413, "file_too_large")


def test_huge_body_is_refused_from_its_length(live):
    """A 200 MiB Content-Length is answered 413 after a few bytes: the body is never read."""
    key = live.register("huge-body")
    with socket.create_connection(("127.0.0.1", live.port), timeout=10) as conn:
        conn.sendall((f"POST /v1/conversions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
                      f"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: {50 * LIMIT}\r\n\r\n"
                      "--b\r\n").encode())
        reply = b""
        while chunk := conn.recv(65536):  # the server closes after its answer
            reply += chunk
        reply = reply.decode()
    assert reply.startswith("HTTP/1.1 413")
    assert "application/problem+json" in reply and '"code":"file_too_large"' in reply


def chunked_upload(client, key, body):
    """A multipart body without a Content-Length, as a chunked client sends it."""
    return client.post("/v1/conversions", headers=bearer(key), input_stream=io.BytesIO(body),
                       content_type="multipart/form-data; boundary=b")


@pytest.mark.parametrize("count", [17, 100])
def test_too_many_form_parts_is_an_invalid_request(client, account, count):
    """werkzeug stops at MAX_FORM_PARTS (16) with a 413: the file is not too large, the form is wrong."""
    fields = {f"f{n}": "x" for n in range(count - 1)}
    assert_problem(upload(client, account, **fields), 400, "invalid_request")


def test_a_text_field_over_500_kb_is_an_invalid_request(client, account):
    assert_problem(upload(client, account, note="x" * 600_000), 400, "invalid_request")
    body = (b'--b\r\nContent-Disposition: form-data; name="note"\r\n\r\n' + b"x" * 600_000 + b"\r\n--b--\r\n")
    assert_problem(chunked_upload(client, account, body), 400, "invalid_request")


def test_a_chunked_body_over_the_limit_is_still_file_too_large(client, account):
    """Without a Content-Length the limit is found while reading: still 413 file_too_large."""
    body = (b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.doc"\r\n\r\n'
            + b"\0" * (LIMIT + 128 * 1024) + b"\r\n--b--\r\n")
    assert_problem(chunked_upload(client, account, body), 413, "file_too_large")


@pytest.mark.parametrize("name", ["a.docx", "a.txt", "doc", "a.doc.exe", "a.pdf", "a.xlsx", ""])
def test_unsupported_file_type(client, account, name):
    assert_problem(upload(client, account, name=name or "noname"), 415, "unsupported_file_type")


@pytest.mark.parametrize("sent,kept", [
    ("\U0001F469\u200d\U0001F4BB notes.doc", "\U0001F469\u200d\U0001F4BB notes.doc"),  # a joined emoji
    ("\u0646\u0627\u0645\u0647\u200c\u0647\u0627.xls",) * 2,  # a Persian plural, its ZWNJ
    ("abc\u202ecod.exe.doc", "abccod.exe.doc"),  # shows as abcexe.doc: the override goes
    ("\u2067a\u2069\u200f.ppt", "a.ppt"),
    ("tab\there\x01.ppt", "tabhere.ppt"),
    (".doc", ".doc"),  # ends in .doc
    ("report.doc ", "report.doc"), ("report.doc.", "report.doc"), ("report.doc. . ", "report.doc"),  # as Windows saves
])
def test_the_name_kept_loses_controls_and_reordering_marks_only(client, account, sent, kept):
    response = upload(client, account, name=sent)
    assert response.status_code == 202, response.get_data(as_text=True)
    task = client.get(f"/v1/conversions/{response.get_json()['task_id']}", headers=bearer(account)).get_json()
    assert task["source_filename"] == kept


@pytest.mark.parametrize("name", ["A.DOC", "b.Xls", "c.PPT"])
def test_extensions_are_case_insensitive(client, account, name):
    assert upload(client, account, name=name).status_code == 202


def test_invalid_requests(client, account):
    cases = {
        "no parts": client.post("/v1/conversions", headers=bearer(account), data={},
                                content_type="multipart/form-data"),
        "wrong part name": client.post("/v1/conversions", headers=bearer(account),
                                       data={"upload": (io.BytesIO(b"x"), "a.doc")}),
        "two files": client.post("/v1/conversions", headers=bearer(account),
                                 data={"file": [(io.BytesIO(b"x"), "a.doc"), (io.BytesIO(b"y"), "b.doc")]}),
        "extra field": upload(client, account, note="hello"),
        "empty file": upload(client, account, data=b""),
        "not multipart": client.post("/v1/conversions", headers=bearer(account), data=b"raw bytes",
                                     content_type="application/octet-stream"),
        "json": client.post("/v1/conversions", headers=bearer(account), json={"file": "x"}),
    }
    for what, response in cases.items():
        assert response.status_code == 400, what
        assert_problem(response, 400, "invalid_request")


@pytest.mark.parametrize("query", ["?macros=keep&macros=remove", "?macros=remove&macros=bogus",
                                   "?protection=keep&protection=remove", "?protection=remove&protection=remove"])
def test_an_option_given_twice_is_an_invalid_request(client, account, query):
    """Neither of two values is more the client's than the other; the first alone is accepted."""
    body = assert_problem(upload_with_query(client, account, query), 400, "invalid_request")
    assert query[1:query.index("=")] in body["detail"] and "once" in body["detail"]
    assert upload_with_query(client, account, query.split("&")[0]).status_code == 202


def upload_with_query(client, key, query):
    return post_file(client, key, b"\xd0\xcf\x11\xe0 not converted here", "a.doc", query=query)


def test_a_file_name_in_latin_1_is_refused_with_what_to_send(client, account):
    """werkzeug drops a whole form whose part headers are not UTF-8; the answer says so, not 'send one part'."""
    body = b'--b\r\nContent-Disposition: form-data; name="file"; filename="caf\xe9.doc"\r\n\r\nhello\r\n--b--\r\n'
    response = client.post("/v1/conversions", headers=bearer(account), data=body,
                           content_type="multipart/form-data; boundary=b")
    assert "UTF-8" in assert_problem(response, 400, "invalid_request")["detail"]
    utf8 = body.replace(b"caf\xe9", "café".encode())
    accepted = client.post("/v1/conversions", headers=bearer(account), data=utf8,
                           content_type="multipart/form-data; boundary=b")
    assert accepted.status_code == 202, accepted.get_data(as_text=True)


@pytest.mark.parametrize("value", ["short", "x" * 129, "has space", "tab\there!", "ünïcödé-key"])
def test_bad_idempotency_key(client, account, value):
    response = client.post("/v1/conversions", headers={**bearer(account), "Idempotency-Key": value},
                           data={"file": (io.BytesIO(b"data"), "a.doc")})
    body = assert_problem(response, 400, "invalid_request")
    assert "8 to 128" in body["detail"]


def _store_down(app, **changes):
    app.extensions.pop("docshift.store", None)
    # nothing listens on the discard port
    app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], s3_endpoint="127.0.0.1:9", **changes)
    from docshift.storage.s3 import ObjectStore
    app.extensions["docshift.store"] = ObjectStore(app.config["DOCSHIFT"])


def test_store_down_answers_503_and_keeps_nothing_when_uploads_go_to_the_bucket(app, client, account):
    """With the queue on Redis, an upload goes to the bucket, where a node's link reaches it."""
    _store_down(app, queue_url="redis://127.0.0.1:9/0")
    assert_problem(upload(client, account), 503, "service_unavailable")
    with app.app_context():
        from docshift.web.context import get_db
        assert get_db()["conversions"].count == 0


def test_store_down_does_not_refuse_an_upload_that_waits_on_this_box(app, client, account):
    """On one box an upload waits beside the database: the store is needed only for the result, which the run
    stores once the store is back (its patience)."""
    _store_down(app)
    accepted = upload(client, account)
    assert accepted.status_code == 202, accepted.get_data(as_text=True)
    task_id = accepted.get_json()["task_id"]
    with app.app_context():
        from docshift.web.context import get_db, get_store
        assert get_db()["conversions"].get(task_id)["status"] == "QUEUED"
        assert get_store().spool.read(task_id) is not None


def test_database_unavailable_is_503_everywhere(app, client, account, tmp_path):
    # a directory: SQLite cannot open it
    app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], database=str(tmp_path))
    for method, path in (("get", "/v1/account/usage"), ("get", "/v1/conversions/tsk_000000000000000000000000"),
                         ("post", "/v1/conversions")):
        response = getattr(client, method)(path, headers=bearer(account))
        assert_problem(response, 503, "service_unavailable")
        assert "database" in response.get_json()["detail"]


@pytest.mark.parametrize("disposition,kept", [
    (b'filename="C:\\Users\\ann\\report.doc"', "report.doc"),  # a Windows path whole, as browsers and urllib3 send
    (b'filename="C:\\\\Users\\\\ann\\\\report.doc"', "report.doc"),  # the same, its backslashes escaped
    (b'filename="say \\"hi\\".doc"', 'say "hi".doc'),  # escaped quotes stay quotes
    (b'filename="a.doc"; filename*=UTF-8\'\'%C3%A9t%C3%A9.doc', "\u00e9t\u00e9.doc"),  # filename* wins
])
def test_the_name_kept_is_the_last_component_of_the_name_sent(client, account, disposition, kept):
    body = (b'--b\r\nContent-Disposition: form-data; name="file"; ' + disposition + b"\r\n\r\n"
            + b"\xd0\xcf\x11\xe0 a file\r\n--b--\r\n")
    response = client.post("/v1/conversions", headers=bearer(account), data=body,
                           content_type="multipart/form-data; boundary=b")
    assert response.status_code == 202, response.get_data(as_text=True)
    task = client.get(f"/v1/conversions/{response.get_json()['task_id']}", headers=bearer(account)).get_json()
    assert task["source_filename"] == kept


@pytest.mark.parametrize("header,value", [("Content-Encoding", "gzip"), ("Transfer-Encoding", "gzip, chunked")])
def test_a_compressed_body_is_refused_as_such(client, account, header, value):
    """The service reads a body as it came: a gzipped one held no form part, and was answered as a form without
    its file."""
    body = gzip.compress(b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.doc"\r\n\r\nx\r\n--b--\r\n')
    response = client.post("/v1/conversions", headers={**bearer(account), header: value}, data=body,
                           content_type="multipart/form-data; boundary=b")
    problem = assert_problem(response, 400, "invalid_request")
    assert "gzip" in problem["detail"], problem
