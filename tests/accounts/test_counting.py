"""Counting is what customers pay for: exactly once, in the transaction that makes a task
SUCCEEDED, INCLUDED while the period's allowance lasts, OVERAGE after."""

import calendar
import random
from datetime import UTC, datetime, timedelta

import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from docshift.accounts import billing, marketplace
from docshift.errors import IdempotencyKeyTaken
from docshift.storage import accounts, connection, periods, tasks

QUOTAS = {"starter": 2, "team": 4, "business": 6}
ACTIVATION = datetime(2026, 1, 31, 9, 30, tzinfo=UTC)  # the end of a long month, on purpose

operations = st.lists(st.one_of(
    st.just(("success",)),
    st.just(("failure",)),
    st.just(("replay",)),
    st.just(("run_again",)),
    st.tuples(st.just("wait"), st.integers(min_value=1, max_value=20 * 24 * 60)),  # minutes
    st.tuples(st.just("plan"), st.sampled_from(sorted(QUOTAS))),
), max_size=40)


def model_month(months):
    """The model's own calendar: the activation day, clamped, in a later month."""
    year = ACTIVATION.year + (ACTIVATION.month - 1 + months) // 12
    month = (ACTIVATION.month - 1 + months) % 12 + 1
    return ACTIVATION.replace(year=year, month=month, day=min(ACTIVATION.day, calendar.monthrange(year, month)[1]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=operations)
def test_counting_matches_a_simple_model(tmp_path_factory, steps):
    conn = connection.connect(str(tmp_path_factory.mktemp("model") / "counting.db"))
    connection.init(conn)
    account = accounts.apply_subscription(conn, "local", marketplace.Customer("model", "starter"))
    accounts.set_account(conn, account["id"], activated_at=connection.iso(ACTIVATION))
    clock, plan = ACTIVATION + timedelta(minutes=1), "starter"
    model = {"period": 0, "included": 0, "overage": 0}
    keyed, succeeded = [], []

    def new_task(key=None):
        task = {"id": connection.new_id("tsk"), "account_id": account["id"], "status": "QUEUED",
                "source_filename": "a.doc", "source_type": "doc", "source_size": 1, "source_sha256": "0" * 64,
                "idempotency_key": key, "created_at": connection.iso(clock)}
        tasks.create_task(conn, task)
        tasks.start_processing(conn, task["id"])
        return task["id"]

    for step in steps:
        if step[0] == "success":
            key = f"key-{len(keyed):05d}"
            task_id = new_task(key)
            keyed.append(key)
            expected = "INCLUDED" if model["included"] < QUOTAS[plan] else "OVERAGE"
            model["included" if expected == "INCLUDED" else "overage"] += 1
            assert tasks.mark_succeeded(conn, task_id, 10, 1800, billing.rule(QUOTAS), at=clock) == expected
            succeeded.append(task_id)
        elif step[0] == "failure":
            assert tasks.mark_failed(conn, new_task(), "conversion_failed", "no")
        elif step[0] == "replay" and keyed:
            try:
                new_task(keyed[-1])
                raise AssertionError("a replayed Idempotency-Key made a second task")
            except IdempotencyKeyTaken:
                pass
        elif step[0] == "run_again" and succeeded:
            assert tasks.mark_succeeded(conn, succeeded[-1], 10, 1800, billing.rule(QUOTAS), at=clock) is None
        elif step[0] == "wait":
            clock += timedelta(minutes=step[1])
            while clock >= model_month(model["period"] + 1):
                model.update(period=model["period"] + 1, included=0, overage=0)
        elif step[0] == "plan":
            plan = step[1]
            accounts.set_account(conn, account["id"], plan=plan)  # the period's count stays
        with connection.transaction(conn):
            period = periods.current_period(conn, accounts.find_account(conn, "local", "model"), clock)
        assert (period["included_used"], period["overage_used"]) == (model["included"], model["overage"])
        assert (period["started_at"], period["ends_at"]) == (
            connection.iso(model_month(model["period"])), connection.iso(model_month(model["period"] + 1)))
    counted = conn.execute("SELECT count(*) FROM conversions WHERE billing_class IS NOT NULL").fetchone()[0]
    assert counted == len(succeeded)
    conn.close()


def test_storage_counts_what_the_billing_rule_says(tmp_path):
    """The rule is the accounts' (``docshift.accounts.billing``): storage asks the one it is given, with the
    period as read in the success's transaction, and counts the success under the class it answers."""
    conn = connection.connect(str(tmp_path / "rule.db"))
    connection.init(conn)
    account = accounts.apply_subscription(conn, "local", marketplace.Customer("rule", "starter"))
    asked = []

    def alternate(account, period):
        asked.append((period["included_used"], period["overage_used"]))
        return "INCLUDED" if len(asked) % 2 else "OVERAGE"

    answers = []
    for _ in range(4):
        task = {"id": connection.new_id("tsk"), "account_id": account["id"], "status": "QUEUED",
                "source_filename": "a.doc", "source_type": "doc", "source_size": 1, "source_sha256": "0" * 64,
                "idempotency_key": None, "created_at": connection.iso(connection.now())}
        tasks.create_task(conn, task)
        tasks.start_processing(conn, task["id"])
        answers.append(tasks.mark_succeeded(conn, task["id"], 10, 1800, alternate))
    assert answers == ["INCLUDED", "OVERAGE"] * 2
    assert asked == [(0, 0), (1, 0), (1, 1), (2, 1)]
    period = periods.usage_period(conn, account)
    assert (period["included_used"], period["overage_used"]) == (2, 2)
    conn.close()


def test_entitlement_end_sets_the_period(tmp_path):
    conn = connection.connect(str(tmp_path / "contract.db"))
    connection.init(conn)
    account = accounts.apply_subscription(conn, "aws", marketplace.Customer(
        "111122223333", "team", period_ends_at=datetime(2026, 3, 15, tzinfo=UTC)))
    accounts.set_account(conn, account["id"], activated_at="2026-02-15T00:00:00.000000Z")
    account = accounts.find_account(conn, "aws", "111122223333")
    with connection.transaction(conn):
        period = periods.current_period(conn, account, datetime(2026, 3, 1, tzinfo=UTC))
    assert (period["started_at"], period["ends_at"]) == ("2026-02-15T00:00:00.000000Z", "2026-03-15T00:00:00.000000Z")
    conn.close()


def test_two_worker_processes_racing_count_exactly(s3, tmp_path, legacy):
    """40 successes on a quota of 10, converted by two huey consumers at once: 10 INCLUDED, 30 OVERAGE."""
    from conftest import Service

    service = Service(tmp_path / "race", s3["env"], PLAN_QUOTAS='{"starter": 10}')
    service.start_web()
    service.start_worker(workers=2, name="worker-a")
    service.start_worker(workers=2, name="worker-b")
    try:
        service.wait_healthy()
        key = service.register("racer")
        data = legacy["xls"].read_bytes()
        task_ids = []
        for n in range(40):
            response = requests.post(f"{service.base_url}/v1/conversions",
                                     headers={"Authorization": f"Bearer {key}"},
                                     files={"file": (f"sheet-{n}.xls", data)}, timeout=30)
            assert response.status_code == 202
            task_ids.append(response.json()["task_id"])
        random.shuffle(task_ids)
        classes = [service.wait(key, task_id, timeout=300)["billing_class"] for task_id in task_ids]
        assert (classes.count("INCLUDED"), classes.count("OVERAGE")) == (10, 30)
        usage = requests.get(f"{service.base_url}/v1/account/usage", headers={"Authorization": f"Bearer {key}"},
                             timeout=10).json()
        assert (usage["included_quota"], usage["included_used"], usage["remaining"], usage["overage_used"]) \
            == (10, 10, 0, 30)
        # both processes really converted
        logs = [(tmp_path / "race" / f"worker-{w}.log").read_text() for w in "ab"]
        assert all("succeeded" in log for log in logs)
    finally:
        service.stop()
