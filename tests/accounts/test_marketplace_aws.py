"""The AWS Marketplace backend, with the AWS APIs faked by botocore's Stubber (the one fake
we accept): registration tokens, entitlements per plan, subscription notifications, throttling.
Everything else is real: the app, its SQLite database, the worker code."""

import base64
import hashlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from aws_stubs import ACCOUNT, LICENSE, QUEUE, Aws
from conftest import post_file

from docshift.accounts import subscriptions
from docshift.engine import Engine
from docshift.storage import accounts, tasks
from docshift.tasks import conversion, maintenance
from docshift.web.context import get_db, get_store


@pytest.fixture
def aws(app):
    app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], marketplace="aws")
    fake = Aws(app.config["DOCSHIFT"])
    app.extensions["docshift.marketplace"] = fake.backend
    yield fake
    fake.done()


def register(client, token="tok-1"):
    return client.post("/marketplace/register", data={"x-amzn-marketplace-token": token},
                       headers={"Accept": "application/json"})


def account(app, customer=ACCOUNT):
    with app.app_context():
        return accounts.find_account(get_db(), "aws", customer)


def sync(app, aws):
    with app.app_context():
        return subscriptions.sync_subscriptions(get_db(), aws.backend)


@pytest.mark.parametrize("plan,quota", [("starter", 500), ("team", 2500), ("business", 10000)])
def test_valid_token_with_each_plan(app, client, aws, plan, quota):
    aws.resolves("tok-1")
    aws.entitled(plan)
    response = register(client)
    assert response.status_code == 200 and response.get_json()["plan"] == plan
    key = response.get_json()["api_key"]
    usage = client.get("/v1/account/usage", headers={"Authorization": f"Bearer {key}"}).get_json()
    assert usage["plan"] == plan and usage["included_quota"] == quota
    row = account(app)
    assert row["status"] == "active" and row["license_arn"] == LICENSE


def test_the_best_current_entitlement_wins(app, client, aws):
    aws.resolves("tok-1")
    aws.entitled("starter", "business")
    assert register(client).get_json()["plan"] == "business"


def test_no_entitlement_yet_is_pending(app, client, aws):
    aws.resolves("tok-1")
    aws.entitled()
    response = register(client)
    assert response.status_code == 200  # the key is shown once, now
    denied = client.get("/v1/account/usage", headers={"Authorization": f"Bearer {response.get_json()['api_key']}"})
    assert denied.status_code == 403 and denied.get_json()["code"] == "subscription_pending_or_inactive"
    assert account(app)["status"] == "pending"


def test_an_account_without_a_plan_is_not_activated_and_never_a_500(app, client, aws):
    aws.resolves("tok-1")
    aws.entitled()
    key = register(client).get_json()["api_key"]
    refused = app.test_cli_runner().invoke(args=["marketplace", "activate", "--customer", ACCOUNT])
    assert refused.exit_code != 0 and "has no plan" in refused.output and "set-plan" in refused.output
    assert account(app)["status"] == "pending"
    # made active some other way (an operator's SQL, an older version's CLI): still a clear 403
    with app.app_context():
        accounts.set_account(get_db(), account(app)["id"], status="active")
    for path in ("/v1/account/usage", "/v1/conversions/tsk_000000000000000000000000"):
        denied = client.get(path, headers={"Authorization": f"Bearer {key}"})
        assert denied.status_code == 403 and denied.get_json()["code"] == "subscription_pending_or_inactive"
    assert app.test_cli_runner().invoke(args=["marketplace", "set-plan", "--customer", ACCOUNT,
                                              "--plan", "team"]).exit_code == 0
    assert client.get("/v1/account/usage", headers={"Authorization": f"Bearer {key}"}).get_json()["plan"] == "team"


def test_expired_entitlement_does_not_count(app, client, aws):
    aws.resolves("tok-1")
    aws.entitled("team", expires=datetime.now(UTC) - timedelta(days=1))
    register(client)
    assert account(app)["status"] == "pending"


@pytest.mark.parametrize("error", ["InvalidTokenException", "ExpiredTokenException"])
def test_invalid_and_expired_tokens(client, aws, error):
    aws.metering_stub.add_client_error("resolve_customer", service_error_code=error, http_status_code=400)
    response = client.post("/marketplace/register", data={"x-amzn-marketplace-token": "bad"})
    assert response.status_code == 400
    assert "registration token invalid or expired: restart setup from the marketplace" \
        in response.get_data(as_text=True)


def test_token_of_another_product(client, aws):
    aws.resolves("tok-1", product="prod-other")
    assert register(client).status_code == 400


def test_throttled_registration_asks_to_come_back(client, aws):
    aws.metering_stub.add_client_error("resolve_customer", service_error_code="ThrottlingException",
                                       http_status_code=400)
    response = client.post("/marketplace/register", data={"x-amzn-marketplace-token": "tok"})
    assert response.status_code == 503 and "open the setup link again" in response.get_data(as_text=True)


def test_registering_again_rotates_and_refreshes_the_plan(app, client, aws):
    aws.resolves("tok-1")
    aws.entitled("starter")
    first = register(client).get_json()["api_key"]
    aws.resolves("tok-2")
    aws.entitled("team")
    second = register(client, "tok-2").get_json()
    assert second["plan"] == "team"
    assert client.get("/v1/account/usage", headers={"Authorization": f"Bearer {first}"}).status_code == 401


def test_a_marketplace_token_issues_one_key_once(app, client, aws):
    """The second POST of a token is refused without asking the marketplace again."""
    aws.resolves("tok-1")
    aws.entitled("starter")
    key = register(client).get_json()["api_key"]
    again = register(client)
    assert again.status_code == 400 and again.get_json()["code"] == "invalid_request"
    assert "registration token invalid or expired" in again.get_json()["detail"]
    assert client.get("/v1/account/usage", headers={"Authorization": f"Bearer {key}"}).status_code == 200


def test_subscribe_success_activates_a_pending_account(app, client, aws):
    aws.resolves("tok-1")
    aws.entitled()
    register(client)
    receipt, = aws.notify("subscribe-success")
    aws.entitled("team")
    aws.acknowledged(receipt)
    sync(app, aws)
    row = account(app)
    assert (row["status"], row["plan"]) == ("active", "team") and row["activated_at"]


def test_subscribe_success_before_the_entitlement_shows_stays_queued(app, aws):
    aws.notify("subscribe-success")
    aws.entitled()
    assert sync(app, aws) == []  # no delete_message: the message comes back later
    assert account(app) is None


def test_subscribe_fail_leaves_it_pending(app, aws):
    receipt, = aws.notify("subscribe-fail")
    aws.entitled()
    aws.acknowledged(receipt)
    sync(app, aws)
    assert account(app)["status"] == "pending"


def test_unsubscribe_pending_keeps_access_until_success(app, client, aws, legacy, office):
    aws.resolves("tok-1")
    aws.entitled("starter")
    key = register(client).get_json()["api_key"]
    receipt, = aws.notify("unsubscribe-pending")
    aws.entitled("starter")
    aws.acknowledged(receipt)
    sync(app, aws)
    assert account(app)["status"] == "active"

    queued = post_file(client, key, legacy["doc"].read_bytes(), "late.doc").get_json()["task_id"]
    receipt, = aws.notify("unsubscribe-success")
    aws.entitled()
    aws.acknowledged(receipt)
    sync(app, aws)
    assert account(app)["status"] == "inactive"
    denied = post_file(client, key, legacy["doc"].read_bytes(), "later.doc")
    assert denied.status_code == 403 and denied.get_json()["code"] == "subscription_pending_or_inactive"
    with app.app_context():
        conversion.run_next(get_db(), get_store(), app.config["DOCSHIFT"], Engine(office), maintenance.worker_name())
        task = tasks.get_task(get_db(), queued)
    assert (task.status, task.error_code, task.billing_class) == ("FAILED", "subscription_inactive", None)


def test_entitlement_update_raises_the_quota_and_keeps_the_count(app, client, aws, legacy, office):
    aws.resolves("tok-1")
    aws.entitled("starter")
    key = register(client).get_json()["api_key"]
    assert post_file(client, key, legacy["xls"].read_bytes(), "n.xls").status_code == 202
    with app.app_context():
        assert conversion.run_next(get_db(), get_store(), app.config["DOCSHIFT"], Engine(office),
                                   maintenance.worker_name()) == "SUCCEEDED"
    receipt, = aws.notify("entitlement-updated")
    aws.entitled("business")
    aws.acknowledged(receipt)
    sync(app, aws)
    usage = client.get("/v1/account/usage", headers={"Authorization": f"Bearer {key}"}).get_json()
    assert (usage["plan"], usage["included_quota"], usage["included_used"]) == ("business", 10000, 1)


def test_throttled_queue_or_entitlements_lose_nothing(app, aws):
    aws.sqs_stub.add_client_error("receive_message", service_error_code="ThrottlingException", http_status_code=400)
    assert sync(app, aws) == []
    aws.notify("subscribe-success")
    aws.entitlement_stub.add_client_error("get_entitlements", service_error_code="ThrottlingException",
                                          http_status_code=400)
    assert sync(app, aws) == []  # not acknowledged: it is read again on the next run


def test_malformed_message_is_dropped(app, aws):
    aws.sqs_stub.add_response("receive_message", {"Messages": [{"MessageId": "x", "ReceiptHandle": "rx",
                                                                "Body": "not json"}]},
                              {"QueueUrl": QUEUE, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 0})
    aws.acknowledged("rx")
    assert sync(app, aws) == []


# the shape of a real registration token: standard base64, padded (130 bytes leave 4 bits unused)
BASE64_TOKEN = base64.b64encode(hashlib.sha256(b"docshift").digest() * 4 + b"ok").decode()


def test_a_used_marketplace_token_in_another_spelling_issues_no_key(app, client, aws):
    """The AWS token is opaque, but whatever ResolveCustomer might read as the same token (its
    padding, the unused bits of its last character, the other base64 alphabet, surrounding
    whitespace) is that token: refused once it was used, without asking AWS again."""
    assert BASE64_TOKEN.endswith("==")
    aws.resolves(BASE64_TOKEN)
    aws.entitled("starter")
    key = register(client, BASE64_TOKEN).get_json()["api_key"]
    core = BASE64_TOKEN.rstrip("=")
    flipped = core[:-1] + chr(ord(core[-1]) + 1)  # a character with other low bits, the same bytes
    assert base64.b64decode(flipped + "==") == base64.b64decode(BASE64_TOKEN)
    for spelling in (core, core + "=", BASE64_TOKEN + "=", flipped + "==", f"  {BASE64_TOKEN}\r\n",
                     BASE64_TOKEN.replace("+", "-").replace("/", "_")):
        again = register(client, spelling)
        assert again.status_code == 400 and again.get_json()["code"] == "invalid_request", spelling
    assert client.get("/v1/account/usage", headers={"Authorization": f"Bearer {key}"}).status_code == 200


def test_a_marketplace_token_is_trimmed_and_bounded(app, client, aws):
    """Surrounding whitespace is not part of the token (AWS is asked about the token alone); a
    token with whitespace or control characters inside, or of 2 KiB and more, is refused
    without asking AWS."""
    for bad in ("tok en", "tok\x00en", "tok\u00e9n", "t" * 2049):
        assert register(client, bad).status_code == 400, bad
    aws.resolves("tok-1")
    aws.entitled("team")
    assert register(client, " tok-1\n").get_json()["plan"] == "team"
    assert register(client, "tok-1").status_code == 400


def test_the_marketplaces_cross_site_post_shows_the_button(app, client, aws):
    """AWS Marketplace sends the buyer's browser here with a form POST from its own site: it
    shows the button (a page elsewhere could post its own token the same way); the button's
    same-origin POST issues the key."""
    aws.resolves("tok-1")
    aws.entitled("starter")
    page = client.post("/marketplace/register", data={"x-amzn-marketplace-token": "tok-1"},
                       headers={"Origin": "https://aws.amazon.com", "Sec-Fetch-Site": "cross-site"})
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and 'id="get-key"' in html and 'id="api-key"' not in html
    assert account(app) is None
    aws.resolves("tok-1")
    aws.entitled("starter")
    pressed = client.post("/marketplace/register", data={"x-amzn-marketplace-token": "tok-1"},
                          headers={"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"})
    assert pressed.status_code == 200 and 'id="api-key"' in pressed.get_data(as_text=True)
    assert account(app)["plan"] == "starter"
