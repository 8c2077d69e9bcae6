"""Hostile input never gets a 5xx and never stops a worker.

Fuzzing (hypothesis) of the multipart submission path on the in-process app and of
``precheck.check``, seeded from ``tests/seeds/`` (hand-made inputs written by
``tests/seeds/generate.py``), and plain tests against the real gunicorn + huey
service: huge headers, absurd task ids, wrong content types, broken bodies,
malformed OLE files through a real worker.

``DOCSHIFT_FUZZ_EXAMPLES=5000 .venv/bin/pytest tests/service/test_hostile_input.py`` fuzzes longer.
"""

import importlib.util
import json
import os
import random
import signal
import socket
import tempfile
import unicodedata
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
import requests
from conftest import ROOT, input_stored, post_file, read_until_closed
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from docshift.engine import precheck
from docshift.errors import ConversionFailed

SEEDS_DIR = ROOT / "tests" / "seeds"
_spec = importlib.util.spec_from_file_location("docshift_test_seeds", SEEDS_DIR / "generate.py")
seeds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(seeds)

EXAMPLES = int(os.environ.get("DOCSHIFT_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.data_too_large,
                                       HealthCheck.too_slow])
PRECHECK_SECONDS = 5  # one pre-check of a few KiB takes milliseconds; more is a hang
PRECHECK_CODES = {"encrypted_document"}
EXTENSIONS = (".doc", ".xls", ".ppt")
TASK_ERROR_CODES = {"unsupported_content", "encrypted_document", "conversion_failed", "conversion_timeout",
                    "output_invalid", "subscription_inactive"}


def outcome(text):
    """Count an outcome in hypothesis's statistics (``--hypothesis-show-statistics``)."""
    if currently_in_test_context():
        event(text)


def seed(name):
    return seeds.load(name)


OLE_SEEDS = sorted(name for name in seeds.SEEDS if name.startswith("ole_"))
OTHER_SEEDS = sorted(name for name in seeds.SEEDS if name.split("_")[0] in ("rtf", "zip", "html"))
MULTIPART_SEEDS = sorted(name for name in seeds.SEEDS if name.startswith("multipart_"))


# the seeds ----------------------------------------------------------------------------

def test_committed_seeds_are_what_the_generator_makes():
    committed = sorted(path.stem for path in SEEDS_DIR.glob("*.hex"))
    assert committed == sorted(seeds.SEEDS), "run .venv/bin/python tests/seeds/generate.py"
    for name, data in seeds.SEEDS.items():
        assert seed(name) == data, f"{name}.hex is stale: run .venv/bin/python tests/seeds/generate.py"


# what the pre-check says of each seed (under any extension: it only looks for encryption). It
# refuses only what is certainly password-protected; everything else, damaged or foreign, goes on to
# LibreOffice, which decides. None: "whatever it says, as long as it is an answer".
SEED_OUTCOMES = {
    "ole_doc_fencrypted": "encrypted_document",
    "ole_encrypted_package": "encrypted_document",
    "ole_truncated": None,
    "ole_fat_loop": None,
    "ole_bad_sector_shift": None,
}
# ... and whether, after LibreOffice loaded nothing, it calls the seed password-protected
SEED_ENCRYPTED = {"ole_doc_fencrypted", "ole_encrypted_package"}


class Hang(BaseException):
    """Raised by the alarm: a BaseException, so precheck's ``except Exception`` cannot swallow it."""


@contextmanager
def time_bound(seconds):
    def expired(signum, frame):
        raise Hang(f"precheck.check ran longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def precheck_outcome(data, kind):
    """``"accepted"`` or the ConversionFailed code; any other exception or a hang fails the test.
    The after-LibreOffice question (``encrypted``) must answer a bool, in time, too."""
    with tempfile.TemporaryDirectory(prefix="precheck-") as tmp:
        path = Path(tmp) / f"input.{kind}"
        path.write_bytes(data)
        with time_bound(PRECHECK_SECONDS):
            assert precheck.encrypted(path) in (True, False)
        try:
            with time_bound(PRECHECK_SECONDS):
                precheck.check(path)
            outcome("accepted")
        except ConversionFailed as failure:
            assert failure.code in PRECHECK_CODES, failure.code
            assert failure.message and "Traceback" not in failure.message
            outcome(failure.code)
            return failure.code
    return "accepted"


@pytest.mark.parametrize("kind", ["doc", "xls", "ppt"])
@pytest.mark.parametrize("name", OLE_SEEDS + OTHER_SEEDS)
def test_each_seed_has_a_precheck_answer(name, kind):
    answer = precheck_outcome(seed(name), kind)
    expected = SEED_OUTCOMES.get(name, "accepted")
    if expected is not None:
        assert answer == expected


@pytest.mark.parametrize("name", OLE_SEEDS + OTHER_SEEDS)
def test_each_seed_has_an_encryption_answer(name, tmp_path):
    path = tmp_path / "input.doc"
    path.write_bytes(seed(name))
    with time_bound(PRECHECK_SECONDS):
        assert precheck.encrypted(path) == (name in SEED_ENCRYPTED)


# precheck.check under fuzzing ------------------------------------------------------------

KINDS = st.sampled_from(["doc", "xls", "ppt"])
INTERESTING_WORDS = [0, 1, 2, 3, 0x7F, 0xFF, 0x1000, 0xFFFF, 0x7FFFFFFF, 0x80000000,
                     0xFFFFFFFA, 0xFFFFFFFC, 0xFFFFFFFD, 0xFFFFFFFE, 0xFFFFFFFF]


@st.composite
def mutations(draw, original):
    """``original`` with 1-8 byte flips, overwrites, 32-bit word plants, insertions, deletions
    or a truncation; positions favour the OLE header, FAT and directory (the first 2 KiB)."""
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 8))):
        if not data:
            break
        span = len(data) if draw(st.booleans()) else min(len(data), 2048)
        at = draw(st.integers(0, span - 1))
        op = draw(st.sampled_from(["flip", "byte", "word", "insert", "delete", "truncate"]))
        if op == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "byte":
            data[at] = draw(st.integers(0, 255))
        elif op == "word":
            at -= at % 4
            word = draw(st.sampled_from(INTERESTING_WORDS) | st.integers(0, 0xFFFFFFFF))
            data[at:at + 4] = word.to_bytes(4, "little")
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=64))
        elif op == "delete":
            del data[at:at + draw(st.integers(1, 64))]
        else:
            del data[at:]
    return bytes(data)


def seed_mutations():
    return st.sampled_from(OLE_SEEDS).map(seed).flatmap(mutations)


@FUZZ
@given(data=st.binary(max_size=4096), kind=KINDS)
@example(data=b"", kind="doc")
@example(data=seeds.MAGIC, kind="xls")
@example(data=seeds.MAGIC + b"\0" * 1528, kind="ppt")
@example(data=seeds.MAGIC + b"\xff" * 4088, kind="doc")
def test_precheck_random_bytes(data, kind):
    precheck_outcome(data, kind)


@FUZZ
@given(data=st.binary(min_size=1528, max_size=4096), kind=KINDS)
def test_precheck_random_bytes_behind_the_ole_magic(data, kind):
    """Past ``isOleFile``: olefile has to parse a header and sectors of noise."""
    precheck_outcome(seeds.MAGIC + data, kind)


@FUZZ
@given(data=seed_mutations(), kind=KINDS)
def test_precheck_mutated_seed_ole_files(data, kind):
    precheck_outcome(data, kind)


@FUZZ
@given(which=KINDS, kind=KINDS, choice=st.data())
def test_precheck_mutated_legacy_files(legacy, which, kind, choice):
    """Mutations of the real LibreOffice-made .doc/.xls/.ppt of the ``legacy`` fixture."""
    precheck_outcome(choice.draw(mutations(legacy[which].read_bytes())), kind)


# the multipart submission path under fuzzing --------------------------------------------

def stored_task(app, task_id):
    from docshift.storage import tasks
    from docshift.web.context import get_db, get_store

    with app.app_context():
        return tasks.get_task(get_db(), task_id), input_stored(get_store(), task_id)


def hidden_or_reordering(char):
    """A control character, a lone surrogate, or one of Unicode's Bidi_Control marks, which reorder what a name shows
    (a zero-width joiner is none of these: it is part of how an emoji or a Persian word is spelled)."""
    return unicodedata.category(char) in ("Cc", "Cs") or unicodedata.bidirectional(char) in (
        "LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI") or char in "\u061c\u200e\u200f"


def assert_sound(app, response):
    """Never a 5xx; an error is problem+json with its code; a 202 is a committed, stored task
    whose name has no path and no control characters."""
    text = response.get_data(as_text=True)
    assert response.status_code < 500, text
    if response.status_code >= 400:
        assert response.mimetype == "application/problem+json", text
        body = response.get_json()
        assert body["status"] == response.status_code and body["code"], body
        assert "Traceback" not in body["detail"]
        outcome(f"{response.status_code} {body['code']}")
        return body["code"]
    assert response.status_code == 202, text
    body = response.get_json()
    row, stored = stored_task(app, body["task_id"])
    assert row is not None, f"202 without a task row: {body}"
    assert stored, f"202 without a stored input: {body}"
    assert response.headers["Location"].endswith(f"/v1/conversions/{row.id}")
    name = row.source_filename
    assert name and "/" not in name and "\\" not in name, repr(name)
    assert not any(hidden_or_reordering(c) for c in name), repr(name)
    assert name.lower().endswith(EXTENSIONS), repr(name)
    assert len(name) <= 255
    outcome("202 accepted")
    return "accepted"


# werkzeug's multipart parser drops the spooled file of a part it was writing when the body
# turns out broken (a ValueError it swallows): the file is only closed by its finalizer, which
# warns. Nothing leaks in CPython (reference counting finalizes it at once); see the report.
@pytest.fixture(autouse=True)
def no_cap(request):
    """The fuzz tests submit hundreds of files from one account; the cap on unfinished tasks
    has tests of its own (test_scheduling.py)."""
    if "app" in request.fixturenames:
        app = request.getfixturevalue("app")
        app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], max_pending_tasks=10**6)


SPOOLED_FILE_FINALIZED = pytest.mark.filterwarnings(
    "ignore:Unclosed file <tempfile.SpooledTemporaryFile:ResourceWarning")


def post_raw(client, key, body, content_type, **headers):
    return client.post("/v1/conversions", data=body, content_type=content_type,
                       headers={"Authorization": f"Bearer {key}", **headers})


HEADER_TEXT = st.characters(codec="latin-1", exclude_characters="\r\n")
BOUNDARIES = (st.sampled_from(["b", "----WebKitFormBoundary7MA4YWxkTrZu0gW", "a" * 70, "a" * 71, "x" * 5000,
                               '"quoted boundary"', '"', "", " ", "b; boundary=c", "é", "--", "b\0c"])
              | st.text(HEADER_TEXT, max_size=80))


@SPOOLED_FILE_FINALIZED
@FUZZ
@given(body=st.binary(max_size=2048), boundary=BOUNDARIES)
@example(body=b"", boundary="b")
@example(body=b"--b--\r\n", boundary="b")
@example(body=b"--b\r\n", boundary="b")
@example(body=b"--\r\n", boundary="")
@example(body=b"--" * 900, boundary="-")
def test_random_body_as_multipart(app, client, account, body, boundary):
    assert_sound(app, post_raw(client, account, body, f"multipart/form-data; boundary={boundary}"))


@SPOOLED_FILE_FINALIZED
@FUZZ
@given(body=st.sampled_from(MULTIPART_SEEDS).map(seed).flatmap(mutations))
def test_mutated_multipart_seeds(app, client, account, body):
    assert_sound(app, post_raw(client, account, body, "multipart/form-data; boundary=b"))


HOSTILE_NAMES = [
    "../../etc/passwd.doc", "..\\..\\windows\\win.ini.xls", "/etc/passwd.doc", "C:\\Users\\x\\a.doc",
    "\\\\server\\share\\a.ppt", "a.doc\0.exe", "a\0.doc", "\0", "..", ".", ".doc", "a.doc/", "a.doc\\",
    "a.doc\r\nX-Injected: 1", "CON.doc", "a" * 300 + ".doc", "a" * 251 + ".doc", "\u202ecod.exe.doc",
    "a\u2028b.xls", "%2e%2e%2fa.doc", "a.doc;.exe", "a.doc ", " a.doc", "\ufeffa.doc", "\x7f.ppt",
    "\x1b[31mred.doc", "résumé.doc", "文档.doc", "a\udcff.doc", "a\"b.doc", "a'b.doc", "a;b.doc",
    "a\tb.doc", "A.DOC", "file:///etc/passwd.doc", "\\..\\.doc", "a/../b.doc", "x.doc/..",
]
NAMES = (st.sampled_from(HOSTILE_NAMES)
         | st.builds(lambda stem, ext: stem + ext, st.text(max_size=40), st.sampled_from(list(EXTENSIONS) + [""]))
         | st.builds(lambda stem, ext: stem + ext, st.text(max_size=3000, alphabet=st.characters(max_codepoint=127)),
                     st.sampled_from(EXTENSIONS)))


def _utf8(text):
    return text.encode("utf-8", "surrogatepass")


@st.composite
def filename_params(draw):
    """``filename=...`` as clients and attackers write it: quoted, bare, RFC 2231, raw bytes, twice."""
    name = draw(NAMES)
    form = draw(st.sampled_from(["quoted", "quoted", "quoted", "escaped", "bare", "rfc2231", "rfc2231",
                                 "rfc2231-odd", "latin-1", "bytes", "both", "twice", "empty", "none"]))
    if form == "quoted":
        return b'; filename="' + _utf8(name) + b'"'
    if form == "escaped":
        return b'; filename="' + _utf8(name.replace("\\", "\\\\").replace('"', '\\"')) + b'"'
    if form == "bare":
        return b"; filename=" + _utf8(name)
    if form == "rfc2231":
        return b"; filename*=UTF-8''" + quote(_utf8(name), safe="").encode()
    if form == "rfc2231-odd":
        charset = draw(st.sampled_from([b"", b"bogus-charset", b"utf-16", b"iso-8859-1", b"us-ascii", b"UTF-8'en"]))
        return b"; filename*=" + charset + b"''" + quote(_utf8(name), safe="").encode() + b"%ff%00"
    if form == "latin-1":
        return b'; filename="' + name.encode("latin-1", "replace") + b'"'
    if form == "bytes":
        return b'; filename="' + draw(st.binary(max_size=64)) + draw(st.sampled_from([b".doc", b""])) + b'"'
    if form == "both":
        return b'; filename="plain.doc"; filename*=UTF-8\'\'' + quote(_utf8(name), safe="").encode()
    if form == "twice":
        return b'; filename="a.doc"; filename="' + _utf8(name) + b'"'
    if form == "empty":
        return b'; filename=""'
    return b""


@st.composite
def parts(draw, newline, valid):
    """One form part: a well-formed ``file`` part when ``valid`` (but for its file name), else
    broken in some of many ways."""
    def sometimes(one_in):
        return not valid and draw(st.integers(1, one_in)) == 1

    name = b'name="file"'
    if sometimes(3):
        name = draw(st.sampled_from([b"name=file", b'name="FILE"', b'name=""', b"", b'name="file"; name="other"',
                                     b"name*=UTF-8''file", b'name="fi\0le"', b'name="upload"']))
    disposition = b"form-data"
    if sometimes(5):
        disposition = draw(st.sampled_from([b"attachment", b"", b"FORM-DATA", b"form-data;;"]))
    headers = [b"Content-Disposition: " + disposition + (b"; " + name if name else b"") + draw(filename_params())]
    if sometimes(2):
        headers.append(b"Content-Type: " + draw(st.sampled_from(
            [b"application/msword", b"text/plain; charset=bogus", b"application/octet-stream", b"\xff\xfe",
             b"multipart/mixed; boundary=b", b""])))
    if sometimes(4):
        headers.append(b"Content-Length: " + draw(st.sampled_from([b"0", b"-1", b"99999999999999999999", b"x"])))
    if sometimes(4):
        headers.append(draw(st.binary(max_size=100)))  # a junk header line
    if sometimes(3):
        headers = draw(st.permutations(headers))
    if sometimes(10):
        headers = []  # no headers at all
    content = draw(st.sampled_from([b"x", b"", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100]) |
                   st.binary(max_size=300))
    separator = newline + newline
    if sometimes(5):
        separator = draw(st.sampled_from([newline, b"", b" " + newline + newline, newline + b" " + newline]))
    return newline.join(headers) + separator + content


@st.composite
def broken_multiparts(draw):
    """``(content_type, body)``: structured multipart, a third of the time well-formed but for the
    file name (hostile names must reach the view), else with one or more things wrong."""
    valid = draw(st.integers(1, 3)) == 1

    def sometimes(one_in):
        return not valid and draw(st.integers(1, one_in)) == 1

    boundary = b"XyZ-boundary"
    if sometimes(3):
        boundary = draw(st.sampled_from([b"b", b"a" * 70, b"a" * 200, b"--", b"=?"])
                        | st.binary(min_size=1, max_size=20))
    newline = b"\n" if sometimes(4) else b"\r\n"
    delimiter = b"--" + boundary
    body = b""
    if sometimes(4):
        body = draw(st.sampled_from([b"preamble junk" + newline, delimiter + b"--" + newline]) | st.binary(max_size=40))
    count = draw(st.integers(0, 4)) if sometimes(3) else 1
    for part in draw(st.lists(parts(newline, valid), min_size=count, max_size=count)):
        body += delimiter + newline + part + newline
    body += delimiter + b"--" + newline
    if sometimes(3):  # a wrong ending
        body = body[:-len(delimiter + b"--" + newline)] + draw(st.sampled_from(
            [delimiter + b"--", delimiter, b"", delimiter + b"-", delimiter + b"--" + newline + b"epilogue",
             delimiter + b"--" + newline + delimiter + newline, delimiter + b"--" * 1000]))
    if sometimes(6):  # cut anywhere
        body = body[:draw(st.integers(0, len(body)))]
    header_boundary = boundary.decode("latin-1")
    quoting = "plain"
    if sometimes(3):
        quoting = draw(st.sampled_from(["quoted", "other", "missing", "twice", "upper"]))
    content_type = {
        "plain": f"multipart/form-data; boundary={header_boundary}",
        "quoted": f'multipart/form-data; boundary="{header_boundary}"',
        "other": "multipart/form-data; boundary=not-the-one",
        "missing": "multipart/form-data",
        "twice": f"multipart/form-data; boundary=zz; boundary={header_boundary}",
        "upper": f"MULTIPART/FORM-DATA; BOUNDARY={header_boundary}",
    }[quoting]
    return content_type.replace("\r", "").replace("\n", ""), body


def one_part(name_params, content=b"x", newline=b"\r\n"):
    return (b"--b" + newline + b'Content-Disposition: form-data; name="file"' + name_params + newline + newline
            + content + newline + b"--b--" + newline)


@SPOOLED_FILE_FINALIZED
@FUZZ
@given(request=broken_multiparts())
@example(request=("multipart/form-data; boundary=b", one_part(b'; filename="../../etc/passwd.doc"')))
@example(request=("multipart/form-data; boundary=b", one_part(b"; filename*=UTF-8''..%2F..%2Fetc%2Fpasswd.doc")))
@example(request=("multipart/form-data; boundary=b", one_part(b'; filename="a\0.doc"')))
@example(request=("multipart/form-data; boundary=b", one_part(b'; filename="\xff\xfe.doc"')))
@example(request=("multipart/form-data; boundary=b", one_part(b'; filename="' + b"a" * 5000 + b'.doc"')))
@example(request=("multipart/form-data; boundary=b", one_part(b'; filename="a.doc"')[:-9]))
@example(request=("multipart/form-data; boundary=b", one_part(b'; filename="a.doc"') * 2))
def test_broken_multipart(app, client, account, request):
    content_type, body = request
    assert_sound(app, post_raw(client, account, body, content_type))


@FUZZ
@given(name=NAMES)
@example(name="../../etc/passwd.doc")
@example(name="..\\..\\boot.ini.doc")
@example(name="a" * 300 + ".doc")
def test_hostile_filenames_are_stored_clean(app, client, account, name):
    """Names the test client encodes itself (quoted, escaped): a 202 keeps only a clean last component."""
    response = post_file(client, account, b"\xd0\xcf\x11\xe0 not converted here", name.replace("\udcff", "?"))
    answer = assert_sound(app, response)
    if answer != "accepted":
        assert answer in {"unsupported_file_type", "invalid_request"}, answer


IDEMPOTENCY_KEYS = (st.text(HEADER_TEXT, max_size=140)
                    | st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=7, max_size=129)
                    | st.sampled_from(["x" * 8, "x" * 128, "x" * 129, " " + "x" * 10, "x" * 10 + " ", "x" * 10 + "\t",
                                       "\0" * 10, "key-\x7f-key", "ключ-ключ-ключ", "a" * 100_000]))


@FUZZ
@given(value=IDEMPOTENCY_KEYS)
def test_random_idempotency_key_values(app, client, account, value):
    response = post_file(client, account, b"same bytes every time", "same.doc", headers={"Idempotency-Key": value})
    answer = assert_sound(app, response)
    well_formed = 8 <= len(value) <= 128 and all(0x21 <= ord(c) <= 0x7E for c in value)
    assert answer == ("accepted" if well_formed else "invalid_request"), (value, response.get_json())


@FUZZ
@given(value=st.text(HEADER_TEXT, max_size=200) | st.sampled_from(["a" * 64, "a" * 65, "a.b-c_d", "a b", "a\tb"]))
def test_random_request_id_values(client, account, value):
    """X-Request-Id is echoed only when it is a safe token; anything else is replaced."""
    response = client.get("/v1/account/usage", headers={"Authorization": f"Bearer {account}", "X-Request-Id": value})
    assert response.status_code == 200, response.get_data(as_text=True)
    echoed = response.headers["X-Request-Id"]
    assert 1 <= len(echoed) <= 64 and all(c.isascii() and (c.isalnum() or c in "._-") for c in echoed), echoed


TASK_IDS = (st.text(st.characters(exclude_categories=["Cs"]), max_size=300)
            | st.binary(max_size=64).map(lambda raw: raw.hex())
            | st.sampled_from(["tsk_" + "0" * 24 + "\n", "tsk_" + "A" * 24, "tsk_" + "0" * 23, "tsk_" + "0" * 25,
                               "x" * 5000, "..", ".", "%00", "tsk_\0", "tsk_" + "0" * 24 + "\0"]))


@FUZZ
@given(task_id=TASK_IDS)
@example(task_id="/0")
def test_absurd_task_ids(client, account, task_id):
    path = f"/v1/conversions/{quote(task_id, safe='')}"
    response = client.get(path, headers={"Authorization": f"Bearer {account}"}, follow_redirects=True)
    # the only redirect: werkzeug's url_map.merge_slashes answers a "//" in the decoded path
    # (a task id starting with "/") with a 308 to the merged path
    assert all("//" in unquote(path) and hop.status_code == 308 for hop in response.history), task_id
    assert response.status_code == 404, (task_id, response.get_data(as_text=True))
    assert response.mimetype == "application/problem+json"
    assert response.get_json()["code"] in {"task_not_found", "not_found"}


@pytest.mark.parametrize("content_type, body", [
    ("application/json", b'{"file": "a.doc"}'),
    ("text/plain", b"a.doc"),
    ("application/x-www-form-urlencoded", b"file=a.doc"),
    ("multipart/form-data", one_part(b'; filename="a.doc"')),
    ("multipart/form-data; boundary=", one_part(b'; filename="a.doc"')),
    ("multipart/mixed; boundary=b", one_part(b'; filename="a.doc"')),
    ("multipart/form-data; boundary=wrong", one_part(b'; filename="a.doc"')),
    ("", one_part(b'; filename="a.doc"')),
])
def test_wrong_content_types_in_process(app, client, account, content_type, body):
    assert assert_sound(app, post_raw(client, account, body, content_type)) == "invalid_request"


def test_too_many_parts_is_refused(app, client, account):
    body = b"".join(b'--b\r\nContent-Disposition: form-data; name="f%d"\r\n\r\nx\r\n' % n for n in range(100))
    code = assert_sound(app, post_raw(client, account, body + b"--b--\r\n", "multipart/form-data; boundary=b"))
    assert code == "invalid_request"


# the real gunicorn and worker ------------------------------------------------------------

def exchange(live, request, shutdown=False, timeout=20):
    """Send raw bytes to the live gunicorn; ``(status, head, body)`` of its answer."""
    with socket.create_connection(("127.0.0.1", live.port), timeout=timeout) as conn:
        try:
            conn.sendall(request)
            if shutdown:
                conn.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer and close before reading everything
        reply = read_until_closed(conn)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1."), f"no HTTP answer: {reply[:200]!r}"
    return int(head.split()[1]), head.decode("latin-1"), body


def assert_live_problem(status, head, body, expected_status, codes):
    assert status == expected_status, (head, body[:500])
    assert "content-type: application/problem+json" in head.lower(), head
    assert json.loads(body)["code"] in codes, body


def assert_not_5xx(status, head, body, what):
    """A 4xx in problem+json: gunicorn's own parsing errors (a bad chunk size, a missing terminator, a malformed
    header) must surface as the API's errors do, never as internal_error, never as an HTML page."""
    assert status < 500, f"{what} got {status} instead of a 4xx: {head} {body[:300]!r}"
    assert 400 <= status < 500, (what, head, body[:300])
    assert "content-type: application/problem+json" in head.lower(), (what, head, body[:300])
    problem = json.loads(body)
    assert problem["status"] == status and set(problem) == {"type", "title", "status", "detail", "code"}, problem


def assert_healthy(live):
    response = requests.get(f"{live.base_url}/healthz", timeout=10)
    assert response.status_code == 200, response.text


def get_request(path, key, extra=b""):
    return (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n".encode()
            + extra + b"\r\n")


@pytest.fixture(scope="module")
def live_key(live):
    return live.register(f"hostile-{random.randrange(10**9)}")


@pytest.mark.parametrize("what, extra", [
    ("a 64 KiB header value", b"X-Junk: " + b"a" * 65536 + b"\r\n"),
    ("an 8 KiB Idempotency-Key", b"Idempotency-Key: " + b"k" * 8192 + b"\r\n"),
    ("200 headers", b"".join(b"X-H%d: v\r\n" % n for n in range(200))),
    ("a 64 KiB header name", b"X" * 65536 + b": v\r\n"),
    ("a header without a colon", b"no colon here\r\n"),
    ("a NUL in a header value", b"X-Junk: a\0b\r\n"),
    ("obsolete line folding", b"X-Junk: a\r\n folded\r\n"),
])
def test_huge_and_malformed_headers_get_a_4xx(live, live_key, what, extra):
    status, head, body = exchange(live, get_request("/v1/account/usage", live_key, extra))
    # a folded header is obsolete but still legal HTTP/1.1 (RFC 9112 5.2): a server may unfold it
    if not (status == 200 and what == "obsolete line folding"):
        assert_live_problem(status, head, body, 400, {"invalid_request"})
    assert_healthy(live)


def test_huge_request_line_gets_a_4xx(live, live_key):
    status, head, body = exchange(live, get_request("/v1/conversions/" + "x" * 10000, live_key))
    assert_live_problem(status, head, body, 400, {"invalid_request"})
    assert "request line" in json.loads(body)["detail"]
    assert_healthy(live)


@pytest.mark.parametrize("what, request_for", [
    ("a password split over two lines", lambda key, tail: get_request(
        "/v1/account/usage", key, b"Document-Password: first-half\r\n" + tail + b"\r\n")),
    ("a carriage return inside a password", lambda key, tail: get_request(
        "/v1/account/usage", key, b"Document-Password: first-half\r" + tail + b"\r\n")),
    ("a key split over two lines", lambda key, tail: get_request(
        "/v1/account/usage", key[:12] + "\r\n" + tail.decode())),
    ("a garbage request line", lambda key, tail: b"GARBAGE " + tail + b"\r\n\r\n"),
    ("a Content-Length that is no number", lambda key, tail: submission(key, b"--b--\r\n").replace(
        b"Content-Length: 7", b"Content-Length: " + tail)),
])
def test_what_gunicorn_refuses_is_problem_json_and_never_logged(live, live_key, what, request_for):
    """gunicorn's own parser refuses these before the app sees them: the answer is the API's invalid_request, and
    the log names the refusal without the refused bytes (the tail of a password or a key a client split)."""
    tail = f"secret-tail-{random.randrange(10**12)}".encode()
    logged_before = (live.data_dir / "web.log").stat().st_size
    status, head, body = exchange(live, request_for(live_key, tail), shutdown=True)
    assert_live_problem(status, head, body, 400, {"invalid_request"})
    assert tail not in body, what
    with open(live.data_dir / "web.log", "rb") as log:
        log.seek(logged_before)
        logged = log.read()
    assert tail not in logged, (what, logged[-1000:])
    assert b"Refused a malformed request" in logged, (what, logged[-1000:])
    assert_healthy(live)


@pytest.mark.parametrize("path", [
    "/v1/conversions/" + "x" * 3000,
    "/v1/conversions/%00",
    "/v1/conversions/tsk_%00",
    "/v1/conversions/tsk_000000000000000000000000%0a",
    "/v1/conversions/tsk_000000000000000000000000%00",
    "/v1/conversions/tsk_" + "%C3%BC" * 24,
    "/v1/conversions/%F0%9F%92%A3",
    "/v1/conversions/%ff%fe%fd",
    "/v1/conversions/..%2f..%2fetc%2fpasswd",
    "/v1/conversions/%2e%2e",
    "/v1/conversions/tsk_000000000000000000000000?x=" + "y" * 3000,
    "/v1/conversions/TSK_000000000000000000000000",
])
def test_absurd_task_ids_live(live, live_key, path):
    status, head, body = exchange(live, get_request(path, live_key))
    assert_live_problem(status, head, body, 404, {"task_not_found", "not_found"})


def test_raw_unicode_in_the_request_line(live, live_key):
    status, head, body = exchange(live, get_request("/v1/conversions/tsk_ünïcödé", live_key).replace(
        "tsk_ünïcödé".encode("latin-1"), "tsk_ünïcödé".encode()))
    assert 400 <= status < 500, head
    if status == 404:
        assert_live_problem(status, head, body, 404, {"task_not_found"})
    assert_healthy(live)


@pytest.mark.parametrize("content_type", [
    "application/json", "text/plain", "multipart/form-data", "multipart/form-data; boundary=",
    "multipart/mixed; boundary=b", "application/x-www-form-urlencoded", None,
])
def test_wrong_content_types_live(live, live_key, content_type):
    headers = {"Authorization": f"Bearer {live_key}"}
    if content_type:
        headers["Content-Type"] = content_type
    body = b'{"file": "a.doc"}' if content_type == "application/json" else one_part(b'; filename="a.doc"')
    response = requests.post(f"{live.base_url}/v1/conversions", data=body, headers=headers, timeout=10)
    assert response.status_code == 400, response.text
    assert response.headers["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "invalid_request"


def submission(key, body, content_type="multipart/form-data; boundary=b", length=None, extra=b""):
    length = len(body) if length is None else length
    return (f"POST /v1/conversions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {length}\r\n").encode() + extra + b"\r\n" + body


def chunked(key, chunks):
    return (f"POST /v1/conversions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n"
            "Content-Type: multipart/form-data; boundary=b\r\nTransfer-Encoding: chunked\r\n\r\n").encode() + chunks


def test_body_shorter_than_its_length_live(live, live_key):
    """The client promises 1000 bytes, sends a part cut in its middle and stops writing:
    a 4xx, not a stuck or dead worker."""
    cut = one_part(b'; filename="a.doc"', b"x" * 400)[:200]
    status, head, _ = exchange(live, submission(live_key, cut, length=1000), shutdown=True)
    assert 400 <= status < 500, head
    assert_healthy(live)


@pytest.mark.parametrize("what, request_for", [
    ("broken multipart, chunked", lambda key: chunked(key, b"10\r\n--b\r\nContent-Dis\r\n0\r\n\r\n")),
    ("a bad chunk size", lambda key: chunked(key, b"zz\r\n--b\r\n\r\n0\r\n\r\n")),
    ("a chunk without its CRLF", lambda key: chunked(key, b"3\r\n--bXX\r\n0\r\n\r\n")),
    ("a 2**80 chunk size", lambda key: chunked(key, b"%x\r\n--b\r\n0\r\n\r\n" % 2**80)),
    ("a negative Content-Length", lambda key: submission(key, b"--b--\r\n", length=-1)),
    ("two Content-Lengths", lambda key: submission(key, b"--b--\r\n", extra=b"Content-Length: 3\r\n")),
    ("no closing boundary", lambda key: submission(key, one_part(b'; filename="a.doc"')[:-9])),
    ("non-UTF-8 filename", lambda key: submission(key, one_part(b'; filename="\xff\xfe.doc"'))),
    ("two file parts", lambda key: submission(key, seed("multipart_two_files"))),
    ("a part without headers", lambda key: submission(key, seed("multipart_no_headers"))),
])
def test_broken_bodies_live(live, live_key, what, request_for):
    status, head, body = exchange(live, request_for(live_key), shutdown=True)
    assert_not_5xx(status, head, body, what)
    assert_healthy(live)


def test_a_70_kib_filename_is_shortened_not_refused_live(live, live_key):
    status, head, body = exchange(live, submission(live_key, one_part(b'; filename="' + b"a" * 70000 + b'.doc"')),
                                  shutdown=True)
    assert status == 202, (head, body[:300])
    task = requests.get(json.loads(body)["status_url"].replace("http://127.0.0.1", live.base_url),
                        headers={"Authorization": f"Bearer {live_key}"}, timeout=10).json()
    assert len(task["source_filename"]) == 255 and task["source_filename"].endswith("a.doc")


def test_chunked_body_cut_short_live(live, live_key):
    """A chunk promises 256 bytes, 10 arrive, then the client stops writing."""
    status, head, body = exchange(live, chunked(live_key, b"100\r\n--b\r\nContent"), shutdown=True)
    assert_not_5xx(status, head, body, "a chunked body cut short")
    assert_healthy(live)


@pytest.mark.parametrize("chunks", [b"zz\r\ntoken=x\r\n0\r\n\r\n", b"3\r\ntokXX\r\n0\r\n\r\n"])
def test_broken_chunked_registration_form_live(live, chunks):
    """The AWS Marketplace form POST reads its body too: same malformed chunking, same 4xx."""
    request = (b"POST /marketplace/register HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
               b"Content-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks)
    status, head, body = exchange(live, request, shutdown=True)
    assert_not_5xx(status, head, body, f"registration form chunked as {chunks!r}")
    assert_healthy(live)


@pytest.mark.parametrize("name", ["../../etc/passwd.doc", "..\\..\\evil.doc", "a\x01\x1b[2Jb.doc", "\u202ecod.exe.doc"])
def test_traversal_names_live(live, live_key, name):
    response = requests.post(f"{live.base_url}/v1/conversions", headers={"Authorization": f"Bearer {live_key}"},
                             files={"file": (name, b"not an OLE file")}, timeout=10)
    assert response.status_code == 202, response.text
    task = live.wait(live_key, response.json()["task_id"])
    stored = task["source_filename"]
    assert "/" not in stored and "\\" not in stored and stored.endswith(".doc"), stored
    assert not any(hidden_or_reordering(c) for c in stored), repr(stored)
    assert task["status"] == "FAILED" and task["error"]["code"] == "unsupported_content", task


def test_made_up_methods_do_not_grow_the_metrics_live(live, live_key):
    """gunicorn accepts any 3-20 letter upper-case method: each is a 405, and must not become a new
    metrics label set (else every hostile request adds a histogram series, without end)."""
    invented = [f"ZZ{n:04d}{random.randrange(10**6):06d}" for n in range(20)]
    for method in invented:
        request = get_request("/v1/account/usage", live_key).replace(b"GET", method.encode(), 1)
        status, head, body = exchange(live, request)
        assert_live_problem(status, head, body, 405, {"method_not_allowed"})
    exposition = requests.get(f"{live.base_url}/metrics", timeout=10).text
    leaked = [method for method in invented if method in exposition]
    assert not leaked, f"{len(leaked)} of {len(invented)} made-up methods became metrics labels: {leaked[:3]}"


def _mutated_legacy(data, rng, flips=40):
    data = bytearray(data)
    for _ in range(flips):  # past the first 2 KiB: the OLE structure stays readable, the content is not
        at = rng.randrange(2048, len(data))
        data[at] = rng.randrange(256)
    return bytes(data)


def test_malformed_ole_files_fail_and_the_worker_still_converts(live, live_key, legacy, tmp_path):
    """Each hostile file ends final with a documented code; then a good file still converts."""
    rng = random.Random(20240611)
    cases = {  # name: (bytes, the expected final state or None for "any final state")
        # the pre-check refuses these two; LibreOffice's type detection finds nothing to load in the next five
        "encrypted.doc": (seed("ole_doc_fencrypted"), ("FAILED", "encrypted_document")),
        "package.xls": (seed("ole_encrypted_package"), ("FAILED", "encrypted_document")),
        "short.doc": (seed("ole_short"), ("FAILED", "unsupported_content")),
        "header-only.xls": (seed("ole_header_only"), ("FAILED", "unsupported_content")),
        "absurd.ppt": (seed("ole_absurd_counts"), ("FAILED", "unsupported_content")),
        "no-streams.doc": (seed("ole_no_streams"), ("FAILED", "unsupported_content")),
        "wrong-type.xls": (seed("ole_doc"), ("FAILED", "unsupported_content")),
        # these LibreOffice loads, or tries to
        "rtf.doc": (seed("rtf_named_doc"), None),
        "tiny.doc": (seed("ole_doc"), None),
        "truncated.doc": (seed("ole_truncated"), None),
        "fat-loop.doc": (seed("ole_fat_loop"), None),
        "tiny.xls": (seed("ole_xls_workbook"), None),
        "tiny.ppt": (seed("ole_ppt"), None),
        **{f"mutated.{kind}": (_mutated_legacy(legacy[kind].read_bytes(), rng), None) for kind in legacy},
    }
    submitted = {}
    for name, (data, _expected) in cases.items():
        path = tmp_path / name.replace("/", "_")
        path.write_bytes(data)
        response = live.submit(live_key, path, name=name)
        assert response.status_code == 202, (name, response.text)
        submitted[name] = response.json()["task_id"]
    for name, task_id in submitted.items():
        task = live.wait(live_key, task_id, timeout=180)
        assert task["status"] in ("SUCCEEDED", "FAILED"), (name, task)
        if task["status"] == "FAILED":
            assert task["error"]["code"] in TASK_ERROR_CODES, (name, task)
        expected = cases[name][1]
        if expected is not None:
            assert (task["status"], task["error"]["code"]) == expected, (name, task)
    assert_healthy(live)
    for kind, path in legacy.items():
        response = live.submit(live_key, path)
        assert response.status_code == 202, response.text
        task = live.wait(live_key, response.json()["task_id"])
        assert task["status"] == "SUCCEEDED", (kind, task)
