"""The registration page: token in, key shown once; keys rotate; failures are clear pages."""

import re
import sqlite3
from urllib.parse import urlsplit

import pytest
from conftest import register

from docshift.accounts import keys, marketplace


def token(app, customer="buyer-1", plan="team"):
    return marketplace.LocalMarketplace(app.config).issue_token(customer, plan)


def test_key_shown_once_in_the_page(app, client):
    response = client.get(f"/marketplace/register?token={token(app)}")
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    html = response.get_data(as_text=True)
    key = re.search(r'id="api-key">([^<]+)<', html).group(1)
    assert keys.well_formed(key)
    assert client.get("/v1/account/usage", headers={"Authorization": f"Bearer {key}"}).get_json()["plan"] == "team"


def test_marketplace_form_post_and_json(app, client):
    response = client.post("/marketplace/register", data={"x-amzn-marketplace-token": token(app)},
                           headers={"Accept": "application/json"})
    body = response.get_json()
    assert response.status_code == 200 and response.headers["Cache-Control"] == "no-store"
    assert set(body) == {"account_id", "plan", "api_key"} and body["plan"] == "team"
    assert body["api_key"].startswith("dsk_")


@pytest.mark.parametrize("method", ["get", "post"])
def test_missing_token(client, method):
    response = getattr(client, method)("/marketplace/register")
    assert response.status_code == 400
    assert "registration token missing: open the setup link from the marketplace" in response.get_data(as_text=True)


def test_invalid_and_expired_tokens(app, client):
    good = token(app)
    for bad in (good[:-2] + "xx", "garbage", marketplace.LocalMarketplace(
            {**app.config, "SECRET_KEY": "another secret"}).issue_token("buyer-1", "team")):
        response = client.get(f"/marketplace/register?token={bad}")
        assert response.status_code == 400
        assert "registration token invalid or expired: restart setup from the marketplace" \
            in response.get_data(as_text=True)
    app.config["REGISTRATION_TOKEN_MAX_AGE"] = -1  # every token is now past its age
    app.extensions.pop("docshift.marketplace")  # the backend is built once per app, from the config
    assert client.get(f"/marketplace/register?token={good}").status_code == 400


def test_registering_again_rotates_the_key(app, client):
    first = register(client, app, "rotating")
    second = register(client, app, "rotating")
    assert first != second
    old = client.get("/v1/account/usage", headers={"Authorization": f"Bearer {first}"})
    assert old.status_code == 401 and old.get_json()["code"] == "invalid_api_key"
    assert client.get("/v1/account/usage", headers={"Authorization": f"Bearer {second}"}).status_code == 200


def test_only_the_hash_is_stored(app, client):
    key = register(client, app, "hashed")
    conn = sqlite3.connect(app.config["DATABASE"])
    rows = conn.execute("SELECT key_hash, hint FROM api_keys").fetchall()
    conn.close()
    assert (keys.digest(key), keys.hint(key)) in rows
    with open(app.config["DATABASE"], "rb") as f:
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
    response = client.get(f"{url.path}?{url.query}", headers={"Accept": "application/json"})
    assert response.get_json()["plan"] == "business"
