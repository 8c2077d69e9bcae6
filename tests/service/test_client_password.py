"""`docshift convert --password-file FILE [--protection keep|remove]` and ``Client(...).convert(password=...)``
against the live service: a tree with a protected .doc and .xls (LibreOffice saved them with a password) fails
``encrypted_document`` without one and says how to give it; with the password file, a resumed run sends them again
and they convert, their results opening only with the password; ``remove`` gives results that open without one; a
wrong password says so. The password is never in the process list, the state file, the report or the output."""

import io
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import docx
import msoffcrypto
import openpyxl
import pytest

from docshift.client import Client
from docshift.client.passwords import load
from docshift.client.tree import STATE_FILE

DOCSHIFT = Path(sys.executable).parent / "docshift"
PASSWORD = "secret"  # the variants' (tests/make_variants.py)
READERS = {".docx": docx.Document, ".xlsx": openpyxl.load_workbook}


@pytest.fixture
def tree(tmp_path, legacy, variants):
    root = tmp_path / "archive"
    for rel, source in {"letter.doc": legacy["doc"], "private/locked.doc": variants / "encrypted.doc",
                        "finance/locked.xls": variants / "encrypted.xls"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, root / rel)
    return root


def run(live, key, root, out, *more, env=None):
    """The command run to its end, watched: (completed process, every command line it showed while it ran)."""
    argv = [str(DOCSHIFT), "convert", str(root), "--out", str(out), "--report", str(out / "report.csv"), *more]
    environment = {name: value for name, value in os.environ.items() if name != "DOCSHIFT_DOCUMENT_PASSWORD"}
    environment.update({"DOCSHIFT_URL": live.base_url, "DOCSHIFT_API_KEY": key, **(env or {})})
    process = subprocess.Popen(argv, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    shown = set()
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline:
        try:
            shown.add(Path(f"/proc/{process.pid}/cmdline").read_bytes().decode(errors="replace"))
            shown.discard("")  # the process as it exits
        except OSError:
            pass
        time.sleep(0.05)
    stdout, stderr = process.communicate(timeout=10)
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr), shown


def opens_only_with(path, password):
    """The protected result decrypted with ``password`` (another one refused), read by python-docx/openpyxl."""
    with open(path, "rb") as f:
        office = msoffcrypto.OfficeFile(f)
        assert office.is_encrypted()
        with pytest.raises(msoffcrypto.exceptions.InvalidKeyError):
            office.load_key(password="not the password", verify_password=True)
        office.load_key(password=password, verify_password=True)
        plain = io.BytesIO()
        office.decrypt(plain)
    return READERS[path.suffix](plain)


def written(out):
    """Everything the run wrote under --out but the results: the state file and the report."""
    return "".join((out / name).read_text() for name in (STATE_FILE, "report.csv", "report.html"))


def test_a_tree_with_protected_files_converts_with_a_password_file(live, tree, tmp_path):
    key = live.register(f"passwords-{random.randrange(10**9)}")
    out = tmp_path / "out"
    first, _ = run(live, key, tree, out)
    assert first.returncode == 1, first.stderr
    assert "locked.doc: FAILED encrypted_document" in first.stderr and "--password-file" in first.stderr
    assert (out / "letter.docx").exists() and not (out / "private/locked.docx").exists()

    passwords = tmp_path / "passwords.tsv"
    passwords.write_text(f"# path under the folder, a tab, its password\nprivate/locked.doc\t{PASSWORD}\n"
                         f"*\t{PASSWORD}\n")
    second, shown = run(live, key, tree, out, "--password-file", str(passwords))
    assert second.returncode == 0, second.stderr
    assert "1 done earlier" in second.stdout  # the letter; the protected files, sent again, converted
    assert "docshift" in "\n".join(p.text for p in opens_only_with(out / "private/locked.docx", PASSWORD).paragraphs)
    assert opens_only_with(out / "finance/locked.xlsx", PASSWORD).sheetnames
    for said in (second.stdout, second.stderr, written(out), *shown):
        assert PASSWORD not in said
    assert shown and all(str(passwords) in line for line in shown)  # the process list showed the file's name

    third, _ = run(live, key, tree, out, "--password-file", str(passwords))  # resumed again: nothing is sent
    assert third.returncode == 0 and "3 done earlier" in third.stdout, third.stdout + third.stderr
    # asked again for results without the password: the two whose results kept it are converted again, into place
    unprotected, _ = run(live, key, tree, out, "--password-file", str(passwords), "--protection", "remove")
    assert unprotected.returncode == 0 and "1 done earlier" in unprotected.stdout, unprotected.stdout
    assert docx.Document(out / "private/locked.docx").paragraphs
    assert openpyxl.load_workbook(out / "finance/locked.xlsx").sheetnames

    plain = tmp_path / "plain"
    removed, _ = run(live, key, tree, plain, "--protection", "remove", env={"DOCSHIFT_DOCUMENT_PASSWORD": PASSWORD})
    assert removed.returncode == 0, removed.stderr
    assert docx.Document(plain / "private/locked.docx").paragraphs
    assert openpyxl.load_workbook(plain / "finance/locked.xlsx").sheetnames
    assert PASSWORD not in removed.stdout + removed.stderr + written(plain)

    wrong, _ = run(live, key, tree, tmp_path / "wrong", env={"DOCSHIFT_DOCUMENT_PASSWORD": "not the password"})
    assert wrong.returncode == 1
    assert "locked.xls: FAILED wrong_password" in wrong.stderr and "check --password-file" in wrong.stderr
    assert "not the password" not in wrong.stderr + written(tmp_path / "wrong")


def test_the_library_sends_a_password_and_replays_only_with_the_same(live, variants, tmp_path):
    client = Client(live.base_url, live.register(f"library-{random.randrange(10**9)}"))
    source = variants / "encrypted.xls"
    done = client.convert(source, tmp_path / "a", password=PASSWORD, protection="remove")
    assert done.task["status"] == "SUCCEEDED" and not done.replayed
    assert openpyxl.load_workbook(done.path).sheetnames
    again = client.convert(source, tmp_path / "b", password=PASSWORD, protection="remove")
    assert again.replayed and again.task["task_id"] == done.task["task_id"]
    kept = client.convert(source, tmp_path / "c", password=PASSWORD)  # another option: another task
    assert not kept.replayed and opens_only_with(kept.path, PASSWORD).sheetnames
    wrong = client.convert(source, tmp_path / "d", password="not the password")
    assert (wrong.task["status"], wrong.task["error"]["code"]) == ("FAILED", "wrong_password")


def test_a_password_file_names_a_bad_line_without_its_content(tmp_path, monkeypatch):
    monkeypatch.delenv("DOCSHIFT_DOCUMENT_PASSWORD", raising=False)
    path = tmp_path / "passwords.tsv"
    path.write_text("a/b.doc\tfirst pass\r\n\n*\tevery\tfile\nc.xls hunter2\n")
    with pytest.raises(ValueError, match=r"line 4: not 'relative/path<TAB>password'") as refused:
        load(str(path))
    assert "hunter2" not in str(refused.value)
    path.write_text("a/b.doc\tfirst pass\r\n*\tevery\tfile\n")
    passwords = load(str(path))
    assert passwords.of(Path("a/b.doc")) == "first pass" and passwords.of(Path("other.xls")) == "every\tfile"
    assert "first" not in repr(passwords)
    monkeypatch.setenv("DOCSHIFT_DOCUMENT_PASSWORD", "from the environment")
    assert load(None).of(Path("x.doc")) == "from the environment"


@pytest.mark.parametrize("password", [" hunter2", "hunter2\t", "hun\x01ter2", "hun\x7fter2"])
def test_a_password_no_header_can_carry_is_refused_without_showing_it(tmp_path, monkeypatch, password):
    """HTTP drops the spaces and tabs around a header's value, and a value is one line: sent, such a password
    would not be the one that opens the file, and requests' refusal would print it. It is refused before."""
    monkeypatch.delenv("DOCSHIFT_DOCUMENT_PASSWORD", raising=False)
    path = tmp_path / "passwords.tsv"
    path.write_text(f"a.doc\t{password}\n", newline="")
    with pytest.raises(ValueError, match="line 1: a password that begins or ends") as refused:
        load(str(path))
    assert "hunter2" not in str(refused.value) and "hun" not in str(refused.value)
    monkeypatch.setenv("DOCSHIFT_DOCUMENT_PASSWORD", password)
    with pytest.raises(ValueError, match="DOCSHIFT_DOCUMENT_PASSWORD: a password") as refused:
        load(None)
    assert "hun" not in str(refused.value)


def test_a_password_line_naming_no_file_of_the_run_is_said(live, tree, tmp_path):
    """A line that gives the path as the run shows it (under the folder's parent), not under the folder converted,
    matches nothing: the run says so at its start, naming the path, never the password."""
    key = live.register(f"passwords-unmatched-{random.randrange(10**9)}")
    passwords = tmp_path / "passwords.tsv"
    passwords.write_text(f"archive/private/locked.doc\t{PASSWORD}\n")
    done, _ = run(live, key, tree, tmp_path / "out", "--password-file", str(passwords))
    assert done.returncode == 1
    assert "names archive/private/locked.doc, which is no file of this run" in done.stderr, done.stderr
    assert "private/locked.doc: FAILED encrypted_document" in done.stderr
    assert PASSWORD not in done.stdout + done.stderr
