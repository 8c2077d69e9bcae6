"""The registration page in a real headless Chromium against the live service: opening the
link shows a button and changes nothing; the button's POST shows the key, the buyer copies
it to the clipboard (under the pages' Content-Security-Policy) and uses it; the used link
is refused; a fresh link shows a new key, never the same one again (the old one is revoked)."""

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


def press_get_key(page):
    """Press the confirmation page's button; the response of the POST it makes."""
    with page.expect_navigation() as navigation:
        page.locator("#get-key").click()
    return navigation.value


def link_for(live, customer):
    token = marketplace.LocalMarketplace(live.config()).issue_token(customer, "starter")
    return f"{live.base_url}/marketplace/register?token={token}"


def test_key_shown_copied_used_and_not_shown_again(page, live):
    customer = f"browser-buyer-{random.randrange(10**9)}"
    link = link_for(live, customer)
    refused = []  # what the browser blocked under the pages' Content-Security-Policy
    page.on("console", lambda message: refused.append(message.text) if "Content Security Policy" in message.text
            else None)
    # opened twice, as a link preview and then the buyer would: a page with a button, no key
    for _ in range(2):
        response = page.goto(link)
        assert response.status == 200
        assert response.headers["cache-control"] == "no-store"
        assert page.title() == "docshift: get your API key"
        assert page.locator("#api-key").count() == 0

    response = press_get_key(page)
    assert response.status == 200 and response.request.method == "POST"
    assert response.headers["cache-control"] == "no-store"
    assert page.title() == "docshift: your API key"

    key_element = page.locator("#api-key")
    expect(key_element).to_be_visible()
    first = key_element.inner_text().strip()
    # the page's own style applies (its nonce): the key sits in its grey box
    assert key_element.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(242, 244, 247)"
    assert keys.well_formed(first), first

    page.locator("#copy").click()
    expect(page.locator("#copy")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == first

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "registration.png"), full_page=True)

    before = usage(live, first)
    assert before.status_code == 200, before.text
    assert before.json()["plan"] == "starter"

    # the link opened again after the key was issued: refused, and the key stays valid
    response = page.goto(link)
    assert response.status == 400 and response.headers["x-frame-options"] == "DENY"
    assert "registration token invalid or expired" in page.locator("#error").inner_text()
    assert first not in page.content()
    assert usage(live, first).status_code == 200

    # a fresh link (the marketplace's recovery path) issues a new key and revokes the first one
    assert page.goto(link_for(live, customer)).status == 200
    assert press_get_key(page).status == 200
    second = page.locator("#api-key").inner_text().strip()
    assert keys.well_formed(second), second
    assert second != first
    assert first not in page.content()

    after = usage(live, first)
    assert after.status_code == 401 and after.json()["code"] == "invalid_api_key"
    assert usage(live, second).status_code == 200
    assert refused == []


@pytest.mark.parametrize("query,message", [
    ("", "registration token missing: open the setup link from the marketplace"),
    ("?token=garbage", "registration token invalid or expired: restart setup from the marketplace"),
])
def test_refused_registration_pages(page, live, query, message):
    response = page.goto(f"{live.base_url}/marketplace/register{query}")
    assert response.status == 400
    assert response.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    expect(page.locator("h1")).to_have_text("Registration failed")
    assert message in page.locator("body").inner_text()
    assert page.locator("#api-key").count() == 0
