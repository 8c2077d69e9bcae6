"""The web answers only to the hosts it is: loopback names, the address a connection came
to, and DOCSHIFT_BASE_URL's host. Any other Host header is a 400, so a forged one never
becomes a status_url, a Location or the OpenAPI document's server."""

import json
import socket

import pytest
import requests
from conftest import BIN, Service, post_file, read_until_closed, wait_for

EVIL = "evil.example"


def assert_bad_host(response):
    assert response.status_code == 400, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["code"] == "invalid_request" and "Host" in body["detail"], body
    assert "Location" not in response.headers and EVIL not in response.get_data(as_text=True)


@pytest.mark.parametrize("host", [EVIL, f"{EVIL}:8000", "127.0.0.1.evil.example", "localhost.evil.example"])
def test_a_foreign_host_is_refused_before_anything_is_stored(app, client, account, host):
    assert_bad_host(post_file(client, account, b"\xd0\xcf\x11\xe0", "a.doc", headers={"Host": host}))
    assert_bad_host(client.get("/v1/openapi.json", headers={"Host": host}))
    with app.app_context():
        from docshift.web.context import get_db
        assert get_db().execute("SELECT count(*) FROM conversions").fetchone()[0] == 0


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000", "127.0.0.1:41234", "localhost", "127.0.0.1"])
def test_loopback_names_on_any_port_are_answered(client, account, host):
    """A published container port (127.0.0.1:<any>) reaches the web's own 8000."""
    submitted = post_file(client, account, b"\xd0\xcf\x11\xe0", "a.doc", headers={"Host": host})
    assert submitted.status_code == 202, submitted.get_data(as_text=True)
    assert submitted.headers["Location"].startswith(f"http://{host}/v1/conversions/tsk_")
    assert client.get("/v1/openapi.json", headers={"Host": host}).get_json()["servers"] == [{"url": f"http://{host}"}]


def test_with_a_base_url_its_host_is_answered_and_named(app, client, account):
    from docshift.web import create_app

    base = "https://convert.example.com"
    fronted = create_app({"TESTING": True, "DATA_DIR": app.config["DOCSHIFT"].data_dir,
                          "S3_BUCKET": app.config["DOCSHIFT"].s3_bucket, "BASE_URL": base}).test_client()
    submitted = post_file(fronted, account, b"\xd0\xcf\x11\xe0", "a.doc", headers={"Host": "convert.example.com"})
    assert submitted.status_code == 202, submitted.get_data(as_text=True)
    assert submitted.headers["Location"].startswith(f"{base}/v1/conversions/tsk_")
    assert fronted.get("/v1/openapi.json", headers={"Host": "127.0.0.1:8000"}).get_json()["servers"] == [{"url": base}]
    assert_bad_host(fronted.get("/v1/openapi.json", headers={"Host": EVIL}))


# the real gunicorn ------------------------------------------------------------------------

def raw(port, request, address="127.0.0.1"):
    with socket.create_connection((address, port), timeout=20) as conn:
        conn.sendall(request)
        reply = read_until_closed(conn)
    head, _, body = reply.partition(b"\r\n\r\n")
    return head.decode("latin-1"), body


@pytest.fixture(scope="module")
def web(s3, tmp_path_factory):
    """The web alone, listening on 127.0.0.2: an address that is neither 127.0.0.1 nor localhost."""
    service = Service(tmp_path_factory.mktemp("hosts"), s3["env"])
    service.base_url = f"http://127.0.0.2:{service.port}"
    service._spawn("web", [str(BIN / "gunicorn"), "-c", "python:docshift.gunicorn_conf",
                           "--bind", f"127.0.0.2:{service.port}", "app:create_app()"])
    try:
        wait_for(lambda: requests.get(f"{service.base_url}/healthz", timeout=2).status_code in (200, 503), 60,
                 "docshift web on 127.0.0.2")
        service.store().ensure_bucket()
        yield service
    finally:
        service.stop()


def test_a_forged_host_gets_400_from_the_running_service(web):
    key = web.register("forged-host")
    body = b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.doc"\r\n\r\nxx\r\n--b--\r\n'
    head, answer = raw(web.port, (f"POST /v1/conversions HTTP/1.1\r\nHost: {EVIL}\r\nAuthorization: Bearer {key}\r\n"
                                  "Connection: close\r\nContent-Type: multipart/form-data; boundary=b\r\n"
                                  f"Content-Length: {len(body)}\r\n\r\n").encode() + body, "127.0.0.2")
    assert head.startswith("HTTP/1.1 400"), head
    assert "location:" not in head.lower() and EVIL.encode() not in answer
    assert json.loads(answer)["code"] == "invalid_request"
    for host in (EVIL, "127.0.0.3"):  # another loopback address than the one connected to
        head, _ = raw(web.port, f"GET /v1/openapi.json HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode(),
                      "127.0.0.2")
        assert head.startswith("HTTP/1.1 400"), (host, head)


def test_the_address_connected_to_is_a_host_of_the_service(web):
    """Listening on 127.0.0.2, the web answers to that address, with any port (a published one)."""
    for host in (f"127.0.0.2:{web.port}", "127.0.0.2:8000"):
        head, body = raw(web.port, f"GET /v1/openapi.json HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
                         .encode(), "127.0.0.2")
        assert head.startswith("HTTP/1.1 200"), (host, head)
        assert json.loads(body)["servers"] == [{"url": f"http://{host}"}]
