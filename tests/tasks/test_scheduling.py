"""Real traffic: fair order between accounts, the cap on unfinished work, leases, and the
service's own duties under a backlog, against real huey consumers, SQLite, S3 and LibreOffice."""

import os
import random
import time
from dataclasses import replace
from datetime import timedelta

import requests
from conftest import (
    Service,
    a_first_burst_gives_a_slot_back,
    long_files_keep_a_slot_free,
    post_file,
    register,
    stored_inputs,
    wait_for,
)

from docshift import client
from docshift.accounts import billing
from docshift.client.tree import STATE_FILE
from docshift.engine import Engine
from docshift.storage import accounts, connection, liveness, periods, tasks
from docshift.tasks import conversion, maintenance
from docshift.web.context import get_db, get_store


def test_a_backlog_delays_another_account_by_at_most_what_runs(s3, tmp_path, slow_xls, legacy):
    """One worker; account A queues five slow files, then B submits one: B's task is the next
    one claimed, not the sixth."""
    service = Service(tmp_path / "svc", s3["env"]).start(workers=1)
    try:
        flood, single = service.register("flood"), service.register("single")
        backlog = [service.submit(flood, slow_xls, f"big-{n}.xls").json()["task_id"] for n in range(5)]
        deadline = time.monotonic() + 60
        while service.wait_status(flood, backlog[0]) != "PROCESSING":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        mine = service.submit(single, legacy["doc"]).json()["task_id"]
        assert service.wait(single, mine, timeout=120)["status"] == "SUCCEEDED"
        seen = service.rows()
        started_before_mine = [t for t in backlog if seen[t]["started_at"]
                               and seen[t]["started_at"] < seen[mine]["started_at"]]
        assert started_before_mine == backlog[:1], "B waited behind A's queued files"
    finally:
        service.stop()


def test_files_that_run_long_keep_one_slot_free_for_other_accounts(s3, tmp_path, slow_xls, legacy):
    """Two slots; a run counts as long past a twelfth of the timeout (0.75 s here, and the slow workbook takes
    longer). On the code before, B's file waited for one of A's to end, and A's files ran two at a time."""
    service = Service(tmp_path / "svc", s3["env"], CONVERSION_TIMEOUT=9, SWEEP_SECONDS=3600).start(workers=2)
    try:
        long_files_keep_a_slot_free(service, slow_xls, legacy["doc"])
    finally:
        service.stop()


def test_a_first_burst_of_long_files_gives_a_slot_to_another_account_s_file(s3, tmp_path, charts_xls, legacy):
    """Two slots; a run is long past 2 s (a timeout of 24 s). A's first two files take both slots before anything is
    known of them; B's file comes while they run. One of A's runs is stopped and goes back to the queue, B's file
    takes its slot, and A's file converts later, its attempt not used. On the code before, B waited for one of A's
    to end."""
    service = Service(tmp_path / "svc", s3["env"], CONVERSION_TIMEOUT=24).start(workers=2)
    try:
        a_first_burst_gives_a_slot_back(service, charts_xls, legacy["doc"])
        log = (service.data_dir / "worker.log").read_text(errors="replace")
        assert "stopped: its account's long files held every slot" in log
    finally:
        service.stop()


def test_an_account_alone_converts_its_long_files_on_every_slot(s3, tmp_path, slow_xls):
    service = Service(tmp_path / "svc", s3["env"], CONVERSION_TIMEOUT=9).start(workers=2)
    try:
        heavy = service.register("alone")
        backlog = [service.submit(heavy, slow_xls, f"big-{n}.xls").json()["task_id"] for n in range(6)]
        assert [service.wait(heavy, t, timeout=120)["status"] for t in backlog] == ["SUCCEEDED"] * 6
        seen = service.rows()
        order = sorted((seen[t]["started_at"], seen[t]["finished_at"]) for t in backlog)
        # each file that ran while another did: two slots taken in pairs that end together count as well as
        # staggered ones (a file started after every earlier one ended is no sign of one slot)
        overlapping = sum(any(other != mine and mine[0] < other[1] and other[0] < mine[1] for other in order)
                          for mine in order)
        assert overlapping >= 4, f"a lone account's long files ran one at a time: {order}"
    finally:
        service.stop()


def test_unfinished_tasks_are_capped_per_account(office, app, client, account):
    app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], max_pending_tasks=2)
    auth = {"Authorization": f"Bearer {account}"}
    accepted = [post_file(client, account, b"x" * 100, f"f{n}.doc") for n in range(2)]
    assert [r.status_code for r in accepted] == [202, 202]
    with app.app_context():
        inputs_before = stored_inputs(get_store())
        assert inputs_before >= 2

    refused = post_file(client, account, b"y" * 100, "third.doc", headers={"Idempotency-Key": "third-file-key"})
    assert refused.status_code == 429
    assert refused.content_type == "application/problem+json"
    assert refused.get_json()["code"] == "too_many_tasks" and int(refused.headers["Retry-After"]) > 0
    with app.app_context():
        conn = get_db()
        assert tasks.unfinished_count(conn, accounts.account_for_key(conn, _digest(account))["id"]) == 2
        assert tasks.task_by_idempotency_key(conn, accounts.account_for_key(conn, _digest(account))["id"],
                                             "third-file-key") is None
        assert stored_inputs(get_store()) == inputs_before
    usage = client.get("/v1/account/usage", headers=auth).get_json()
    assert usage["included_used"] == 0 and usage["overage_used"] == 0

    other = register(client, app, f"other-{random.randrange(10**9)}")
    assert post_file(client, other, b"z" * 100, "theirs.doc").status_code == 202

    with app.app_context():  # one of the two finishes (it fails: not a document), a place frees up
        # the worker's step: the fairest waiting task is the account's oldest, accepted[0]
        assert conversion.run_next(get_db(), get_store(), app.config["DOCSHIFT"], Engine(office),
                                   maintenance.worker_name()) == "FAILED"
        assert tasks.get_task(get_db(), accepted[0].get_json()["task_id"]).status == "FAILED"
    assert post_file(client, account, b"y" * 100, "third.doc").status_code == 202


def _digest(key):
    from docshift.accounts import keys
    return keys.digest(key)


def test_the_client_waits_out_the_cap_and_converts_everything(s3, tmp_path, legacy, monkeypatch, capsys):
    service = Service(tmp_path / "svc", s3["env"], MAX_PENDING_TASKS=1).start()
    try:
        key = service.register("capped")
        monkeypatch.setenv("DOCSHIFT_URL", service.base_url)
        monkeypatch.setenv("DOCSHIFT_API_KEY", key)
        out = tmp_path / "out"
        assert client.main(["convert", str(legacy["doc"]), str(legacy["xls"]), str(legacy["ppt"]),
                            "--out", str(out), "--parallel", "3"]) == 0, capsys.readouterr().err
        assert sorted(p.suffix for p in out.iterdir() if p.name != STATE_FILE) == [".docx", ".pptx", ".xlsx"]
    finally:
        service.stop()


def test_a_stale_holder_cannot_finish_what_a_new_holder_took(office, app, client, account, legacy):
    task_id = post_file(client, account, legacy["doc"].read_bytes(), "letter.doc").get_json()["task_id"]
    with app.app_context():
        conn = get_db()
        stale, _ = tasks.start_processing(conn, task_id, "gone-host:1")
        later = connection.now() + timedelta(seconds=conversion.max_run_seconds(app.config["DOCSHIFT"]) + 1)
        maintenance.recover_stuck(conn, get_store(), app.config["DOCSHIFT"], later)  # overdue: taken back
        assert tasks.get_task(conn, task_id).status == "QUEUED"
        fresh, account_row = tasks.start_processing(conn, task_id, "new-host:2")
        assert tasks.lease_of(fresh) == ("new-host:2", 2)

        # the stale run wakes up and converts: nothing it does may land
        outcome = conversion._run(stale, account_row, conn, get_store(), app.config["DOCSHIFT"], Engine(office))
        assert outcome is None
        assert not tasks.mark_failed(conn, task_id, "conversion_failed", "stale", tasks.lease_of(stale))
        assert not tasks.requeue(conn, task_id, tasks.lease_of(stale))
        task = tasks.get_task(conn, task_id)
        assert task.status == "PROCESSING" and tasks.lease_of(task) == ("new-host:2", 2)
        usage = periods.usage_period(conn, account_row)
        assert usage["included_used"] == 0

        # the holder finishes, and is counted once
        assert tasks.mark_succeeded(conn, task_id, 10, 1800, billing.rule(app.config["DOCSHIFT"].plan_quotas),
                                    lease=tasks.lease_of(fresh)) == "INCLUDED"
        assert periods.usage_period(conn, account_row)["included_used"] == 1


def test_a_live_holder_keeps_its_task_until_the_longest_run(app, client, account):
    """A task is taken back when its holder is gone or past the derived longest run, never before."""
    task_id = post_file(client, account, b"data", "x.doc").get_json()["task_id"]
    with app.app_context():
        conn = get_db()
        tasks.start_processing(conn, task_id, maintenance.worker_name())  # this very process: alive
        soon = connection.now() + timedelta(seconds=conversion.max_run_seconds(app.config["DOCSHIFT"]) - 5)
        maintenance.recover_stuck(conn, get_store(), app.config["DOCSHIFT"], soon)
        assert tasks.get_task(conn, task_id).status == "PROCESSING"

        dead = post_file(client, account, b"data", "y.doc").get_json()["task_id"]
        tasks.start_processing(conn, dead, f"{maintenance.HOST}:{_dead_pid()}")
        maintenance.recover_stuck(conn, get_store(), app.config["DOCSHIFT"], connection.now())
        assert tasks.get_task(conn, dead).status == "QUEUED"


def _as_pid_one(code):
    """What ``code`` prints when run as pid 1 of a fresh pid namespace on this host: a container's
    worker, restarted, gets the pid its predecessor had."""
    import subprocess
    import sys
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc",
                           sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


def test_a_forked_child_names_itself_not_as_its_parent():
    """The name is read once per process: a child forked after its parent asked has its own pid and start."""
    parent = maintenance.worker_name()
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(writer, maintenance.worker_name().encode())
        finally:
            os._exit(0)
    os.close(writer)
    os.waitpid(pid, 0)
    child = os.read(reader, 4096).decode()
    os.close(reader)
    assert maintenance.worker_name() == parent
    assert child.split(":")[:2] == [maintenance.HOST, str(pid)] and child != parent


def test_a_restarted_container_takes_back_its_predecessors_tasks_at_once(app, client, account):
    """The previous start's holder has the same host and pid as the new worker: it is still gone."""
    name = "from docshift.tasks import maintenance; print(maintenance.worker_name())"
    before = _as_pid_one(name)
    assert before.split(":")[:2] == [maintenance.HOST, "1"]
    task_id = post_file(client, account, b"data", "x.doc").get_json()["task_id"]
    with app.app_context():
        conn = get_db()
        tasks.start_processing(conn, task_id, before)
        # the new start, pid 1 again, alive, right after the old one: not its holder
        gone = _as_pid_one(f"from docshift.tasks import maintenance; from datetime import datetime; "
                           f"print(maintenance.holder_gone(None, {before!r}, datetime.now()), "
                           f"maintenance.holder_gone(None, maintenance.worker_name(), datetime.now()))")
        assert gone == "True False"
        # and here, where pid 1 is another process again: the task comes back with its first sweep
        maintenance.recover_stuck(conn, get_store(), app.config["DOCSHIFT"], connection.now())
        assert tasks.get_task(conn, task_id).status == "QUEUED"


def _dead_pid():
    import subprocess
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_duties_keep_their_schedule_under_a_backlog(s3, tmp_path, slow_xls, legacy):
    """One worker busy with a backlog: the heartbeat stays fresh and a result still expires
    (deleted from the store) on time."""
    service = Service(tmp_path / "svc", s3["env"], RESULT_RETENTION_SECONDS=4, SWEEP_SECONDS=1,
                      HEARTBEAT_SECONDS=1).start(workers=1)
    try:
        key = service.register("busy")
        first = service.submit(key, legacy["doc"]).json()["task_id"]
        assert service.wait(key, first)["status"] == "SUCCEEDED"
        # far more work than the retention: the result must expire while conversions still wait
        backlog = [service.submit(key, slow_xls, f"big-{n}.xls").json()["task_id"] for n in range(12)]
        store = service.store()
        deadline = time.monotonic() + 30
        while store.result_size(service.rows()[first]["result_key"]) is not None:
            assert time.monotonic() < deadline, "the result outlived its retention under a backlog"
            time.sleep(0.5)
        # the sweep deletes the result first, then marks the row: a look between the two sees SUCCEEDED
        wait_for(lambda: service.rows()[first]["status"] == "EXPIRED", 5, "the expired result's row to say so")
        statuses = [service.wait_status(key, t) for t in backlog]
        assert "QUEUED" in statuses or "PROCESSING" in statuses, statuses  # the backlog is still there
        beat = liveness.last_heartbeat(connection.connect(service.config().database))
        assert (connection.now() - beat).total_seconds() < 5
        assert requests.get(f"{service.base_url}/healthz", timeout=5).status_code == 200
    finally:
        service.stop()


def test_a_store_outage_of_six_seconds_mid_run_loses_nothing(own_store, tmp_path, legacy):
    """Six times the store client's own retries (under a second when it refuses), through four of a run's patient
    retries (0.5 s, doubling: after 0.5, 1.5, 3.5 and 7.5 s): each run waits it out, and nothing is lost or
    counted twice."""
    service = Service(tmp_path / "svc", own_store.env).start()
    try:
        key = service.register("outage")
        files = [legacy["doc"], legacy["xls"], legacy["ppt"]] * 2
        tasks = [service.submit(key, path, f"{n}-{path.name}").json()["task_id"] for n, path in enumerate(files)]
        own_store.stop()
        time.sleep(6)
        assert requests.get(f"{service.base_url}/healthz", timeout=30).json()["checks"]["object_store"] != "ok"
        own_store.start()
        finals = [service.wait(key, task_id, timeout=240)["status"] for task_id in tasks]
        assert finals == ["SUCCEEDED"] * len(files)
        usage = requests.get(f"{service.base_url}/v1/account/usage", headers={"Authorization": f"Bearer {key}"},
                             timeout=10).json()
        assert usage["included_used"] == len(files)
    finally:
        service.stop()
