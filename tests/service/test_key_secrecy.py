"""An API key is shown once, on the registration page, and nowhere else: not in the
database files, not in any log, not in any other response."""

from pathlib import Path

import requests

from docshift.accounts import marketplace


def test_key_never_in_clear_outside_the_registration_page(live, legacy):
    token = marketplace.LocalMarketplace(live.config()).issue_token("secret-keeper", "starter")
    registration = requests.post(f"{live.base_url}/marketplace/register", data={"x-amzn-marketplace-token": token},
                                 headers={"Accept": "application/json"}, timeout=10)
    key = registration.json()["api_key"]
    auth = {"Authorization": f"Bearer {key}"}

    responses = []
    submitted = live.submit(key, legacy["doc"])
    responses.append(submitted)
    task = live.wait(key, submitted.json()["task_id"])
    responses.append(requests.get(submitted.json()["status_url"], headers=auth, timeout=10))
    responses.append(requests.get(task["download_url"], timeout=10))
    responses.append(requests.get(f"{live.base_url}/v1/account/usage", headers=auth, timeout=10))
    responses.append(requests.get(f"{live.base_url}/v1/conversions/tsk_000000000000000000000000", headers=auth,
                                  timeout=10))
    responses.append(requests.post(f"{live.base_url}/v1/conversions", headers=auth, files={"file": ("x.txt", b"x")},
                                   timeout=10))
    mistyped = key[:-1] + ("x" if key[-1] != "x" else "y")
    responses.append(requests.get(f"{live.base_url}/v1/account/usage",
                                  headers={"Authorization": f"Bearer {mistyped}"}, timeout=10))
    responses.append(requests.get(f"{live.base_url}/healthz", timeout=10))
    for response in responses:
        assert key not in response.text and key not in str(response.headers)
        assert mistyped not in response.text

    files = [p for p in Path(live.data_dir).rglob("*") if p.is_file() and p.suffix != ".xlsx"]
    assert any(p.name == "docshift.db" for p in files) and any(p.suffix == ".log" for p in files)
    for path in files:
        content = path.read_bytes()
        assert key.encode() not in content, f"the key is in {path.name}"
        assert mistyped.encode() not in content, f"a mistyped key is in {path.name}"
