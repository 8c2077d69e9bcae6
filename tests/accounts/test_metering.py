"""Overage metering: the hourly report, the ledger, and BatchMeterUsage (Stubber-faked)."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from aws_stubs import ACCOUNT, LICENSE, PRODUCT, Aws

from docshift.accounts import billing, marketplace, metering
from docshift.storage import accounts, connection, ledger, tasks

NOW = datetime(2026, 11, 21, 12, 5, tzinfo=UTC)  # five past noon: the report runs for 11:00-12:00
QUOTAS = {"starter": 0, "team": 0, "business": 0}  # every success is overage


@pytest.fixture
def conn(tmp_path):
    opened = connection.connect(str(tmp_path / "metering.db"))
    connection.init(opened)
    yield opened
    opened.close()


@pytest.fixture
def aws(app):
    fake = Aws(replace(app.config["DOCSHIFT"], aws_product_code=PRODUCT))
    yield fake
    fake.done()


def customer(conn, customer_id=ACCOUNT, marketplace_name="aws"):
    return accounts.apply_subscription(conn, marketplace_name, marketplace.Customer(
        customer_id=customer_id, plan="starter", license_arn=LICENSE))


def overage(conn, account, at, n=1):
    """``n`` real successes past the allowance, finished at ``at``."""
    for _ in range(n):
        task_id = connection.new_id("tsk")
        tasks.create_task(conn, {"id": task_id, "account_id": account["id"], "status": "QUEUED",
                                 "source_filename": "a.doc", "source_type": "doc", "source_size": 1,
                                 "source_sha256": "0" * 64, "idempotency_key": None, "created_at": connection.iso(at)})
        tasks.start_processing(conn, task_id)
        assert tasks.mark_succeeded(conn, task_id, 10, 1800, billing.rule(QUOTAS), at=at) == "OVERAGE"


def expect_batch(aws, records, statuses=None, unprocessed=()):
    usage = [{"Timestamp": hour, "CustomerAWSAccountId": customer_id, "LicenseArn": LICENSE,
              "Dimension": "overage", "Quantity": quantity} for customer_id, hour, quantity in records]
    results = [{"UsageRecord": record, "MeteringRecordId": f"rec-{n}", "Status": (statuses or {}).get(n, "Success")}
               for n, record in enumerate(usage) if n not in unprocessed]
    aws.metering_stub.add_response(
        "batch_meter_usage",
        {"Results": results, "UnprocessedRecords": [usage[n] for n in unprocessed]},
        {"ProductCode": PRODUCT, "UsageRecords": usage})


ELEVEN = datetime(2026, 11, 21, 11, tzinfo=UTC)


def ledger_rows(conn):
    return [(r["hour"], r["quantity"], r["status"]) for r in ledger.overage_reports(conn)]


def test_each_ended_hour_is_reported_once(conn, aws):
    account = customer(conn)
    overage(conn, account, ELEVEN + timedelta(minutes=10), 2)
    overage(conn, account, ELEVEN + timedelta(minutes=50))
    overage(conn, account, NOW)  # this hour is not over: not yet
    expect_batch(aws, [(ACCOUNT, ELEVEN, 3)])
    metering.report_overage(conn, aws.backend, at=NOW)
    assert ledger_rows(conn) == [(connection.iso(ELEVEN), 3, "sent")]
    assert metering.report_overage(conn, aws.backend, at=NOW + timedelta(minutes=20)) == {}  # no second call


def test_batches_of_25(conn, aws):
    accounts = [customer(conn, f"{100000000000 + n}") for n in range(30)]
    for account in accounts:
        overage(conn, account, ELEVEN + timedelta(minutes=1))
    # the order within a batch follows the database; ask the ledger query for it
    due = ledger.overage_to_report(conn, ELEVEN - timedelta(days=1), ELEVEN + timedelta(hours=1))
    order = [(account["customer_id"], ELEVEN, quantity) for account, _, quantity in due]
    expect_batch(aws, order[:25])
    expect_batch(aws, order[25:])
    metering.report_overage(conn, aws.backend, at=NOW)
    assert [status for _, _, status in ledger_rows(conn)] == ["sent"] * 30


def test_crash_between_sending_and_recording_loses_and_doubles_nothing(conn, aws):
    account = customer(conn)
    overage(conn, account, ELEVEN + timedelta(minutes=30), 4)
    # a run that sent the record and died before closing its ledger row
    due = ledger.overage_to_report(conn, ELEVEN - timedelta(days=1), ELEVEN + timedelta(hours=1))
    for acc, hour, quantity in due:
        ledger.open_overage_report(conn, acc["id"], hour, quantity)
    expect_batch(aws, [(ACCOUNT, ELEVEN, 4)])
    aws.backend.meter(due)
    assert ledger_rows(conn) == [(connection.iso(ELEVEN), 4, "pending")]
    # the next run sends the very same record; the marketplace says it already has it
    expect_batch(aws, [(ACCOUNT, ELEVEN, 4)], statuses={0: "DuplicateRecord"})
    metering.report_overage(conn, aws.backend, at=NOW + timedelta(minutes=30))
    assert ledger_rows(conn) == [(connection.iso(ELEVEN), 4, "sent")]


def test_customer_not_subscribed_is_recorded_and_not_resent(conn, aws):
    overage(conn, customer(conn), ELEVEN + timedelta(minutes=5))
    expect_batch(aws, [(ACCOUNT, ELEVEN, 1)], statuses={0: "CustomerNotSubscribed"})
    metering.report_overage(conn, aws.backend, at=NOW)
    assert ledger_rows(conn) == [(connection.iso(ELEVEN), 1, "not_subscribed")]
    assert metering.report_overage(conn, aws.backend, at=NOW + timedelta(minutes=1)) == {}


def test_unprocessed_and_throttled_records_go_again(conn, aws):
    overage(conn, customer(conn), ELEVEN + timedelta(minutes=5))
    expect_batch(aws, [(ACCOUNT, ELEVEN, 1)], unprocessed=(0,))
    metering.report_overage(conn, aws.backend, at=NOW)
    assert ledger_rows(conn)[0][2] == "pending"
    aws.metering_stub.add_client_error("batch_meter_usage", service_error_code="ThrottlingException",
                                       http_status_code=400)
    metering.report_overage(conn, aws.backend, at=NOW + timedelta(hours=1))
    assert ledger_rows(conn)[0][2] == "pending"
    expect_batch(aws, [(ACCOUNT, ELEVEN, 1)])
    metering.report_overage(conn, aws.backend, at=NOW + timedelta(hours=2))
    assert ledger_rows(conn) == [(connection.iso(ELEVEN), 1, "sent")]


def test_hours_past_the_six_hour_window_are_recorded_as_missed(conn, aws):
    overage(conn, customer(conn), ELEVEN - timedelta(hours=7))
    metering.report_overage(conn, aws.backend, at=NOW)  # no call: the marketplace would refuse it
    assert ledger_rows(conn) == [(connection.iso(ELEVEN - timedelta(hours=7)), 1, "missed")]


def test_local_marketplace_keeps_the_ledger(conn, app):
    account = customer(conn, "self-hosted", marketplace_name="local")
    overage(conn, account, ELEVEN + timedelta(minutes=5), 3)
    metering.report_overage(conn, marketplace.LocalMarketplace(app.config["DOCSHIFT"]), at=NOW)
    assert ledger_rows(conn) == [(connection.iso(ELEVEN), 3, "sent")]


def test_a_success_that_waits_for_the_lock_across_the_hour_is_still_metered(tmp_path, aws, monkeypatch):
    """A success whose commit waits for the write lock while the hour ends, and a metering run
    in between: the success is reported in one hour or the next, never in an hour already closed."""
    import threading
    import time
    path = str(tmp_path / "lock.db")
    conn = connection.connect(path)
    connection.init(conn)
    clock = [ELEVEN + timedelta(minutes=30)]
    monkeypatch.setattr(connection, "now", lambda: clock[0])
    monkeypatch.setattr(tasks, "now", lambda: clock[0])
    account = customer(conn)
    overage(conn, account, clock[0])  # the hour's first overage, committed at once
    late = connection.new_id("tsk")
    tasks.create_task(conn, {"id": late, "account_id": account["id"], "status": "QUEUED", "source_filename": "b.doc",
                             "source_type": "doc", "source_size": 1, "source_sha256": "0" * 64,
                             "idempotency_key": None, "created_at": connection.iso(clock[0])})
    tasks.start_processing(conn, late)

    holder = connection.connect(path)
    holder.conn.execute("BEGIN IMMEDIATE")  # another writer holds the lock as the hour ends
    clock[0] = ELEVEN + timedelta(minutes=59, seconds=59)
    billed = []
    success = threading.Thread(target=lambda: billed.append(tasks.mark_succeeded(
        connection.connect(path), late, 10, 1800, billing.rule(QUOTAS))))
    success.start()
    time.sleep(0.5)  # the success waits for the lock
    clock[0] = ELEVEN + timedelta(hours=1, seconds=5)
    expect_batch(aws, [(ACCOUNT, ELEVEN, 1)])  # 11:00-12:00 holds the first one; the late one, if
    run = threading.Thread(target=metering.report_overage, args=(connection.connect(path), aws.backend))
    run.start()  # committed after this reading, is 12:00's
    time.sleep(0.5)
    holder.conn.execute("ROLLBACK")
    success.join(10)
    run.join(10)
    assert billed == ["OVERAGE"]

    clock[0] = ELEVEN + timedelta(hours=2, minutes=5)
    expect_batch(aws, [(ACCOUNT, ELEVEN + timedelta(hours=1), 1)])
    metering.report_overage(conn, aws.backend)
    assert sum(quantity for _, quantity, status in ledger_rows(conn) if status == "sent") == 2
