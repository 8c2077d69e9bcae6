"""A request has a whole-request deadline (DOCSHIFT_REQUEST_SECONDS), on the real gunicorn:
a client that trickles its upload a byte at a time is cut off when it runs out, however
often its bytes come. And an account at its pending cap gets its 429 from the headers,
before it sends (or the web waits for) its body."""

import json
import select
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from conftest import Service, read_until_closed

DEADLINE = 3  # seconds; the default, 60, lets 4 MiB through a slow link
LIMIT = 4 * 1024 * 1024
PART_HEAD = b'--b\r\nContent-Disposition: form-data; name="file"; filename="slow.doc"\r\n\r\n'


def upload_head(key, length):
    return (f"POST /v1/conversions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: {length}\r\n\r\n").encode()


@pytest.fixture(scope="module")
def web(s3, tmp_path_factory):
    """The web alone (nothing converts, so a task stays QUEUED), with a deadline of a few seconds
    and a cap of one unfinished task per account."""
    service = Service(tmp_path_factory.mktemp("deadline"), s3["env"], REQUEST_SECONDS=DEADLINE,
                      MAX_PENDING_TASKS=1)
    service.start_web()
    try:
        service.wait_healthy_web()
        service.store().ensure_bucket()
        yield service
    finally:
        service.stop()


def test_an_upload_trickled_a_byte_a_second_is_cut_off_at_the_deadline(web):
    """Each byte comes well within the read timeout (30 s), so only the deadline can end it."""
    key = web.register("trickle")
    conn = socket.create_connection(("127.0.0.1", web.port), timeout=30)
    started = time.monotonic()
    with conn:
        conn.sendall(upload_head(key, LIMIT) + PART_HEAD)
        # a byte a second until the web answers or closes; 20 s is far past any deadline it has
        while not select.select([conn], [], [], 1)[0]:
            assert time.monotonic() - started < 20, "the trickled upload is still open after 20 s"
            try:
                conn.sendall(b"x")
            except (BrokenPipeError, ConnectionResetError):
                break
        answered = time.monotonic() - started
        reply = read_until_closed(conn)
        closed = time.monotonic() - started
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), reply[:300]
    problem = json.loads(body)
    assert problem["code"] == "invalid_request" and f"{DEADLINE} seconds" in problem["detail"], problem
    assert DEADLINE - 0.5 < answered < DEADLINE + 2, answered
    assert closed < DEADLINE + 3, closed  # the connection goes with the answer


def test_an_upload_within_the_deadline_is_accepted(web):
    key = web.register("prompt")
    response = requests.post(f"{web.base_url}/v1/conversions", headers={"Authorization": f"Bearer {key}"},
                             files={"file": ("big.doc", b"\xd0\xcf\x11\xe0" + b"\0" * (LIMIT - 4))}, timeout=30)
    assert response.status_code == 202, response.text


def test_an_account_at_its_cap_gets_429_before_it_sends_its_body(web):
    key = web.register("capped")
    first = requests.post(f"{web.base_url}/v1/conversions", headers={"Authorization": f"Bearer {key}"},
                          files={"file": ("a.doc", b"first")}, timeout=30)
    assert first.status_code == 202, first.text
    with socket.create_connection(("127.0.0.1", web.port), timeout=30) as conn:
        conn.sendall(upload_head(key, LIMIT + len(PART_HEAD) + 8))  # the headers of a 4 MiB upload, no more
        started = time.monotonic()
        assert select.select([conn], [], [], 5)[0], "no answer within 5 s without the body"
        waited = time.monotonic() - started
        reply = conn.recv(65536)
        while not reply.rstrip().endswith(b"}") and (more := conn.recv(65536)):  # head and body: two writes
            reply += more
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 429"), reply[:300]
    assert b"retry-after: 2" in head.lower() and b"application/problem+json" in head.lower(), head
    assert json.loads(body)["code"] == "too_many_tasks"
    assert waited < 1, waited


def test_a_replay_at_the_cap_is_still_answered(web):
    """The cap refuses new tasks from the headers alone, never a retry of one already accepted."""
    key = web.register("capped-replay")
    auth = {"Authorization": f"Bearer {key}", "Idempotency-Key": "retry-of-the-same-file"}
    first = requests.post(f"{web.base_url}/v1/conversions", headers=auth, files={"file": ("a.doc", b"once")},
                          timeout=30)
    again = requests.post(f"{web.base_url}/v1/conversions", headers=auth, files={"file": ("a.doc", b"once")},
                          timeout=30)
    assert first.status_code == again.status_code == 202, (first.text, again.text)
    assert again.json()["task_id"] == first.json()["task_id"] and again.headers["Idempotent-Replayed"] == "true"
    other = requests.post(f"{web.base_url}/v1/conversions", headers={"Authorization": f"Bearer {key}"},
                          files={"file": ("b.doc", b"another")}, timeout=30)
    assert other.status_code == 429 and other.json()["code"] == "too_many_tasks", other.text


def test_identical_requests_racing_to_the_cap_all_get_the_one_task(web):
    """Ten identical keyed requests at once, with room for one task: one makes it, and the nine others, which
    may find the cap reached before they find the task, are each answered with it, never a 429."""
    for attempt in range(3):
        key = web.register(f"capped-race-{attempt}")
        auth = {"Authorization": f"Bearer {key}", "Idempotency-Key": f"the-same-request-{attempt}"}
        start = threading.Barrier(10)

        def send(auth, start):
            start.wait()
            return requests.post(f"{web.base_url}/v1/conversions", headers=auth,
                                 files={"file": ("a.doc", b"the same bytes")}, timeout=30)

        with ThreadPoolExecutor(10) as pool:
            answers = list(pool.map(send, [auth] * 10, [start] * 10))
        assert [a.status_code for a in answers] == [202] * 10, [a.text for a in answers if a.status_code != 202]
        assert len({a.json()["task_id"] for a in answers}) == 1
        assert sum(not a.json()["idempotent_replay"] for a in answers) == 1


WHOLE_PART = PART_HEAD + b"\xd0\xcf\x11\xe0 the file" + b"\r\n--b--\r\n"


@pytest.mark.parametrize("sent, declared", [(WHOLE_PART, len(WHOLE_PART) + 1000),  # the form whole, the body not
                                            (WHOLE_PART[:60], len(WHOLE_PART))])  # half the form
def test_a_body_that_ends_before_its_content_length_is_refused_as_cut_off(web, sent, declared):
    """The client sends less than its Content-Length says, then closes its side: an incomplete message, refused as
    such whether or not the form in it looked whole, and nothing is stored (the account's one place stays free)."""
    key = web.register(f"cut-{len(sent)}")
    with socket.create_connection(("127.0.0.1", web.port), timeout=30) as conn:
        conn.sendall(upload_head(key, declared) + sent)
        conn.shutdown(socket.SHUT_WR)
        reply = read_until_closed(conn)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and b"application/problem+json" in head.lower(), reply[:300]
    problem = json.loads(body)
    assert problem["code"] == "invalid_request" and "cut off" in problem["detail"], problem
    after = requests.post(f"{web.base_url}/v1/conversions", headers={"Authorization": f"Bearer {key}"},
                          files={"file": ("a.doc", b"whole")}, timeout=30)
    assert after.status_code == 202, after.text


def test_a_chunked_body_cut_between_its_chunks_is_refused_as_cut_off(web):
    key = web.register("cut-chunked")
    head = (f"POST /v1/conversions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
            "Content-Type: multipart/form-data; boundary=b\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", web.port), timeout=30) as conn:
        conn.sendall(head + b"%x\r\n" % 60 + WHOLE_PART[:60] + b"\r\n")  # one chunk, and never the last
        conn.shutdown(socket.SHUT_WR)
        reply = read_until_closed(conn)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and b"application/problem+json" in head.lower(), reply[:300]
    assert json.loads(body)["detail"] == "The request body is malformed or was cut off.", body


@pytest.mark.parametrize("header", ["Idempotency-Key", "Document-Password"])
def test_a_header_read_as_one_value_sent_twice_is_refused(web, header):
    """WSGI joins a repeated header's values with a comma: two passwords would be tried as one, two keys kept as
    one. Refused before the app reads anything, and nothing is stored (the account's one place stays free)."""
    key = web.register(f"twice-{header.lower()}")
    head = upload_head(key, len(WHOLE_PART)).replace(b"\r\n\r\n", f"\r\n{header}: first-value\r\n"
                                                                     f"{header}: other-value\r\n\r\n".encode())
    with socket.create_connection(("127.0.0.1", web.port), timeout=30) as conn:
        conn.sendall(head + WHOLE_PART)
        reply = read_until_closed(conn)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and b"application/problem+json" in head.lower(), reply[:300]
    problem = json.loads(body)
    assert problem["code"] == "invalid_request" and header in problem["detail"], problem
    after = requests.post(f"{web.base_url}/v1/conversions", headers={"Authorization": f"Bearer {key}"},
                          files={"file": ("a.doc", b"once")}, timeout=30)
    assert after.status_code == 202, after.text
