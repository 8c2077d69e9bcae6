"""The `docshift` command-line client against the live service (gunicorn, huey, LibreOffice, S3)."""

import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest
import requests

from docshift import client
from docshift.accounts import keys
from docshift.contract import TaskErrorCode
from docshift.errors import ClientProblem
from docshift.storage import connection


@pytest.fixture
def key(live, monkeypatch):
    """A fresh active customer's key, exported as the client reads it."""
    api_key = live.register(f"client-{random.randrange(10**9)}")
    monkeypatch.setenv("DOCSHIFT_URL", live.base_url)
    monkeypatch.setenv("DOCSHIFT_API_KEY", api_key)
    return api_key


def usage(live, key):
    return requests.get(f"{live.base_url}/v1/account/usage",
                        headers={"Authorization": f"Bearer {key}"}, timeout=10).json()


def task_count(live, key):
    conn = connection.connect(live.config().database)
    try:
        row = conn.execute("select count(*) from conversions where account_id ="
                           " (select account_id from api_keys where key_hash = ?)",
                           [keys.digest(key)]).fetchone()
        return row[0]
    finally:
        conn.close()


def convert(legacy, out):
    return client.main(["convert", str(legacy["doc"]), str(legacy["xls"]), str(legacy["ppt"]),
                        "--out", str(out), "--parallel", "3"])


def assert_opens(out):
    import docx
    import openpyxl
    import pptx

    results = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))  # not the state file
    assert results == ["deck.pptx", "letter.docx", "numbers.xlsx"]
    assert "Word 97" in "\n".join(p.text for p in docx.Document(out / "letter.docx").paragraphs)
    book = openpyxl.load_workbook(out / "numbers.xlsx")
    assert book.sheetnames == ["Alpha", "Beta"]
    book.close()
    assert len(pptx.Presentation(out / "deck.pptx").slides) == 3


def test_convert_a_mix_of_legacy_files(live, key, legacy, tmp_path, capsys):
    out = tmp_path / "out"
    assert convert(legacy, out) == 0
    assert_opens(out)
    captured = capsys.readouterr()
    assert captured.err == ""  # no bar when stderr is not a terminal, no errors
    assert captured.out.count(" -> ") == 3 and "INCLUDED" in captured.out
    assert key not in captured.out
    assert usage(live, key)["included_used"] == 3


def test_rerun_creates_no_task_and_is_not_charged(live, key, legacy, tmp_path, capsys):
    assert convert(legacy, tmp_path / "first") == 0
    before = usage(live, key)["included_used"], task_count(live, key)
    assert before == (3, 3)
    capsys.readouterr()

    assert convert(legacy, tmp_path / "second") == 0
    assert (usage(live, key)["included_used"], task_count(live, key)) == before
    assert_opens(tmp_path / "second")
    assert capsys.readouterr().out.count("replayed: not charged again") == 3


def test_a_file_named_as_long_as_a_name_can_be_converts_beside_the_others(live, key, legacy, tmp_path, capsys):
    """A .doc named with 255 bytes had a 256-byte result name: the client could not write it, stopped the whole run
    (exit 1) and left the other files unsaved, though converted and counted. Its result's name is cut to fit."""
    folder = tmp_path / "in"
    folder.mkdir()
    long_name = "a" * 251 + ".doc"
    (folder / long_name).write_bytes(legacy["doc"].read_bytes())
    (folder / "numbers.xls").write_bytes(legacy["xls"].read_bytes())
    assert client.main(["convert", str(folder), "--out", str(tmp_path / "out")]) == 0, capsys.readouterr()
    results = sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith("."))
    assert results == ["a" * 250 + ".docx", "numbers.xlsx"]
    assert usage(live, key)["included_used"] == 2


def test_a_file_whose_name_is_no_utf_8_converts_beside_the_others(live, key, legacy, tmp_path, capsys):
    """A file name on Linux may be bytes that are no UTF-8 (an old archive's Latin-1 names). Its result goes beside it
    under the same bytes, and the other files convert too."""
    import os

    folder = tmp_path / "in"
    folder.mkdir()
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.doc"), "wb") as f:
        f.write(legacy["doc"].read_bytes())
    (folder / "numbers.xls").write_bytes(legacy["xls"].read_bytes())
    report = tmp_path / "report.csv"
    arguments = ["convert", str(folder), "--out", str(tmp_path / "out"), "--report", str(report)]
    assert client.main(arguments) == 0, capsys.readouterr()
    assert sorted(os.listdir(os.fsencode(tmp_path / "out"))) == [b".docshift-state.jsonl", b"caf\xe9.docx",
                                                                   b"numbers.xlsx"]
    printed = capsys.readouterr().out
    assert "caf\ufffd.doc -> " in printed and "2 succeeded" in printed  # as the terminal can show it
    assert "caf\ufffd.doc" in report.read_text(encoding="utf-8")
    assert client.main(arguments) == 0  # a second run finds the first's result
    assert "done earlier" in capsys.readouterr().out and usage(live, key)["included_used"] == 2


def test_bad_key_is_one_line_and_exit_2(live, key, legacy, tmp_path, monkeypatch, capsys):
    bad = keys.generate()  # well formed, so the service looks it up and refuses it
    monkeypatch.setenv("DOCSHIFT_API_KEY", bad)
    before = task_count(live, key)
    for argv in (["convert", str(legacy["doc"]), str(legacy["xls"]), "--out", str(tmp_path / "o")],
                 ["usage"], ["task", "tsk_" + "0" * 24]):
        assert client.main(argv) == 2
        captured = capsys.readouterr()
        lines = captured.err.splitlines()
        assert len(lines) == 1 and "invalid_api_key" in lines[0], captured.err
        assert lines[0] == ("docshift: invalid_api_key: The API key is not valid. "
                            "Check DOCSHIFT_API_KEY.")
        assert "Traceback" not in captured.err and bad not in captured.err + captured.out
    assert task_count(live, key) == before
    assert not (tmp_path / "o").exists()


def test_an_inactive_subscription_is_one_line_and_exit_2(live, key, legacy, tmp_path, capsys):
    conn = connection.connect(live.config().database)
    try:
        conn.execute("update accounts set status = 'inactive' where id ="
                     " (select account_id from api_keys where key_hash = ?)", [keys.digest(key)])
    finally:
        conn.close()
    assert client.main(["convert", str(legacy["doc"]), "--out", str(tmp_path / "o")]) == 2
    captured = capsys.readouterr()
    assert len(captured.err.splitlines()) == 1, captured.err
    assert captured.err.startswith("docshift: subscription_pending_or_inactive: ") and "subscription" in captured.err
    assert task_count(live, key) == 0 and not (tmp_path / "o").exists()


def test_missing_key_and_unreachable_service(live, monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("DOCSHIFT_API_KEY", raising=False)
    assert client.main(["usage"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "DOCSHIFT_API_KEY" in err

    monkeypatch.setenv("DOCSHIFT_API_KEY", keys.generate())
    monkeypatch.setenv("DOCSHIFT_URL", f"{live.base_url}/wrong/prefix")
    assert client.main(["usage"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "not_found" in err and "DOCSHIFT_URL" in err

    monkeypatch.setattr("docshift.client.http.BACKOFF", 0.01)  # the backoff of its requests
    monkeypatch.setenv("DOCSHIFT_URL", "http://127.0.0.1:9")  # discard port: nothing listens
    assert client.main(["usage"]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "unreachable" in err and "Traceback" not in err


def test_failed_and_skipped_files_are_reported_with_their_code(live, key, legacy, tmp_path, capsys):
    fake = tmp_path / "fake.doc"
    fake.write_text("plain text, not a Word file")
    text = tmp_path / "notes.txt"
    text.write_text("not an Office file")
    out = tmp_path / "out"
    before = task_count(live, key)
    argv = ["convert", str(legacy["doc"]), str(fake), str(text), "--out", str(out)]
    assert client.main(argv) == 1
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert len(err) == 1 and "fake.doc: FAILED unsupported_content" in err[0], captured.err
    assert "Traceback" not in captured.err
    # the text file is counted, never sent
    assert "2 legacy files: 1 succeeded, 1 failed, 1 skipped" in captured.out
    assert task_count(live, key) == before + 2
    assert [p.name for p in out.iterdir() if not p.name.startswith(".")] == ["letter.docx"]


def test_usage_errors_exit_2_before_anything_is_sent(live, key, legacy, tmp_path, capsys):
    before = task_count(live, key)
    assert client.main(["convert", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == f"docshift: {tmp_path / 'nowhere'}: no such file or folder.\n"
    for folder in ("a", "b"):  # the same name in two folders given: both would become o/letter.docx
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "letter.doc").write_bytes(legacy["doc"].read_bytes())
    assert client.main(["convert", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "would both become letter.*" in err
    assert client.main(["convert", str(tmp_path / "a"), "--out", str(tmp_path / "o"), "--parallel", "0"]) == 2
    assert "--parallel" in capsys.readouterr().err
    assert task_count(live, key) == before and not (tmp_path / "o").exists()


def test_the_library_converts_one_file(live, key, legacy, tmp_path):
    from docshift.client import Client
    from docshift.errors import ClientProblem

    service = Client(live.base_url, key)
    assert key not in repr(service)
    done = service.convert(legacy["xls"], tmp_path / "out")
    assert (done.path, done.task["status"], done.replayed) == (tmp_path / "out" / "numbers.xlsx", "SUCCEEDED", False)
    assert done.task["fidelity"]["complete"] is True

    # step by step, the same file: its key replays the task, and the result downloads again
    submitted = service.submit(legacy["xls"])
    assert submitted["idempotent_replay"] is True and submitted["task_id"] == done.task["task_id"]
    task = service.wait(submitted)
    copy = service.download(task, tmp_path / "copy.xlsx")
    assert copy.read_bytes() == done.path.read_bytes()
    assert service.usage()["included_used"] == 1

    big = tmp_path / "big.doc"
    big.write_bytes(b"\0" * (service.upload_limit()[0] + 1))
    with pytest.raises(ClientProblem) as refused:
        service.submit(big)
    assert refused.value.code == "file_too_large" and "not sent" in refused.value.detail
    assert task_count(live, key) == 1


def test_usage_and_task_print_what_the_api_says(live, key, legacy, capsys):
    submitted = live.submit(key, legacy["xls"]).json()
    live.wait(key, submitted["task_id"])

    assert client.main(["usage"]) == 0
    printed = capsys.readouterr().out
    expected = usage(live, key)
    assert expected["included_used"] == 1
    for field, value in expected.items():
        words = [*field.split("_"), str(value)]
        assert any(line.split() == words for line in printed.splitlines()), field
    assert client.main(["usage", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == expected

    assert client.main(["task", submitted["task_id"]]) == 0
    task = json.loads(capsys.readouterr().out)
    api = requests.get(submitted["status_url"], headers={"Authorization": f"Bearer {key}"},
                       timeout=10).json()
    # every query signs a fresh link; the rest of the task is what the API says
    assert task.pop("download_url").startswith("http") and api.pop("download_url")
    assert task == api
    assert task["status"] == "SUCCEEDED" and task["source_filename"] == "numbers.xls"

    assert client.main(["task", "tsk_" + "f" * 24]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("docshift: task_not_found: ")


class Recorder(BaseHTTPRequestHandler):
    """Another host: answers 404 to everything and keeps what it was sent."""

    seen: ClassVar[list] = []

    def do_GET(self):
        self.seen.append((self.path, self.headers.get("Authorization")))
        self.send_error(404)

    do_POST = do_GET

    def log_message(self, *args):
        pass


def host_rewriting_proxy(live, host):
    """A front for the live service that passes every request on with ``Host: host``, as a
    proxy that forwards the client's Host (or a client that sends a forged one) would."""
    class Proxy(BaseHTTPRequestHandler):
        def forward(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            answer = requests.request(self.command, f"{live.base_url}{self.path}", data=body, timeout=30,
                                      headers={**headers, "Host": host}, allow_redirects=False)
            self.send_response(answer.status_code)
            for name, value in answer.headers.items():
                if name.lower() not in ("connection", "transfer-encoding", "content-length", "date", "server"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        do_GET = do_POST = forward

        def log_message(self, *args):
            pass

    return Proxy


def serve(handler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_the_key_goes_only_to_the_configured_host(live, key, legacy, tmp_path, monkeypatch):
    """Without DOCSHIFT_BASE_URL the service builds status_url from the Host header: reached with
    another host's name, it names that host. The client polls its configured host instead."""
    elsewhere = serve(Recorder)
    front = serve(host_rewriting_proxy(live, f"127.0.0.1:{elsewhere.server_port}"))
    try:
        submitted = requests.post(f"http://127.0.0.1:{front.server_port}/v1/conversions",
                                  headers={"Authorization": f"Bearer {key}"},
                                  files={"file": ("probe.doc", legacy["doc"].read_bytes())}, timeout=30)
        assert submitted.json()["status_url"].startswith(f"http://127.0.0.1:{elsewhere.server_port}/")

        monkeypatch.setenv("DOCSHIFT_URL", f"http://127.0.0.1:{front.server_port}")
        out = tmp_path / "out"
        assert client.main(["convert", str(legacy["doc"]), "--out", str(out)]) == 0
        assert (out / "letter.docx").exists()
        assert Recorder.seen == []
    finally:
        for server in (front, elsewhere):
            server.shutdown()
            server.server_close()


def test_every_code_of_a_failed_task_has_a_hint():
    assert set(client.FAILURE_HINTS) == set(TaskErrorCode)


class Busy(BaseHTTPRequestHandler):
    """A service under load: each task is still running and each new one over the account's cap, both with a
    ``Retry-After`` of half a minute."""

    def answer(self, status, body, content_type="application/json"):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Retry-After", "30")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.startswith("/v1/conversions/"):
            self.answer(200, {"task_id": self.path.rpartition("/")[2], "status": "RUNNING"})
        else:
            self.answer(404, {"type": "about:blank", "title": "Not Found", "status": 404, "code": "not_found",
                              "detail": "no such page"}, "application/problem+json")

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.answer(429, {"type": "about:blank", "title": "Too Many Requests", "status": 429,
                          "code": "too_many_tasks", "detail": "the account has too many unfinished tasks"},
                    "application/problem+json")

    def log_message(self, *args):
        pass


def test_a_timeout_shorter_than_retry_after_ends_on_time(tmp_path):
    """``--timeout 1`` gives up after about a second, not after the service's ``Retry-After``."""
    busy = serve(Busy)
    source = tmp_path / "letter.doc"
    source.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504))
    try:
        service = client.Client(f"http://127.0.0.1:{busy.server_port}", "dsk_unused")
        for attempt in (lambda: service.wait("tsk_" + "a" * 24, timeout=1),
                        lambda: service.submit(source, busy_wait=1)):
            started = time.monotonic()
            with pytest.raises(ClientProblem) as raised:
                attempt()
            assert raised.value.code in ("timed_out", "too_many_tasks")
            assert time.monotonic() - started < 10  # the Retry-After is 30 s
    finally:
        busy.shutdown()
        busy.server_close()
