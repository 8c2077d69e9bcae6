"""Retention and deletion: inputs go when final, results expire, sweeps are crash-safe."""

from conftest import input_stored, overridden, post_file

from docshift.accounts import keys
from docshift.engine import Engine
from docshift.storage import accounts, tasks
from docshift.storage.s3 import ObjectStore
from docshift.tasks import conversion, maintenance
from docshift.web.context import get_db, get_store


def run(app, office, task_id, **config):
    with app.app_context():
        conversion.run_next(get_db(), get_store(), overridden(app, config), Engine(office), maintenance.worker_name())
        return tasks.get_task(get_db(), task_id)


def sweep(app):
    with app.app_context():
        maintenance.sweep_once(get_db(), get_store(), app.config["DOCSHIFT"])


def assert_swept(app):
    """After a sweep: no EXPIRED task keeps its object, no SUCCEEDED task has lost it."""
    with app.app_context():
        conn, store = get_db(), get_store()
        for task in conn["conversions"].rows:
            if task["status"] == "EXPIRED":
                assert store.result_size(task["result_key"]) is None
            if task["status"] == "SUCCEEDED":
                assert store.result_size(task["result_key"]) is not None
            if task["status"] in ("SUCCEEDED", "FAILED", "EXPIRED"):
                assert not input_stored(store, task["id"])


def test_inputs_go_when_final(office, app, client, account, legacy):
    succeeded = post_file(client, account, legacy["doc"].read_bytes(), "a.doc").get_json()["task_id"]
    failed = post_file(client, account, b"plain text", "b.doc").get_json()["task_id"]
    assert run(app, office, succeeded).status == "SUCCEEDED"
    assert run(app, office, failed).status == "FAILED"
    with app.app_context():
        assert not input_stored(get_store(), succeeded) and not input_stored(get_store(), failed)


def test_interrupted_sweep_is_finished_by_the_next(office, app, client, account, legacy):
    ids = [post_file(client, account, legacy["xls"].read_bytes(), f"{i}.xls").get_json()["task_id"]
           for i in range(3)]
    for task_id in ids:
        run(app, office, task_id, RESULT_RETENTION_SECONDS=0)
    with app.app_context():
        # a sweep that died after deleting one object and before marking its task
        get_store().delete_result(tasks.get_task(get_db(), ids[0]).result_key)
        # and an input whose deletion failed when its task ended
        get_store().put_input(ids[1], b"left behind")
        get_db().execute("UPDATE conversions SET input_deleted = 0 WHERE id = ?", [ids[1]])
    sweep(app)
    with app.app_context():
        assert [tasks.get_task(get_db(), t).status for t in ids] == ["EXPIRED"] * 3
    assert_swept(app)
    sweep(app)  # idempotent
    assert_swept(app)


def test_inactive_accounts_results_are_deleted_too(office, app, client, account, legacy):
    task_id = post_file(client, account, legacy["ppt"].read_bytes(), "d.ppt").get_json()["task_id"]
    run(app, office, task_id, RESULT_RETENTION_SECONDS=0)
    with app.app_context():
        conn = get_db()
        accounts.set_account(conn, accounts.account_for_key(conn, keys.digest(account))["id"], status="inactive")
    sweep(app)
    with app.app_context():
        task = tasks.get_task(get_db(), task_id)
        assert task.status == "EXPIRED" and get_store().result_size(task.result_key) is None


BACKSTOP = {"backstop-inputs": ("inputs/", 1), "backstop-results": ("results/", 1)}


def lifecycle_days(store):
    """``{rule id: (prefix, days)}`` of the bucket's expiration rules, as the S3 server reports them."""
    rules = store.client.get_bucket_lifecycle(store.bucket).rules
    return {rule.rule_id: (rule.rule_filter.prefix, rule.expiration.days) for rule in rules}


def test_bucket_has_a_lifecycle_backstop(app):
    store = ObjectStore(app.config["DOCSHIFT"])
    store.ensure_bucket()
    assert lifecycle_days(store) == BACKSTOP


def test_the_buckets_other_lifecycle_rules_are_kept(app):
    """A bucket shared with an operator's own rules: docshift adds or replaces only its own."""
    from minio.commonconfig import ENABLED, Filter
    from minio.lifecycleconfig import Expiration, LifecycleConfig, Rule

    store = ObjectStore(app.config["DOCSHIFT"])
    store.ensure_bucket()
    foreign = [Rule(ENABLED, rule_filter=Filter(prefix="logs/"), rule_id="operator-logs",
                    expiration=Expiration(days=30)),
               # an older docshift's backstop with another lifetime: replaced, not doubled
               Rule(ENABLED, rule_filter=Filter(prefix="inputs/"), rule_id="backstop-inputs",
                    expiration=Expiration(days=7))]
    store.client.set_bucket_lifecycle(store.bucket, LifecycleConfig(foreign))
    for _ in range(2):  # every worker start
        store.ensure_bucket()
        assert lifecycle_days(store) == {"operator-logs": ("logs/", 30), **BACKSTOP}
