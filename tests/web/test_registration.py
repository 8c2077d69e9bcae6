"""The registration page: the link confirms, only a POST issues a key, shown once; keys rotate;
failures are clear pages."""

import io
import re
import socket
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from urllib.parse import urlsplit

import pytest
import requests
from conftest import register
from itsdangerous import TimestampSigner, URLSafeTimedSerializer

from docshift.accounts import keys, marketplace
from docshift.web.registration import FORM_LIMIT


def token(app, customer="buyer-1", plan="team"):
    return marketplace.LocalMarketplace(app.config["DOCSHIFT"]).issue_token(customer, plan)


def confirm_and_post(client, link):
    """Open the link as a browser does, then press the page's button: the POST's response."""
    page = client.get(link)
    assert page.status_code == 200 and page.headers["Cache-Control"] == "no-store"
    html = page.get_data(as_text=True)
    form = re.search(r'<form method="post" action="([^"]+)">\s*<input type="hidden" name="([^"]+)" value="([^"]+)">',
                     html)
    assert form and 'id="get-key"' in html, html
    action, field, value = form.groups()
    return client.post(action, data={field: value})


def key_in(response):
    return re.search(r'id="api-key">([^<]+)<', response.get_data(as_text=True)).group(1)


def test_key_shown_once_in_the_page(app, client):
    response = confirm_and_post(client, f"/marketplace/register?token={token(app)}")
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    key = key_in(response)
    assert keys.well_formed(key)
    assert client.get("/v1/account/usage", headers={"Authorization": f"Bearer {key}"}).get_json()["plan"] == "team"


def test_marketplace_form_post_and_json(app, client):
    response = client.post("/marketplace/register", data={"x-amzn-marketplace-token": token(app)},
                           headers={"Accept": "application/json"})
    body = response.get_json()
    assert response.status_code == 200 and response.headers["Cache-Control"] == "no-store"
    assert set(body) == {"account_id", "plan", "status", "api_key"} and (body["plan"], body["status"]) == ("team",
                                                                                                      "active")
    assert body["api_key"].startswith("dsk_")


@pytest.mark.parametrize("method", ["get", "post"])
def test_missing_token(client, method):
    response = getattr(client, method)("/marketplace/register")
    assert response.status_code == 400
    assert "registration token missing: open the setup link from the marketplace" in response.get_data(as_text=True)


def test_invalid_and_expired_tokens(app, client):
    good = token(app)
    for bad in (good[:-2] + "xx", "garbage", marketplace.LocalMarketplace(
            replace(app.config["DOCSHIFT"], secret_key="another secret")).issue_token("buyer-1", "team")):
        for response in (client.get(f"/marketplace/register?token={bad}"),
                         client.post("/marketplace/register", data={"x-amzn-marketplace-token": bad})):
            assert response.status_code == 400
            assert "registration token invalid or expired: restart setup from the marketplace" \
                in response.get_data(as_text=True)
    # every token is now past its age
    app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], registration_token_max_age=-1)
    app.extensions.pop("docshift.marketplace")  # the backend is built once per app, from the config
    assert client.get(f"/marketplace/register?token={good}").status_code == 400
    assert client.post("/marketplace/register", data={"x-amzn-marketplace-token": good}).status_code == 400


def test_opening_the_link_changes_no_key(app, client):
    """A link preview or a mail scanner fetches the link, any number of times: no key is issued
    or revoked; only the page's POST issues one, and opening the (now used) link after it keeps
    that key."""
    link = f"/marketplace/register?token={token(app, 'previewed')}"
    for accept in ("text/html", "application/json", "text/html", "*/*"):
        opened = client.get(link, headers={"Accept": accept})
        assert opened.status_code == 200 and opened.headers["Cache-Control"] == "no-store"
        assert "api_key" not in opened.get_data(as_text=True) and 'id="api-key"' not in opened.get_data(as_text=True)
    conn = sqlite3.connect(app.config["DOCSHIFT"].database)
    assert conn.execute("SELECT count(*) FROM api_keys").fetchone()[0] == 0
    key = key_in(confirm_and_post(client, link))
    for _ in range(3):
        assert client.get(link).status_code == 400
    usage = client.get("/v1/account/usage", headers={"Authorization": f"Bearer {key}"})
    assert usage.status_code == 200 and usage.get_json()["plan"] == "team"
    assert conn.execute("SELECT count(*) FROM api_keys").fetchone()[0] == 1
    conn.close()


def test_the_link_as_json_says_how_to_register(app, client):
    opened = client.get(f"/marketplace/register?token={token(app)}", headers={"Accept": "application/json"})
    assert opened.status_code == 200
    assert opened.get_json() == {"plan": "team", "register": {
        "method": "POST", "url": "/marketplace/register", "field": "x-amzn-marketplace-token"}}


def test_registering_again_rotates_the_key(app, client):
    first = register(client, app, "rotating")
    second = register(client, app, "rotating")
    assert first != second
    old = client.get("/v1/account/usage", headers={"Authorization": f"Bearer {first}"})
    assert old.status_code == 401 and old.get_json()["code"] == "invalid_api_key"
    assert client.get("/v1/account/usage", headers={"Authorization": f"Bearer {second}"}).status_code == 200


def test_only_the_hash_is_stored(app, client):
    key = register(client, app, "hashed")
    conn = sqlite3.connect(app.config["DOCSHIFT"].database)
    rows = conn.execute("SELECT key_hash, hint FROM api_keys").fetchall()
    conn.close()
    assert (keys.digest(key), keys.hint(key)) in rows
    with open(app.config["DOCSHIFT"].database, "rb") as f:
        assert key.encode() not in f.read()


def test_key_format():
    key = keys.generate()
    assert re.fullmatch(r"dsk_[0-9A-Za-z]{38}", key)
    assert keys.well_formed(key)
    flipped = key[:10] + ("a" if key[10] != "a" else "b") + key[11:]
    assert not keys.well_formed(flipped)
    assert keys.hint(key) == key[:8] + "..."
    assert len({keys.generate() for _ in range(1000)}) == 1000


def test_issue_token_cli_prints_the_link_last(app, client):
    result = app.test_cli_runner().invoke(args=["marketplace", "issue-token", "--customer", "cli", "--plan",
                                                "business"])
    assert result.exit_code == 0, result.output
    link = result.output.strip().splitlines()[-1]
    assert link.startswith("http://") and "/marketplace/register?token=" in link
    url = urlsplit(link)
    assert "curl" not in result.output  # opening the link changes nothing: a person presses its button
    response = confirm_and_post(client, f"{url.path}?{url.query}")
    assert keys.well_formed(key_in(response)) and "<strong>business</strong>" in response.get_data(as_text=True)


def test_a_token_issues_one_key_once(app, client):
    """A link seen in a proxy's log cannot take the account over: once used, the token is dead,
    for the page and for the POST; the key it issued stays valid."""
    link = f"/marketplace/register?token={token(app, 'once')}"
    key = key_in(confirm_and_post(client, link))
    value = link.split("=", 1)[1]
    for response in (client.post("/marketplace/register", data={"x-amzn-marketplace-token": value}),
                     client.post(link), client.get(link)):
        assert response.status_code == 400
        assert "registration token invalid or expired: restart setup from the marketplace" \
            in response.get_data(as_text=True)
    assert client.get("/v1/account/usage", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    with sqlite3.connect(app.config["DOCSHIFT"].database) as conn:
        assert conn.execute("SELECT count(*) FROM api_keys").fetchone()[0] == 1
        assert value.encode() not in b"".join(row[0].encode() for row in conn.iterdump())


def test_two_tokens_for_one_customer_each_work(app, client):
    """The recovery path: a fresh token for the same customer issues a new key, once."""
    first = key_in(confirm_and_post(client, f"/marketplace/register?token={token(app, 'again')}"))
    second = key_in(confirm_and_post(client, f"/marketplace/register?token={token(app, 'again')}"))
    assert first != second
    assert client.get("/v1/account/usage", headers={"Authorization": f"Bearer {first}"}).status_code == 401


def test_a_token_lives_a_day(app, client):
    class DayOld(TimestampSigner):
        def get_timestamp(self):
            return int(time.time()) - 24 * 3600 - 60

    issuer = marketplace.LocalMarketplace(app.config["DOCSHIFT"])
    fresh = issuer.issue_token("late", "team")
    issuer.serializer = URLSafeTimedSerializer(app.config["DOCSHIFT"].secret_key, salt=issuer.serializer.salt,
                                               signer=DayOld)
    stale = issuer.issue_token("late", "team")
    assert client.get(f"/marketplace/register?token={stale}").status_code == 400
    assert client.post("/marketplace/register", data={"x-amzn-marketplace-token": stale}).status_code == 400
    assert client.get(f"/marketplace/register?token={fresh}").status_code == 200


def test_registration_pages_cannot_be_framed(app, client):
    link = f"/marketplace/register?token={token(app, 'framed')}"
    page = client.get(link)
    answers = [page, confirm_and_post(client, link), client.get(link), client.get("/marketplace/register"),
               client.post("/marketplace/register", headers={"Accept": "application/json"})]
    for response in answers:
        assert response.headers["X-Frame-Options"] == "DENY"
        policy = dict(d.strip().split(" ", 1) for d in response.headers["Content-Security-Policy"].split(";"))
        assert policy["default-src"] == "'none'" and policy["frame-ancestors"] == "'none'"
        assert policy["form-action"] == "'self'" and "unsafe-inline" not in policy["script-src"]
    nonce = re.search(r"'nonce-([^']+)'", answers[1].headers["Content-Security-Policy"]).group(1)
    assert f'<script nonce="{nonce}">' in answers[1].get_data(as_text=True)
    assert "onclick" not in answers[1].get_data(as_text=True)


def test_one_token_posted_at_once_many_times_issues_one_key(s3, tmp_path):
    """Concurrent POSTs of one token to the real gunicorn (two worker processes): one key."""
    from conftest import Service

    service = Service(tmp_path / "svc", s3["env"])
    service.start_web()
    try:
        service.wait_healthy_web()
        value = marketplace.LocalMarketplace(service.config()).issue_token("raced", "team")
        start = threading.Barrier(12)

        def post(_):
            start.wait()
            return requests.post(f"{service.base_url}/marketplace/register",
                                 data={"x-amzn-marketplace-token": value}, headers={"Accept": "application/json"},
                                 timeout=30)

        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(post, range(12)))
        assert sorted(a.status_code for a in answers) == [200] + [400] * 11, [a.text for a in answers]
        assert all(a.json()["code"] == "invalid_request" for a in answers if a.status_code == 400)
        with sqlite3.connect(service.config().database) as conn:
            assert conn.execute("SELECT count(*) FROM api_keys").fetchone()[0] == 1
    finally:
        service.stop()


def other_spellings(value):
    """Other spellings itsdangerous reads as the same signed token: padding appended, the
    signature's last character with other values of its unused low bits, a non-ASCII character
    its decoder drops."""
    from itsdangerous.encoding import base64_decode

    head, signature = value.rsplit(".", 1)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    low_bits = [c for c in alphabet if c != signature[-1]
                and base64_decode(signature[:-1] + c) == base64_decode(signature)]
    assert low_bits  # a 27-character SHA-1 signature leaves 2 bits of its last character unused
    return [value + "=", value + "==", *(f"{head}.{signature[:-1]}{c}" for c in low_bits),
            f"{head}.{signature[:4]}\u00e9{signature[4:]}"]


def test_a_used_token_in_another_spelling_issues_no_key(app, client):
    """Whoever saw a used link cannot append '=' (or flip the signature's unused bits) and take
    the account over: the token is used whatever its spelling."""
    link = f"/marketplace/register?token={token(app, 'respelled')}"
    key = key_in(confirm_and_post(client, link))
    value = link.split("=", 1)[1]
    for spelling in other_spellings(value):
        for response in (client.post("/marketplace/register", data={"x-amzn-marketplace-token": spelling}),
                         client.get("/marketplace/register", query_string={"token": spelling})):
            assert response.status_code == 400, (spelling, response.get_data(as_text=True)[:300])
            assert "registration token invalid or expired" in response.get_data(as_text=True)
    assert client.get("/v1/account/usage", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    with sqlite3.connect(app.config["DOCSHIFT"].database) as conn:
        assert conn.execute("SELECT count(*) FROM api_keys").fetchone()[0] == 1


def test_only_the_tokens_own_spelling_registers(app, client):
    """A token is accepted only as it was issued (it re-encodes to exactly itself): another
    spelling of a fresh token is refused, and the token itself still works after that."""
    value = token(app, "canonical")
    for spelling in other_spellings(value):
        response = client.post("/marketplace/register", data={"x-amzn-marketplace-token": spelling},
                               headers={"Accept": "application/json"})
        assert response.status_code == 400 and response.get_json()["code"] == "invalid_request", spelling
    with sqlite3.connect(app.config["DOCSHIFT"].database) as conn:
        assert conn.execute("SELECT count(*) FROM api_keys").fetchone()[0] == 0
    response = client.post("/marketplace/register", data={"x-amzn-marketplace-token": value},
                           headers={"Accept": "application/json"})
    assert response.status_code == 200 and keys.well_formed(response.get_json()["api_key"])


SAME_ORIGIN = {"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"}  # the test client's host


@pytest.mark.parametrize("headers", [
    {"Origin": "https://attacker.example", "Sec-Fetch-Site": "cross-site"},
    {"Origin": "https://attacker.example"},  # a browser without Fetch Metadata
    {"Origin": "null"},  # a sandboxed frame, a redirect across origins
    {"Origin": "http://localhost", "Sec-Fetch-Site": "same-site"},  # a sibling subdomain's page
])
def test_a_cross_site_post_only_shows_the_button(app, client, headers):
    """A page elsewhere that auto-submits its own token to this endpoint (login CSRF) lands the
    visitor on the confirmation page: no key is issued until they press its button, and the
    button's POST (same origin) does issue it."""
    page = client.post("/marketplace/register", data={"x-amzn-marketplace-token": token(app, "csrf-target")},
                       headers=headers)
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and page.headers["Cache-Control"] == "no-store"
    assert 'id="get-key"' in html and 'id="api-key"' not in html and "dsk_" not in html
    with sqlite3.connect(app.config["DOCSHIFT"].database) as conn:
        assert conn.execute("SELECT count(*) FROM api_keys").fetchone()[0] == 0
    action, field, value = re.search(
        r'<form method="post" action="([^"]+)">\s*<input type="hidden" name="([^"]+)" value="([^"]+)">', html).groups()
    pressed = client.post(action, data={field: value}, headers=SAME_ORIGIN)
    assert pressed.status_code == 200 and keys.well_formed(key_in(pressed))


def test_a_cross_site_post_asking_json_gets_no_key(app, client):
    response = client.post("/marketplace/register", data={"x-amzn-marketplace-token": token(app)},
                           headers={"Origin": "https://attacker.example", "Accept": "application/json"})
    assert response.status_code == 200 and "api_key" not in response.get_json()
    assert response.get_json()["register"]["field"] == "x-amzn-marketplace-token"


@pytest.mark.parametrize("headers", [
    SAME_ORIGIN,
    {"Origin": "http://localhost"},  # a browser without Fetch Metadata
    {"Sec-Fetch-Site": "none"},  # the user's own action, no page behind it
    {"Origin": "https://docshift.example.com"},  # DOCSHIFT_BASE_URL's host, TLS ended by a proxy
    {},  # curl, a script, the marketplace's tooling: no browser, no cross-site request
])
def test_a_same_origin_or_non_browser_post_issues_the_key(app, client, headers):
    app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], base_url="https://docshift.example.com")
    response = client.post("/marketplace/register", data={"x-amzn-marketplace-token": token(app)}, headers=headers)
    assert response.status_code == 200 and keys.well_formed(key_in(response))


class CountedBody(io.BytesIO):
    """A request body that says how much of it the app read."""

    def __init__(self, data):
        super().__init__(data)
        self.taken = 0

    def read(self, size=-1):
        chunk = super().read(size)
        self.taken += len(chunk)
        return chunk


MIB_FORM = b"x-amzn-marketplace-token=" + b"a" * (1024 * 1024 - 25)


@pytest.mark.parametrize("accept", ["text/html", "application/json"])
def test_a_1_mib_registration_form_is_refused_unread(app, client, accept):
    body = CountedBody(MIB_FORM)
    response = client.post("/marketplace/register", input_stream=body, content_length=len(MIB_FORM),
                           content_type="application/x-www-form-urlencoded", headers={"Accept": accept})
    assert response.status_code == 413 and body.taken == 0
    if accept == "application/json":
        assert response.content_type == "application/problem+json"
        assert response.get_json()["status"] == 413 and "registration form" in response.get_json()["detail"]
    else:
        assert "registration form is too large" in response.get_data(as_text=True)
        assert response.headers["X-Frame-Options"] == "DENY"


def test_a_chunked_registration_form_stops_at_the_limit(app, client):
    """Without a Content-Length the limit is found while reading: no more than it is read."""
    body = CountedBody(MIB_FORM)
    response = client.post("/marketplace/register", input_stream=body,
                           content_type="application/x-www-form-urlencoded", headers={"Accept": "application/json"})
    assert response.status_code == 413 and body.taken < 64 * 1024


def test_a_registration_form_of_a_few_kib_still_registers(app, client):
    response = client.post("/marketplace/register", data={"x-amzn-marketplace-token": token(app), "note": "x" * 6000},
                           headers={"Accept": "application/json"})
    assert response.status_code == 200, response.get_data(as_text=True)


def test_a_1_mib_registration_form_is_refused_at_once_by_gunicorn(s3, tmp_path):
    """The real web: the 413 comes back after the headers, while the client has sent a few bytes
    of its 1 MiB (before, the app waited for all of it, then parsed it)."""
    from conftest import Service

    service = Service(tmp_path / "svc", s3["env"])
    service.start_web()
    try:
        service.wait_healthy_web()
        with socket.create_connection(("127.0.0.1", service.port), timeout=10) as conn:
            started = time.monotonic()
            conn.sendall(f"POST /marketplace/register HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\n"
                         "Accept: application/json\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                         f"Content-Length: {len(MIB_FORM)}\r\n\r\n".encode() + MIB_FORM[:100])
            reply = b""
            while b"}" not in reply:  # the problem's JSON body, whole
                chunk = conn.recv(65536)
                assert chunk, reply
                reply += chunk
            took = time.monotonic() - started
        assert reply.startswith(b"HTTP/1.1 413"), reply
        assert b"application/problem+json" in reply and b"registration form" in reply
        assert took < 3, took
    finally:
        service.stop()


@pytest.mark.parametrize(("note", "answer"), [(200 * 1024, b"HTTP/1.1 413"), (6000, b"HTTP/1.1 400")])
def test_a_chunked_registration_form_is_read_whole_or_refused_by_gunicorn(s3, tmp_path, note, answer):
    """The real web, a chunked form whose token comes last: of 200 KB, too large (413), not "token missing"; of
    6 KB, read whole (its token is refused as invalid, not missing)."""
    from conftest import Service

    form = b"note=" + b"n" * note + b"&x-amzn-marketplace-token=abc"
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in
                      (form[start:start + 16384] for start in range(0, len(form), 16384))) + b"0\r\n\r\n"
    service = Service(tmp_path / "svc", s3["env"])
    service.start_web()
    try:
        service.wait_healthy_web()
        with socket.create_connection(("127.0.0.1", service.port), timeout=10) as conn:
            conn.sendall(f"POST /marketplace/register HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\n"
                         "Accept: application/json\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                         "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n".encode())
            try:
                conn.sendall(chunks)
            except OSError:  # the answer may come, and the connection close, before the whole body is sent
                pass
            reply = b""
            try:
                while chunk := conn.recv(65536):
                    reply += chunk
            except ConnectionResetError:  # closed with the rest of the body unread: the answer came first
                pass
        assert reply.startswith(answer), reply[:300]
        assert b"application/problem+json" in reply
        assert (b"registration form is too large" if note > FORM_LIMIT else b"token invalid or expired") in reply
    finally:
        service.stop()


def test_a_key_for_an_inactive_subscription_says_so(app, client):
    """A customer who cancelled and opens a setup link again gets a key, which is refused until the subscription is
    active again: the page and the JSON say so, not only the 403 that follows."""
    from docshift.storage import accounts
    from docshift.web.context import get_db

    first = client.post("/marketplace/register", data={"x-amzn-marketplace-token": token(app, "leaver")},
                        headers={"Accept": "application/json"}).get_json()
    with app.app_context():
        accounts.set_account(get_db(), first["account_id"], status="inactive")
    again = client.post("/marketplace/register", data={"x-amzn-marketplace-token": token(app, "leaver")},
                        headers={"Accept": "application/json"}).get_json()
    assert again["status"] == "inactive"
    page = client.post("/marketplace/register", data={"x-amzn-marketplace-token": token(app, "leaver")})
    assert "The subscription is inactive" in page.get_data(as_text=True)
    assert client.get("/v1/account/usage", headers={"Authorization": f"Bearer {key_in(page)}"}).status_code == 403


def test_a_refusal_asked_as_a_problem_document_is_one(app, client):
    response = client.post("/marketplace/register", data={"x-amzn-marketplace-token": "garbage"},
                           headers={"Accept": "application/problem+json"})
    assert response.status_code == 400 and response.mimetype == "application/problem+json"
    assert response.get_json()["code"] == "invalid_request"


def test_a_tampered_token_leaves_no_part_of_the_real_one_in_the_log(app, client, caplog):
    good = token(app, "tampered")
    payload, signature = good.rsplit(".", 1)
    tampered = payload[:-1] + ("A" if payload[-1] != "A" else "B") + "." + signature
    with caplog.at_level("INFO", logger="docshift"):
        assert client.post("/marketplace/register", data={"x-amzn-marketplace-token": tampered}).status_code == 400
    assert "registration refused" in caplog.text and signature not in caplog.text
