"""`docshift convert TREE --out OUT --report OUT/report.csv` against the live service (gunicorn, huey,
LibreOffice, SeaweedFS): a tree with nested folders, a protected file, a file over the size limit and a
text file; the first run killed with SIGKILL part-way and run again; every result at its path, the
report's rows, the account charged once per success; the HTML report in the real Chromium."""

import csv
import io
import json
import os
import pty
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path, PurePosixPath
from typing import ClassVar

import pytest
import requests
from conftest import ROOT, stop_process_group

from docshift import client
from docshift.accounts import keys
from docshift.client.http import idempotency_key
from docshift.client.tree import STATE_FILE
from docshift.storage import connection

DOCSHIFT = Path(sys.executable).parent / "docshift"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(os.environ.get("DOCSHIFT_TEST_ARTIFACTS") or tempfile.gettempdir()) / "docshift-artifacts"
LIMIT = 4 * 1024 * 1024  # the service's default upload limit; the client reads it from the service


def usage(live, key):
    return requests.get(f"{live.base_url}/v1/account/usage",
                        headers={"Authorization": f"Bearer {key}"}, timeout=10).json()


def tasks_of(live, key):
    """{source filename: [status, ...]} of the account's tasks, oldest first, from the service's database."""
    conn = connection.connect(live.config().database)
    try:
        rows = conn.execute("select source_filename, status from conversions where account_id ="
                            " (select account_id from api_keys where key_hash = ?) order by created_at",
                            [keys.digest(key)]).fetchall()
    finally:
        conn.close()
    found = {}
    for name, status in rows:
        found.setdefault(name, []).append(status)
    return found


def state_records(out):
    """The state file's records that say how a file ended (a line torn by the kill is left out)."""
    records = []
    path = out / STATE_FILE
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if "status" in record:
            records.append(record)
    return records


# A .doc (a fuzzer's, of POI's) whose report names 66 of its 6908 characters lost, which LibreOffice does not load:
# the tree's one result with a loss, which the report must show.
LOSSY_DOC = ROOT.parent / "shared" / "corpus" / "doc" / \
    "clusterfuzz-testcase-minimized-POIHWPFFuzzer-4892412469968896.doc"


@pytest.fixture(scope="module")
def tree(tmp_path_factory, legacy, variants):
    """``(root, {relative path: expected outcome})``: 7 legacy files in nested folders and a text file."""
    root = tmp_path_factory.mktemp("tree") / "archive"
    copies = {"letter.doc": legacy["doc"], "finance/numbers.xls": legacy["xls"],
              "finance/2019/q1/numbers.xls": legacy["xls"],  # the same bytes elsewhere: a result of its own
              "talks/deck.ppt": legacy["ppt"], "drafts/damaged.doc": LOSSY_DOC,
              "private/locked.doc": variants / "encrypted.doc"}
    for rel, source in copies.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, root / rel)
    (root / "scans").mkdir()
    (root / "scans" / "huge.xls").write_bytes(random.Random(39).randbytes(LIMIT + 1))
    (root / "notes").mkdir()
    (root / "notes" / "readme.txt").write_text("not an Office file\n")
    expected = {
        "letter.doc": ("SUCCEEDED", "letter.docx", "true", ""),
        "finance/numbers.xls": ("SUCCEEDED", "finance/numbers.xlsx", "true", ""),
        "finance/2019/q1/numbers.xls": ("SUCCEEDED", "finance/2019/q1/numbers.xlsx", "true", ""),
        "talks/deck.ppt": ("SUCCEEDED", "talks/deck.pptx", "true", ""),
        "drafts/damaged.doc": ("SUCCEEDED", "drafts/damaged.docx", "false", ""),
        "private/locked.doc": ("FAILED", "", "", "encrypted_document"),
        "scans/huge.xls": ("FAILED", "", "", "file_too_large"),
    }
    return root, expected


def command(root, out, *more):
    return [str(DOCSHIFT), "convert", str(root), "--out", str(out), "--report", str(out / "report.csv"), *more]


def environment(live, key):
    return {**os.environ, "DOCSHIFT_URL": live.base_url, "DOCSHIFT_API_KEY": key}


@pytest.fixture(scope="module")
def migrated(live, tree, tmp_path_factory):
    """The tree converted by a first run killed with SIGKILL part-way, then a second run to the end."""
    root, expected = tree
    out = tmp_path_factory.mktemp("migrated") / "out"
    key = live.register(f"tree-{random.randrange(10**9)}")
    env = environment(live, key)
    logs = out.parent
    with open(logs / "first.out", "wb") as stdout, open(logs / "first.err", "wb") as stderr:
        first = subprocess.Popen(command(root, out, "--parallel", "2"), env=env, stdout=stdout, stderr=stderr)
    try:
        # killed once a file is done and another is submitted but not done: both cases of a resume. The
        # client is stopped (SIGSTOP) before the state is read again, so it cannot finish the file in
        # flight between the look and the kill; if it did before the stop, it runs on and is looked at again.
        def resumable():
            done = state_records(out)
            return bool(done) and sum(map(len, tasks_of(live, key).values())) > len(done)

        deadline = time.monotonic() + 120
        killed = False
        while time.monotonic() < deadline and first.poll() is None:
            if resumable():
                first.send_signal(signal.SIGSTOP)
                if resumable():
                    first.send_signal(signal.SIGKILL)
                    killed = True
                    break
                first.send_signal(signal.SIGCONT)
            time.sleep(0.05)
        assert killed, (logs / "first.err").read_text()
        first.wait()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    time.sleep(1)  # a submission the kill cut off after its upload is still committed by the service
    at_kill = {"done": len(state_records(out)), "tasks": sum(map(len, tasks_of(live, key).values())),
               "results": sorted(str(p.relative_to(out)) for p in out.rglob("*.*x") if not p.name.endswith(".part"))}
    second = subprocess.run(command(root, out, "--parallel", "2"), env=env, capture_output=True, text=True,
                            timeout=600)
    return {"root": root, "out": out, "expected": expected, "key": key, "env": env, "at_kill": at_kill,
            "second": second}


def summary_counts(stdout):
    """The numbers of the summary line: {"legacy files": 7, "succeeded": 5, "done earlier": 2, ...}."""
    last = [line for line in stdout.splitlines() if re.search(r"\d+ legacy files?:", line)][-1]
    words = "legacy files?|succeeded|with losses|failed|expired|pending|skipped|done earlier|replayed|resubmitted"
    found = re.findall(rf"(\d+) ({words})", last)
    return {("legacy files" if word.startswith("legacy") else word): int(n) for n, word in found}


def test_a_killed_run_resumes_and_charges_each_success_once(live, migrated, capsys):
    out, expected, key, second = migrated["out"], migrated["expected"], migrated["key"], migrated["second"]
    at_kill = migrated["at_kill"]
    assert second.returncode == 1, second.stderr  # the protected file and the huge one did not convert
    assert 1 <= at_kill["done"] < 6 and at_kill["tasks"] > at_kill["done"], at_kill

    # every result at its path, whole, and nothing else under --out but the state file and the report
    import docx
    import openpyxl
    import pptx

    results = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    wanted = {result for _, result, _, _ in expected.values() if result}
    assert results == wanted | {STATE_FILE, "report.csv", "report.html"}, results
    assert "Word 97" in "\n".join(p.text for p in docx.Document(out / "letter.docx").paragraphs)
    for rel in ("finance/numbers.xlsx", "finance/2019/q1/numbers.xlsx"):
        book = openpyxl.load_workbook(out / rel)
        assert book.sheetnames == ["Alpha", "Beta"]
        book.close()
    assert len(pptx.Presentation(out / "talks/deck.pptx").slides) == 3
    assert len(docx.Document(out / "drafts/damaged.docx").paragraphs) > 10

    # each file the service took is one task, each success counted once, whatever the kill interrupted
    tasks = tasks_of(live, key)
    assert tasks == {"letter.doc": ["SUCCEEDED"], "numbers.xls": ["SUCCEEDED", "SUCCEEDED"],
                     "deck.ppt": ["SUCCEEDED"], "damaged.doc": ["SUCCEEDED"], "locked.doc": ["FAILED"]}
    assert usage(live, key)["included_used"] == 5
    # the second run took the finished files from the state file and re-attached to the others' tasks
    counts = summary_counts(second.stdout)
    assert [counts[k] for k in ("legacy files", "succeeded", "with losses", "failed", "skipped")] == [7, 5, 1, 2, 1]
    assert counts["done earlier"] == at_kill["done"]
    assert counts.get("replayed", 0) == at_kill["tasks"] - at_kill["done"] >= 1
    assert "huge.xls: file_too_large" in second.stderr and "not sent" in second.stderr
    assert "locked.doc: FAILED encrypted_document" in second.stderr
    assert migrated["key"] not in second.stdout + second.stderr + (out / STATE_FILE).read_text()
    print(json.dumps({"at_kill": at_kill, "second_run": counts}))  # shown with -s: the numbers measured


def test_the_report_has_one_right_row_per_legacy_file(migrated):
    root, out, expected = migrated["root"], migrated["out"], migrated["expected"]
    with open(out / "report.csv", newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert reader.fieldnames[:7] == ["source", "status", "result", "complete", "lost", "error", "detected_format"]
    assert sorted(row["source"] for row in rows) == sorted(str(root / rel) for rel in expected)
    formats = {"doc": "word-97", "xls": "excel-biff8", "ppt": "powerpoint-97"}
    for row in rows:
        rel = str(Path(row["source"]).relative_to(root))
        status, result, complete, error = expected[rel]
        assert (row["status"], row["complete"], row["error"]) == (status, complete, error), row
        assert row["result"] == (str(out / result) if result else "")
        if status == "SUCCEEDED":
            assert row["detected_format"] == formats[rel[-3:]], row
            assert bool(row["lost"]) == (complete == "false"), row
    damaged = next(row for row in rows if row["source"].endswith("damaged.doc"))
    assert "66 of 6908 characters" in damaged["lost"]
    huge = next(row for row in rows if row["source"].endswith("huge.xls"))
    assert huge["note"] == "not sent"


class Counting(BaseHTTPRequestHandler):
    """A front for the live service that passes every request on and keeps its method and path."""

    target = ""
    seen: ClassVar[list] = []

    def forward(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append((self.command, self.path))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        answer = requests.request(self.command, f"{self.target}{self.path}", data=body, headers=headers, timeout=30)
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


def test_a_finished_tree_is_not_sent_again(live, migrated, monkeypatch, capsys):
    out = migrated["out"]
    before = (out / "report.csv").read_text()
    Counting.target, Counting.seen = live.base_url, []
    front = ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    threading.Thread(target=front.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("DOCSHIFT_URL", f"http://127.0.0.1:{front.server_port}")
        monkeypatch.setenv("DOCSHIFT_API_KEY", migrated["key"])
        assert client.main(command(migrated["root"], out)[1:]) == 1
    finally:
        front.shutdown()
        front.server_close()
    assert [seen for seen in Counting.seen if seen[0] == "POST"] == []
    assert summary_counts(capsys.readouterr().out)["done earlier"] == 6  # the huge file is checked again, not sent
    assert (out / "report.csv").read_text() == before


def test_the_html_report_in_chromium(migrated):
    from PIL import Image
    from playwright.sync_api import sync_playwright

    page_path = migrated["out"] / "report.html"
    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1000, "height": 800})
        requested = []
        page.on("request", lambda request: requested.append(request.url))
        page.goto(page_path.as_uri())
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "client-report.png"), full_page=True)

        def cell(kind, outcome):
            return page.locator(f'#summary tr[data-kind="{kind}"] td[data-outcome="{outcome}"]').inner_text()

        assert page.title() == "docshift: conversion report"
        assert [cell("all", o) for o in ("converted", "losses", "failed", "expired", "total")] == \
            ["4", "1", "2", "0", "7"]
        assert [cell(kind, "total") for kind in ("doc", "xls", "ppt")] == ["3", "3", "1"]
        assert cell("doc", "losses") == "1" and cell("doc", "failed") == "1" and cell("xls", "failed") == "1"
        assert page.locator("#skipped").inner_text().startswith("1 other file skipped")

        bars = page.locator("#loss-chart rect.bar")
        assert bars.count() == 1 and bars.first.get_attribute("data-part") == "characters"
        box = bars.first.bounding_box()
        assert box["width"] > 100 and box["height"] > 10
        # the bar is painted: its colour fills the chart's picture
        chart = Image.open(io.BytesIO(page.locator("#loss-chart").screenshot())).convert("RGB")
        painted = {color: n for n, color in chart.getcolors(1 << 24)}.get((0xC2, 0x57, 0x1A), 0)
        assert painted > 0.8 * box["width"] * box["height"], painted

        look = page.locator("#look-table tbody tr")
        assert sorted(Path(look.nth(i).locator("td").first.inner_text()).name for i in range(look.count())) == \
            ["damaged.doc", "huge.xls", "locked.doc"]
        assert "encrypted_document" in page.locator("#look-table").inner_text()
        assert requested == [page_path.as_uri()]  # nothing fetched: no CDN, no font, no script
        browser.close()
    finally:
        playwright.stop()


def test_a_result_that_expired_before_download_is_submitted_again(live, legacy, tmp_path, monkeypatch, capsys):
    """An earlier run submitted the file and died; its result expired before anyone fetched it. The run
    now replays that task, finds it EXPIRED, submits the file again under a new key and says so."""
    key = live.register(f"expired-{random.randrange(10**9)}")
    root, out = tmp_path / "inbox", tmp_path / "out"
    root.mkdir()
    shutil.copyfile(legacy["doc"], root / "letter.doc")
    data = (root / "letter.doc").read_bytes()
    earlier = requests.post(f"{live.base_url}/v1/conversions", files={"file": ("letter.doc", data)}, timeout=30,
                            headers={"Authorization": f"Bearer {key}",
                                     "Idempotency-Key": idempotency_key("letter.doc", data)}).json()
    assert live.wait(key, earlier["task_id"])["status"] == "SUCCEEDED"
    conn = connection.connect(live.config().database)
    try:  # its retention is over: the service's view says EXPIRED from then on
        conn.execute("update conversions set result_expires_at = ? where id = ?",
                     ["2000-01-01T00:00:00.000000Z", earlier["task_id"]])
    finally:
        conn.close()
    assert live.wait_status(key, earlier["task_id"]) == "EXPIRED"

    monkeypatch.setenv("DOCSHIFT_URL", live.base_url)
    monkeypatch.setenv("DOCSHIFT_API_KEY", key)
    assert client.main(command(root, out)[1:]) == 0
    printed = capsys.readouterr().out
    assert summary_counts(printed)["resubmitted"] == 1
    with open(out / "report.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert (row["status"], row["result"], row["complete"]) == ("SUCCEEDED", str(out / "letter.docx"), "true")
    assert row["note"].startswith("resubmitted: the earlier result expired before it was downloaded")
    import docx
    assert "Word 97" in "\n".join(p.text for p in docx.Document(out / "letter.docx").paragraphs)
    assert len(tasks_of(live, key)["letter.doc"]) == 2 and usage(live, key)["included_used"] == 2

    # the resubmission is the file's outcome now: a later run sends nothing and still says how it went
    assert client.main(command(root, out)[1:]) == 0
    printed = capsys.readouterr().out
    counts = summary_counts(printed)
    assert counts["done earlier"] == 1 and "resubmitted" not in counts, counts  # not this run's resubmission
    assert "charged again" not in printed and "done earlier: not sent again" in printed
    assert len(tasks_of(live, key)["letter.doc"]) == 2
    with open(out / "report.csv", newline="") as f:
        assert next(csv.DictReader(f))["note"] == row["note"]

    # into another folder: the first task has expired, the resubmission replays, and nothing is charged again
    assert client.main(command(root, tmp_path / "elsewhere")[1:]) == 0
    counts = summary_counts(capsys.readouterr().out)
    assert counts["replayed"] == 1 and "resubmitted" not in counts, counts
    with open(tmp_path / "elsewhere" / "report.csv", newline="") as f:
        assert next(csv.DictReader(f))["note"].startswith("replayed:")
    assert len(tasks_of(live, key)["letter.doc"]) == 2 and usage(live, key)["included_used"] == 2


def test_a_file_whose_task_failed_while_the_account_was_inactive_is_sent_again(live, legacy, tmp_path, monkeypatch,
                                                                               capsys):
    """An earlier run submitted the file; the account was deactivated before the task ran (FAILED
    subscription_inactive, unbilled) and activated again. The same key would replay that failure for a day: the
    run now submits the file under a new key, converts it, and says why."""
    from docshift.storage import accounts

    key = live.register(f"inactive-{random.randrange(10**9)}")
    root, out = tmp_path / "inbox", tmp_path / "out"
    root.mkdir()
    shutil.copyfile(legacy["doc"], root / "letter.doc")
    data = (root / "letter.doc").read_bytes()
    conn = connection.connect(live.config().database)
    stop_process_group(live.processes.pop("worker"))  # the task waits: nothing converts it before the deactivation
    try:
        earlier = requests.post(f"{live.base_url}/v1/conversions", files={"file": ("letter.doc", data)}, timeout=30,
                                headers={"Authorization": f"Bearer {key}",
                                         "Idempotency-Key": idempotency_key("letter.doc", data)}).json()
        account_id = accounts.account_for_key(conn, keys.digest(key))["id"]
        accounts.set_account(conn, account_id, status="inactive")  # as marketplace deactivate, then activate
        accounts.set_account(conn, account_id, status="active")
    finally:
        conn.close()
        live.start_worker()
    assert live.wait(key, earlier["task_id"])["error"]["code"] == "subscription_inactive"

    monkeypatch.setenv("DOCSHIFT_URL", live.base_url)
    monkeypatch.setenv("DOCSHIFT_API_KEY", key)
    assert client.main(command(root, out)[1:]) == 0
    capsys.readouterr()
    with open(out / "report.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert (row["status"], row["result"]) == ("SUCCEEDED", str(out / "letter.docx"))
    assert row["note"].startswith("resubmitted: the earlier task failed subscription_inactive")
    assert len(tasks_of(live, key)["letter.doc"]) == 2 and usage(live, key)["included_used"] == 1


def test_two_sources_the_service_names_alike_get_two_results(live, legacy, tmp_path, monkeypatch, capsys):
    """The service keeps ' report.doc' as 'report.doc': each result is named after its own source, not after the
    service's result_filename, and neither writes over the other."""
    key = live.register(f"alike-{random.randrange(10**9)}")
    root, out = tmp_path / "inbox", tmp_path / "out"
    root.mkdir()
    for name in (" report.doc", "report.doc", "tab\tname.doc"):  # the first two are one name to the service
        shutil.copyfile(legacy["doc"], root / name)
    monkeypatch.setenv("DOCSHIFT_URL", live.base_url)
    monkeypatch.setenv("DOCSHIFT_API_KEY", key)
    client.main(command(root, out)[1:])
    capsys.readouterr()
    with open(out / "report.csv", newline="") as f:
        results = {row["source"]: row["result"] for row in csv.DictReader(f)}
    assert results == {str(root / name): str(out / f"{name}x") for name in (" report.doc", "report.doc",
                                                                          "tab\tname.doc")}
    assert all(Path(result).is_file() for result in results.values())

    # a report that cannot be written (here a folder holds its name) is said in one line, and the exit is 1
    (out / "taken.csv").mkdir()
    assert client.main(["convert", str(root), "--out", str(out), "--report", str(out / "taken.csv")]) == 1
    assert "cannot write the report" in capsys.readouterr().err


def test_a_report_named_html_or_a_malformed_url_is_said_before_anything_is_sent(legacy, tmp_path, monkeypatch, capsys):
    """No service runs here: each of these stops the run before its first request, with exit 2 and no traceback.
    (A folder that cannot be written stops it after the key is checked, before the first upload.)"""
    root = tmp_path / "inbox"
    root.mkdir()
    shutil.copyfile(legacy["doc"], root / "a.doc")
    monkeypatch.setenv("DOCSHIFT_API_KEY", "dsk_" + "x" * 40)
    monkeypatch.setenv("DOCSHIFT_URL", "http://127.0.0.1:9")
    cases = {
        "--report names the CSV file": ["convert", str(root), "--out", str(tmp_path / "o1"),
                                        "--report", str(tmp_path / "o1" / "report.html")],
    }
    for said, argv in cases.items():
        assert client.main(argv) == 2, said
        assert said in capsys.readouterr().err
    for task_id in ("", "tsk_123", "../usage"):
        assert client.main(["task", task_id]) == 2, task_id
        assert "is no task id" in capsys.readouterr().err
    for url in ("http://127.0.0.1:99999", "http://", "http://exa mple.com"):
        monkeypatch.setenv("DOCSHIFT_URL", url)
        assert client.main(["usage"]) == 2, url
        assert "DOCSHIFT_URL must be" in capsys.readouterr().err


def read_all(fd, into):
    """Everything a pty's master side gives until the other side is closed."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO once the child and every holder of the terminal are gone
            return
        if not chunk:
            return
        into.append(chunk)


def test_ctrl_c_on_a_terminal_stops_cleanly_and_says_how_to_resume(live, legacy, tmp_path):
    key = live.register(f"ctrl-c-{random.randrange(10**9)}")
    root, out = tmp_path / "inbox", tmp_path / "out"
    for rel, kind in (("a/letter.doc", "doc"), ("b/numbers.xls", "xls"), ("b/c/deck.ppt", "ppt")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(legacy[kind], root / rel)
    env = {**environment(live, key), "TERM": "xterm", "COLUMNS": "120"}
    master, terminal = pty.openpty()
    shown = []
    reader = threading.Thread(target=read_all, args=(master, shown), daemon=True)
    with open(tmp_path / "stderr", "wb") as stderr:
        run = subprocess.Popen(command(root, out, "--parallel", "1"), env=env, stdin=terminal, stdout=terminal,
                               stderr=stderr)
    os.close(terminal)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while not state_records(out) and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.05)
        assert run.poll() is None, (tmp_path / "stderr").read_text()
        run.send_signal(signal.SIGINT)  # what Ctrl-C sends
        assert run.wait(30) == 130
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        reader.join(10)
        os.close(master)
    screen = b"".join(shown).decode(errors="replace")
    # rich's bar: its label, done/total, failures, rate and ETA
    assert "converting" in screen and "1/3" in screen and "0 failed" in screen, screen
    assert re.search(r"[\d.]+ files/(s|min), ETA \d+:\d\d:\d\d", screen), screen
    said = (tmp_path / "stderr").read_text()
    assert "interrupted; what is done is kept. To resume, run the same command again: docshift convert " in said
    assert str(root) in said and "Traceback" not in said and key not in said + screen
    # nothing half done: no partial download, and every result there is one the state file records
    done = state_records(out)
    assert not list(out.rglob("*.part"))
    assert {str(p.relative_to(out)) for p in out.rglob("*.*x")} == {r["result"] for r in done if "result" in r}
    assert 1 <= len(done) < 3

    again = subprocess.run(command(root, out), env=environment(live, key), capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr
    assert {str(p.relative_to(out)) for p in out.rglob("*.*x")} == {"a/letter.docx", "b/numbers.xlsx",
                                                                    "b/c/deck.pptx"}
    assert sorted(map(len, tasks_of(live, key).values())) == [1, 1, 1] and usage(live, key)["included_used"] == 3


# without the service: what the command finds, what it records, what its page shows ------------------

def test_a_tree_is_walked_in_order_without_its_own_output(tmp_path):
    from docshift.client.tree import walk

    root = tmp_path / "archive"
    for rel in ("b/z.XLS", "b/a.doc", "a.ppt", "notes.txt", "b/c/readme.md", "out/old.doc", "out/old.docx"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x")
    found = walk([str(root), str(root / "a.ppt")], root / "out")  # a file given twice is one file
    assert [(str(s.rel), s.kind) for s in found.sources] == [("a.ppt", "ppt"), ("b/a.doc", "doc"), ("b/z.XLS", "xls")]
    assert found.skipped == 2 and found.missing == []
    assert found.sources[1].shown == str(root / "b" / "a.doc")


def test_a_link_is_a_file_of_its_own_and_a_broken_one_is_a_source_that_cannot_be_read(tmp_path):
    """Every legacy name of the tree gets its row: a link to a file of the tree has its own result beside it,
    and a broken or looping link is reported unreadable, not left out."""
    from docshift.client.tree import walk

    root = tmp_path / "archive"
    (root / "a").mkdir(parents=True)
    (root / "a" / "real.xls").write_bytes(b"x")
    (root / "0link.xls").symlink_to(root / "a" / "real.xls")
    (root / "broken.doc").symlink_to(root / "nowhere.doc")
    (root / "loop.ppt").symlink_to(root / "loop.ppt")
    found = walk([str(root)], tmp_path / "out")
    assert [str(s.rel) for s in found.sources] == ["0link.xls", "broken.doc", "loop.ppt", "a/real.xls"]
    assert found.unreadable == []


def test_a_line_a_full_disk_tore_does_not_take_the_next_runs_first_line_with_it(tmp_path):
    from docshift.client.tree import STATE_FILE, State

    (tmp_path / STATE_FILE).write_text('{"rel":"a.doc","sha256":"1","status":"SUCCEEDED"}\n{"rel":"b.doc","sha2')
    state = State(tmp_path)
    state.put({"rel": "c.doc", "sha256": "3", "status": "FAILED"})
    state.close()
    again = State(tmp_path)
    assert again.get(PurePosixPath("a.doc"), "1") and again.get(PurePosixPath("c.doc"), "3")


def test_the_state_file_keeps_whole_lines_only_and_no_key(tmp_path):
    from docshift.client.tree import State

    state = State(tmp_path)
    state.put({"rel": "a/b.doc", "sha256": "1" * 64, "generation": 0, "status": "SUCCEEDED", "result": "a/b.docx"})
    state.put({"rel": "c.xls", "sha256": "2" * 64, "generation": 1})
    state.close()
    with open(tmp_path / STATE_FILE, "a") as f:
        f.write('{"rel": "c.xls", "sha256": "2222')  # what a kill in the middle of a write could leave
    assert oct((tmp_path / STATE_FILE).stat().st_mode & 0o777) == "0o600"
    again = State(tmp_path)
    assert again.get(PurePosixPath("a/b.doc"), "1" * 64)["result"] == "a/b.docx"
    assert again.get(PurePosixPath("a/b.doc"), "3" * 64) is None  # the file changed since: start afresh
    assert again.get(PurePosixPath("c.xls"), "2" * 64) == {"rel": "c.xls", "sha256": "2" * 64, "generation": 1}


def test_the_report_page_escapes_what_file_names_hold(tmp_path):
    from docshift.client.report import Row, render

    hostile = '<img src=x onerror="alert(1)">.doc'
    page = render([Row(str(tmp_path / hostile), "doc", status="FAILED", error="encrypted_document",
                       message="<b>protected</b>")], 0, tmp_path)
    assert "<img" not in page and "<b>" not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page


def test_a_service_lost_mid_run_is_said_once_and_the_run_resumes(live, legacy, tmp_path, monkeypatch, capsys):
    key = live.register(f"lost-{random.randrange(10**9)}")
    root, out = tmp_path / "inbox", tmp_path / "out"
    root.mkdir()
    for kind in ("doc", "xls", "ppt"):
        shutil.copyfile(legacy[kind], root / legacy[kind].name)
    Counting.target, Counting.seen = live.base_url, []
    front = ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    threading.Thread(target=front.serve_forever, daemon=True).start()

    def lose_the_service():  # once the first file is done: the front goes, as a service or network would
        deadline = time.monotonic() + 120
        while not state_records(out) and time.monotonic() < deadline:
            time.sleep(0.05)
        front.shutdown()
        front.server_close()

    loser = threading.Thread(target=lose_the_service)
    loser.start()
    monkeypatch.setattr("docshift.client.http.BACKOFF", 0.01)
    monkeypatch.setenv("DOCSHIFT_URL", f"http://127.0.0.1:{front.server_port}")
    monkeypatch.setenv("DOCSHIFT_API_KEY", key)
    try:
        assert client.main(command(root, out, "--parallel", "1")[1:]) == 1
    finally:
        loser.join()
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    assert err[0].startswith("docshift: unreachable: Cannot reach 127.0.0.1:") and "DOCSHIFT_URL" in err[0]
    assert err[1].startswith("docshift: stopped; what is done is kept. To resume, run the same command again: ")

    monkeypatch.setenv("DOCSHIFT_URL", live.base_url)
    assert client.main(command(root, out)[1:]) == 0
    assert sorted(map(len, tasks_of(live, key).values())) == [1, 1, 1] and usage(live, key)["included_used"] == 3


def test_a_file_in_the_way_of_a_result_is_not_overwritten_unless_asked(live, legacy, tmp_path, monkeypatch, capsys):
    """The user's own file where a result would go, or another folder's result of a file of the same path, is kept:
    its source is not sent (not charged) and fails ``result_exists``; a run's own results are its to replace, and
    ``--overwrite`` replaces the others."""
    key = live.register(f"in-the-way-{random.randrange(10**9)}")
    monkeypatch.setenv("DOCSHIFT_URL", live.base_url)
    monkeypatch.setenv("DOCSHIFT_API_KEY", key)
    first, second, out = tmp_path / "first", tmp_path / "second", tmp_path / "out"
    for root, text in ((first, legacy["doc"]), (second, LOSSY_DOC)):  # two texts of one name
        root.mkdir()
        shutil.copyfile(text, root / "report.doc")
    shutil.copyfile(legacy["xls"], first / "mine.xls")
    out.mkdir()
    (out / "mine.xlsx").write_bytes(b"the user's own workbook")

    def used():
        return requests.get(f"{live.base_url}/v1/account/usage", headers={"Authorization": f"Bearer {key}"},
                            timeout=30).json()["included_used"]

    assert client.main(["convert", str(first), "--out", str(out)]) == 1
    said = capsys.readouterr()
    assert "result_exists" in said.out + said.err and (out / "mine.xlsx").read_bytes() == b"the user's own workbook"
    assert used() == 1  # report.doc only: mine.xls was not sent
    kept = (out / "report.docx").read_bytes()

    assert client.main(["convert", str(second), "--out", str(out)]) == 1  # another folder's report.doc
    said = capsys.readouterr()
    assert "result_exists" in said.out + said.err and (out / "report.docx").read_bytes() == kept
    assert used() == 1

    assert client.main(["convert", str(first / "report.doc"), "--out", str(out)]) == 0  # its own: done earlier
    assert summary_counts(capsys.readouterr().out)["done earlier"] == 1
    shutil.copyfile(LOSSY_DOC, first / "report.doc")  # edited: converted again, over its own earlier result
    assert client.main(["convert", str(first / "report.doc"), "--out", str(out)]) == 0
    capsys.readouterr()
    assert client.main(["convert", str(first / "mine.xls"), "--out", str(out), "--overwrite"]) == 0
    assert (out / "mine.xlsx").read_bytes()[:2] == b"PK"


def test_output_closed_by_its_reader_stops_the_run_in_one_line(live, legacy, tmp_path):
    """`docshift convert ... | head -1`: the run stops at its next line, says so in one line, no traceback."""
    key = live.register(f"piped-{random.randrange(10**9)}")
    root = tmp_path / "inbox"
    root.mkdir()
    for n in range(6):
        shutil.copyfile(legacy["doc"], root / f"letter-{n}.doc")
    process = subprocess.Popen([str(DOCSHIFT), "convert", str(root), "--out", str(tmp_path / "out"), "--parallel", "1"],
                               env=environment(live, key), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = process.stdout.readline()
    process.stdout.close()  # as `head -1` does
    with process.stderr:
        stderr = process.stderr.read().decode()
    assert process.wait(120) == 1
    assert b"letter-" in first and "Traceback" not in stderr, stderr
    assert "Run the same command again to resume" in stderr, stderr


def test_the_rate_reads_as_a_number_of_files():
    """A resumed run, whose files are mostly done already, counts them at hundreds a second: not ``1.2e+02``."""
    from docshift.client.progress import rate_text

    assert rate_text(123.4) == "123 files/s"
    assert rate_text(4321.0) == "4321 files/s"
    assert rate_text(3.44) == "3.4 files/s"
    assert rate_text(0.25) == "0.25 files/s"
    assert rate_text(0.04) == "2.4 files/min"
    assert not any("e" in rate_text(rate).split()[0] for rate in (1e-4, 0.099, 9.99, 99.9, 1e6))
