"""Stalled clients cannot take the API down: gunicorn's gevent workers wait for requests in
greenlets, a request's headers must arrive within gunicorn's keepalive, and a body that
stops coming is refused after DOCSHIFT_READ_TIMEOUT."""

import json
import socket
import time

import pytest
import requests
from conftest import Service, read_until_closed

STALLED = 40
HALF_HEADERS = b"GET /v1/account/usage HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bear"
HALF_BODY = (b"POST /v1/conversions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
             b"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 1000\r\n\r\n"
             b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.doc"\r\n\r\nxxxx')


def stall(port, request, count):
    """``count`` connections that each send ``request`` and then nothing more."""
    connections = []
    for _ in range(count):
        conn = socket.create_connection(("127.0.0.1", port), timeout=60)
        conn.sendall(request)
        connections.append(conn)
    return connections


def test_forty_stalled_clients_leave_healthz_answering(live):
    """20 connections stop in their headers and 20 in their bodies (with a valid key, so the
    app is reading the upload); /healthz still answers, within a second, every time."""
    key = live.register("stalled-clients").encode()
    connections = (stall(live.port, HALF_HEADERS, STALLED // 2)
                   + stall(live.port, HALF_BODY % key, STALLED // 2))
    try:
        time.sleep(1)  # every stalled request has reached a worker
        for _ in range(5):
            response = requests.get(f"{live.base_url}/healthz", timeout=1)
            assert response.status_code == 200, response.text
        assert requests.get(f"{live.base_url}/v1/account/usage", timeout=1,
                            headers={"Authorization": f"Bearer {key.decode()}"}).status_code == 200
    finally:
        for conn in connections:
            conn.close()


@pytest.fixture(scope="module")
def impatient(s3, tmp_path_factory):
    """The web alone, with a read timeout of 1 s."""
    service = Service(tmp_path_factory.mktemp("impatient"), s3["env"], READ_TIMEOUT=1)
    service.start_web()
    yield service.wait_healthy_web()
    service.stop()


def test_a_stalled_body_is_refused_after_the_read_timeout(impatient):
    key = impatient.register("slow-upload").encode()
    (conn,) = stall(impatient.port, HALF_BODY % key, 1)
    with conn:
        reply = read_until_closed(conn)
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), reply[:300]
    assert json.loads(body)["code"] == "invalid_request"


def test_headers_that_never_end_are_dropped(impatient):
    """gunicorn closes a connection whose headers do not arrive within its keepalive (5 s)."""
    (conn,) = stall(impatient.port, HALF_HEADERS, 1)
    with conn:
        assert read_until_closed(conn) == b""
