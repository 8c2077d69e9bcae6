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
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 # a name for this machine that is not "localhost": plain HTTP to it is not a secure context
                 "--host-resolver-rules=MAP docshift.test 127.0.0.1"]
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




@pytest.fixture
def named_web(s3, tmp_path):
    """A web of its own whose public URL is http://docshift.test:PORT (DOCSHIFT_BASE_URL), the
    name the browser above resolves to this machine."""
    from conftest import Service, wait_for

    service = Service(tmp_path / "named", s3["env"])
    service.base_url = service.env["DOCSHIFT_BASE_URL"] = f"http://docshift.test:{service.port}"
    service.start_web()
    try:
        wait_for(lambda: requests.get(f"http://127.0.0.1:{service.port}/healthz", timeout=2).status_code
                 in (200, 503), 60, "docshift web")
        yield service
    finally:
        service.stop()


def test_a_page_elsewhere_cannot_register_the_visitor(page, live):
    """Login CSRF: a page of another site (http://localhost) submits its own token to the
    registration endpoint as soon as it opens. The visitor lands on the confirmation page with
    no key issued (as a buyer sent by AWS Marketplace does); only its button, a same-origin POST,
    issues one. On 127.0.0.1 Chromium says so in Sec-Fetch-Site."""
    cross_site_post_shows_the_button(page, live)


def test_a_page_elsewhere_cannot_register_the_visitor_by_origin_alone(page, named_web):
    """The same over plain HTTP to a name that is not localhost, where Chromium sends no
    Sec-Fetch-*: Origin alone tells, and the button's POST must carry its own (not "null")."""
    cross_site_post_shows_the_button(page, named_web)


def cross_site_post_shows_the_button(page, service):
    base = service.base_url
    token = marketplace.LocalMarketplace(service.config()).issue_token(f"csrf-{random.randrange(10**9)}", "starter")
    elsewhere = f"http://localhost:{service.port}/elsewhere"
    page.route(elsewhere, lambda route: route.fulfill(content_type="text/html", body=(
        f'<form id="f" method="post" action="{base}/marketplace/register">'
        f'<input type="hidden" name="x-amzn-marketplace-token" value="{token}"></form>'
        '<script>document.getElementById("f").submit()</script>')))
    with page.expect_navigation(url=f"{base}/marketplace/register") as navigation:
        page.goto(elsewhere)
    landed = navigation.value
    assert landed.request.all_headers()["origin"] == f"http://localhost:{service.port}"
    assert landed.status == 200 and page.title() == "docshift: get your API key", page.content()[-600:]
    assert page.locator("#api-key").count() == 0 and "dsk_" not in page.content()

    pressed = press_get_key(page)
    assert pressed.request.all_headers()["origin"] == base  # not "null": the pages' referrer policy
    assert pressed.status == 200 and page.title() == "docshift: your API key", page.content()[-600:]
    key = page.locator("#api-key").inner_text().strip()
    assert keys.well_formed(key)
    assert requests.get(f"http://127.0.0.1:{service.port}/v1/account/usage",
                        headers={"Authorization": f"Bearer {key}"}, timeout=10).status_code == 200
