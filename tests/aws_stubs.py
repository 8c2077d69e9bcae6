"""The AWS Marketplace APIs faked by botocore's Stubber, the one fake the suite accepts; used by
test_marketplace_aws.py and test_metering.py."""

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import boto3
from botocore.config import Config
from botocore.stub import Stubber

from docshift.accounts import marketplace

PRODUCT = "prod-docshift1"
QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/docshift-subscriptions"
ACCOUNT = "123456789012"
LICENSE = "arn:aws:license-manager::123456789012:license:l-0123456789abcdef"


class Aws:
    """Stubbed clients behind a real AwsMarketplace."""

    def __init__(self, config):
        def client(name):
            return boto3.client(name, region_name="us-east-1", aws_access_key_id="test",
                                aws_secret_access_key="test", config=Config(retries={"max_attempts": 1}))
        self.metering, self.entitlement, self.sqs = (client("meteringmarketplace"),
                                                     client("marketplace-entitlement"), client("sqs"))
        self.stubs = [Stubber(c) for c in (self.metering, self.entitlement, self.sqs)]
        for stub in self.stubs:
            stub.activate()
        self.backend = marketplace.AwsMarketplace(
            replace(config, aws_product_code=PRODUCT, aws_sqs_queue_url=QUEUE),
            metering=self.metering, entitlement=self.entitlement, sqs=self.sqs)

    metering_stub = property(lambda self: self.stubs[0])
    entitlement_stub = property(lambda self: self.stubs[1])
    sqs_stub = property(lambda self: self.stubs[2])

    def resolves(self, token, customer=ACCOUNT, product=PRODUCT):
        self.metering_stub.add_response(
            "resolve_customer",
            {"CustomerIdentifier": "cust-abc", "CustomerAWSAccountId": customer, "ProductCode": product,
             "LicenseArn": LICENSE},
            {"RegistrationToken": token})

    def entitled(self, *plans, customer=ACCOUNT, expires=None):
        entitlements = [{"ProductCode": PRODUCT, "Dimension": plan, "CustomerAWSAccountId": customer,
                         "Value": {"IntegerValue": 1},
                         "ExpirationDate": expires or datetime.now(UTC) + timedelta(days=30)} for plan in plans]
        self.entitlement_stub.add_response(
            "get_entitlements", {"Entitlements": entitlements},
            {"ProductCode": PRODUCT, "Filter": {"CUSTOMER_AWS_ACCOUNT_ID": [customer]}})

    def notify(self, *actions, customer=ACCOUNT):
        messages = [{"MessageId": f"m{n}", "ReceiptHandle": f"r{n}", "Body": json.dumps(
            {"Type": "Notification", "Message": json.dumps(
                {"action": action, "customer-identifier": "cust-abc", "customer-aws-account-id": customer,
                 "product-code": PRODUCT})})} for n, action in enumerate(actions)]
        self.sqs_stub.add_response("receive_message", {"Messages": messages},
                                   {"QueueUrl": QUEUE, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 0})
        return [m["ReceiptHandle"] for m in messages]

    def acknowledged(self, receipt):
        self.sqs_stub.add_response("delete_message", {}, {"QueueUrl": QUEUE, "ReceiptHandle": receipt})

    def done(self):
        for stub in self.stubs:
            stub.assert_no_pending_responses()
