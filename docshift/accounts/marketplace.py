"""Marketplace backends: who a registration token belongs to, on which plan, and
whether their subscription is live.

``DOCSHIFT_MARKETPLACE`` picks one. ``local`` (the default, for self-hosting)
resolves tokens that the operator CLI signs with the service's secret key; the
operator sets plans and status. ``aws`` is AWS Marketplace SaaS: ResolveCustomer
for the registration token, GetEntitlements for the plan, and subscription
notifications (SNS to SQS) read by the worker, which re-reads entitlements
rather than trusting a message.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from itsdangerous import BadData, BadSignature, SignatureExpired, URLSafeTimedSerializer
from itsdangerous.encoding import base64_decode, base64_encode

from docshift.errors import MarketplaceUnavailable, RegistrationTokenInvalid
from docshift.settings import PLANS, Settings
from docshift.storage.connection import Row

# overage to send, (account, hour, quantity); and what the marketplace settled, {(account id, hour): (status, id)}
Reports = list[tuple[Row, str, int]]
Settled = dict[tuple[str, str], tuple[str, str | None]]

log = logging.getLogger("docshift.marketplace")


@dataclass
class Customer:
    customer_id: str
    plan: str | None
    status: str = "active"
    license_arn: str | None = None
    # end of the current contract period where the marketplace says (an entitlement's expiry)
    period_ends_at: datetime | None = None


class LocalMarketplace:
    name = "local"

    def __init__(self, config: Settings) -> None:
        self.serializer = URLSafeTimedSerializer(config.secret_key, salt="docshift.registration")
        self.max_age = config.registration_token_max_age

    def issue_token(self, customer_id: str, plan: str) -> str:
        if plan not in PLANS:
            raise ValueError(f"unknown plan {plan!r}")
        # a nonce: two tokens for one customer in one second must differ, each is used once
        return self.serializer.dumps({"customer": customer_id, "plan": plan, "nonce": secrets.token_urlsafe(6)})

    def token_id(self, token: str) -> str:
        """What marks ``token`` used: the text its signature covers (payload and timestamp).

        RegistrationTokenInvalid for any spelling but the issued one: itsdangerous also reads a
        token with padding appended, with other values of the signature's unused low bits, or
        with characters its base64 decoder drops, and none of those may pass for a fresh token."""
        segments = token.removeprefix(".").split(".")  # payload, timestamp, signature ("." marks zlib)
        if len(segments) != 3 or not all(_canonical_base64(segment) for segment in segments):
            raise RegistrationTokenInvalid("registration token not in the form it was issued in")
        return token.rpartition(".")[0]

    def resolve(self, token: str) -> Customer:
        """The customer a registration token stands for; raises RegistrationTokenInvalid."""
        self.token_id(token)
        try:
            data = self.serializer.loads(token, max_age=self.max_age)
        except SignatureExpired as error:
            raise RegistrationTokenInvalid("registration token expired") from error
        except BadSignature as error:  # its text quotes the signature expected, which the log must not hold
            raise RegistrationTokenInvalid("registration token's signature does not match") from error
        return Customer(customer_id=data["customer"], plan=data["plan"])

    def notifications(self) -> list[Notification]:
        return []

    def meter(self, reports: Reports) -> Settled:
        """Nothing to send: the ledger is the record of overage for a self-hosted service."""
        return {(account["id"], hour): ("sent", None) for account, hour, _ in reports}


@dataclass
class Notification:
    action: str
    customer_id: str
    receipt: str


class AwsMarketplace:
    name = "aws"
    TOKEN_ERRORS = ("InvalidTokenException", "ExpiredTokenException")
    # a real token is a few hundred characters of base64: a longer one is not worth asking AWS about
    MAX_TOKEN = 2048

    def __init__(self, config: Settings, metering: Any = None, entitlement: Any = None, sqs: Any = None) -> None:
        import boto3
        from botocore.config import Config

        retries = Config(retries={"mode": "standard", "max_attempts": config.aws_max_attempts})
        # the marketplace APIs answer in us-east-1 whatever region the queue is in
        self.metering = metering or boto3.client("meteringmarketplace", region_name="us-east-1", config=retries)
        self.entitlement = entitlement or boto3.client("marketplace-entitlement", region_name="us-east-1",
                                                       config=retries)
        self.sqs = sqs or boto3.client("sqs", region_name=config.aws_region, config=retries)
        self.product_code = config.aws_product_code
        self.queue_url = config.aws_sqs_queue_url
        self.overage_dimension = config.aws_overage_dimension

    def token_id(self, token: str) -> str:
        """What marks ``token`` used. The token is opaque and only ResolveCustomer says whether it
        is valid, so spellings that a lenient base64 decoder reads as the same bytes are one token:
        without surrounding whitespace, the padding, the other alphabet (``-_``) or the unused low
        bits of the last character. RegistrationTokenInvalid for a token no marketplace issues."""
        token = self._trimmed(token)
        core = token.rstrip("=")
        if not re.fullmatch(r"[A-Za-z0-9+/_-]+", core) or len(core) % 4 == 1:
            return token  # not base64: its own text is all there is to compare
        decoded = base64.b64decode(core.translate(_STANDARD_ALPHABET) + "=" * (-len(core) % 4))
        return base64.b64encode(decoded).decode()  # an issued (canonical, padded) token is its own id

    def _trimmed(self, token: str) -> str:
        token = token.strip()
        if not 0 < len(token) <= self.MAX_TOKEN or not all("!" <= c <= "~" for c in token):
            raise RegistrationTokenInvalid("registration token too long or with characters no token has")
        return token

    def resolve(self, token: str) -> Customer:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            resolved = self.metering.resolve_customer(RegistrationToken=self._trimmed(token))
        except ClientError as error:
            if error.response["Error"]["Code"] in self.TOKEN_ERRORS:
                raise RegistrationTokenInvalid(error.response["Error"]["Code"]) from error
            raise MarketplaceUnavailable(error.response["Error"]["Code"]) from error
        except BotoCoreError as error:
            raise MarketplaceUnavailable(type(error).__name__) from error
        if resolved["ProductCode"] != self.product_code:
            raise RegistrationTokenInvalid(f"token for another product: {resolved['ProductCode']}")
        customer_id = resolved.get("CustomerAWSAccountId") or resolved["CustomerIdentifier"]
        return self.customer(customer_id, resolved.get("LicenseArn"))

    def customer(self, customer_id: str, license_arn: str | None = None) -> Customer:
        """The customer as the entitlement service sees them now: a plan and ``active``, or
        ``pending`` while no entitlement exists (the caller turns that into ``inactive`` for
        a customer who once was active)."""
        plan, expires = self._entitlement(customer_id)
        return Customer(customer_id=customer_id, plan=plan, status="active" if plan else "pending",
                        license_arn=license_arn, period_ends_at=expires)

    def _entitlement(self, customer_id: str) -> tuple[str | None, datetime | None]:
        """(plan, expiration) of the customer's best current entitlement, or (None, None)."""
        from botocore.exceptions import BotoCoreError, ClientError

        key = "CUSTOMER_AWS_ACCOUNT_ID" if customer_id.isdigit() else "CUSTOMER_IDENTIFIER"
        found: list[dict[str, Any]] = []
        token = None
        try:
            while True:
                page = self.entitlement.get_entitlements(
                    ProductCode=self.product_code, Filter={key: [customer_id]},
                    **({"NextToken": token} if token else {}))
                found += page.get("Entitlements", [])
                token = page.get("NextToken")
                if not token:
                    break
        except (ClientError, BotoCoreError) as error:
            raise MarketplaceUnavailable(str(error)) from error
        plans = [(PLANS[e["Dimension"]], e["Dimension"], e.get("ExpirationDate")) for e in found
                 if e.get("Dimension") in PLANS and _entitled(e)]
        if not plans:
            return None, None
        _, plan, expires = max(plans, key=lambda p: p[0])
        return plan, expires

    def notifications(self) -> list[Notification]:
        """Subscription messages waiting in the SQS queue (not yet acknowledged)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        except (ClientError, BotoCoreError) as error:
            raise MarketplaceUnavailable(str(error)) from error
        messages = []
        for raw in answer.get("Messages", []):
            try:
                body = json.loads(raw["Body"])
                message = json.loads(body["Message"]) if "Message" in body else body  # SNS envelope or raw
                customer = message.get("customer-aws-account-id") or message["customer-identifier"]
                messages.append(Notification(message["action"], customer, raw["ReceiptHandle"]))
            except (KeyError, TypeError, ValueError):
                log.warning("dropping a malformed marketplace message %s", raw.get("MessageId"))
                self.acknowledge(Notification("malformed", "", raw["ReceiptHandle"]))
        return messages

    def acknowledge(self, notification: Notification) -> None:
        self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=notification.receipt)

    BATCH = 25  # BatchMeterUsage takes at most 25 records a call

    def meter(self, reports: Reports) -> Settled:
        """Send ``(account, hour, quantity)`` overage with BatchMeterUsage.

        Returns ``{(account_id, hour): (status, record id)}`` for the records the marketplace
        settled: ``sent`` (Success, or DuplicateRecord for a re-send after a crash) or
        ``not_subscribed``. Unprocessed or throttled records are left out: they stay pending
        and go again on the next run, with the same hour-truncated timestamp.
        """
        from datetime import datetime

        from botocore.exceptions import BotoCoreError, ClientError

        settled: Settled = {}
        for start in range(0, len(reports), self.BATCH):
            batch = reports[start:start + self.BATCH]
            records: list[dict[str, Any]] = []
            keys: dict[tuple[str, datetime], tuple[str, str]] = {}
            for account, hour, quantity in batch:
                timestamp = datetime.strptime(hour, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
                record = {"Timestamp": timestamp, "Dimension": self.overage_dimension, "Quantity": quantity}
                if account["customer_id"].isdigit():
                    record["CustomerAWSAccountId"] = account["customer_id"]
                    if account["license_arn"]:
                        record["LicenseArn"] = account["license_arn"]
                else:
                    record["CustomerIdentifier"] = account["customer_id"]
                records.append(record)
                keys[(account["customer_id"], timestamp)] = (account["id"], hour)
            try:
                answer = self.metering.batch_meter_usage(ProductCode=self.product_code, UsageRecords=records)
            except (ClientError, BotoCoreError) as error:
                log.warning("BatchMeterUsage failed, %d records stay pending: %s", len(records), error)
                continue
            for result in answer.get("Results", []):
                record = result["UsageRecord"]
                customer = record.get("CustomerAWSAccountId") or record.get("CustomerIdentifier")
                key = keys.get((customer, record["Timestamp"].astimezone(UTC)))
                if key is None:
                    continue
                status = {"Success": "sent", "DuplicateRecord": "sent",
                          "CustomerNotSubscribed": "not_subscribed"}.get(result.get("Status"))
                if status:
                    settled[key] = (status, result.get("MeteringRecordId"))
            if answer.get("UnprocessedRecords"):
                log.warning("%d overage records unprocessed; they go again next run",
                            len(answer["UnprocessedRecords"]))
        return settled


_STANDARD_ALPHABET = str.maketrans("-_", "+/")


def _canonical_base64(segment: str) -> bool:
    """True if ``segment`` is exactly what itsdangerous writes for the bytes it decodes to."""
    try:
        return base64_encode(base64_decode(segment)).decode("ascii") == segment
    except BadData:  # not base64 at all
        return False


def _entitled(entitlement: dict[str, Any]) -> bool:
    value = entitlement.get("Value") or {}
    if value.get("BooleanValue") is False or value.get("IntegerValue") == 0:
        return False
    expires = entitlement.get("ExpirationDate")
    return expires is None or expires > datetime.now(UTC)


Marketplace = LocalMarketplace | AwsMarketplace
BACKENDS: dict[str, type[Marketplace]] = {"local": LocalMarketplace, "aws": AwsMarketplace}


def backend(config: Settings) -> Marketplace:
    """The configured marketplace (``DOCSHIFT_MARKETPLACE``): the one place that builds it."""
    name = config.marketplace
    if name not in BACKENDS:
        raise RuntimeError(f"DOCSHIFT_MARKETPLACE={name!r} is not available; use one of {sorted(BACKENDS)}")
    return BACKENDS[name](config)
