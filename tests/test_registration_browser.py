"""The registration page in a real headless Chromium against the live service: the buyer
sees the key, copies it to the clipboard, uses it, and a reload shows a new key, never
the same one again (the old one is revoked)."""

import os
import random
import tempfile
from pathlib import Path

import pytest
import requests
from playwright.sync_api import expect, sync_playwright

from docshift.accounts import keys, marketplace

CHROMIUM = "/usr/bin/chromium"
# without the background-networking flags Chromium keeps trying to reach Google's hosts
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# the screenshot is kept with the session's files, outside the checkout, for a person to look at
ARTIFACTS = Path(os.environ.get("DOCSHIFT_TEST_ARTIFACTS") or tempfile.gettempdir()) / "docshift-artifacts"


@pytest.fixture(scope="module")
def browser():
    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
    finally:
        playwright.stop()


@pytest.fixture
def page(browser, live):
    context = browser.new_context(viewport={"width": 900, "height": 600})
    # the Copy button uses the async clipboard API; reading it back needs clipboard-read
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live.base_url)
    page = context.new_page()
    try:
        yield page
    finally:
        context.close()


def usage(live, key):
    return requests.get(f"{live.base_url}/v1/account/usage",
                        headers={"Authorization": f"Bearer {key}"}, timeout=10)


def test_key_shown_copied_used_and_not_shown_again(page, live):
    customer = f"browser-buyer-{random.randrange(10**9)}"
    token = marketplace.LocalMarketplace(live.config()).issue_token(customer, "starter")
    response = page.goto(f"{live.base_url}/marketplace/register?token={token}")
    assert response.status == 200
    assert response.headers["cache-control"] == "no-store"
    assert page.title() == "docshift: your API key"

    key_element = page.locator("#api-key")
    expect(key_element).to_be_visible()
    first = key_element.inner_text().strip()
    assert keys.well_formed(first), first

    page.locator("#copy").click()
    expect(page.locator("#copy")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == first

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "registration.png"), full_page=True)

    before = usage(live, first)
    assert before.status_code == 200, before.text
    assert before.json()["plan"] == "starter"

    # a reload sends the same token again: a new key is issued and the first one revoked
    reloaded = page.reload()
    assert reloaded.status == 200
    assert reloaded.headers["cache-control"] == "no-store"
    second = page.locator("#api-key").inner_text().strip()
    assert keys.well_formed(second), second
    assert second != first
    assert first not in page.content()

    after = usage(live, first)
    assert after.status_code == 401 and after.json()["code"] == "invalid_api_key"
    assert usage(live, second).status_code == 200


@pytest.mark.parametrize("query,message", [
    ("", "registration token missing: open the setup link from the marketplace"),
    ("?token=garbage", "registration token invalid or expired: restart setup from the marketplace"),
])
def test_refused_registration_pages(page, live, query, message):
    response = page.goto(f"{live.base_url}/marketplace/register{query}")
    assert response.status == 400
    expect(page.locator("h1")).to_have_text("Registration failed")
    assert message in page.locator("body").inner_text()
    assert page.locator("#api-key").count() == 0
