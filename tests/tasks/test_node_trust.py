"""What the coordinator and its nodes take from Redis, on a real redis-server: only messages signed
with the queue key, as JSON, never a pickle; outcomes checked against the object store before they
count; a node's claim bounded; a stale node run never touches the current result; links that reach
one job's objects only; Redis reached with a password or on loopback only."""

import json
import pickle
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests
from conftest import ROOT, Cluster, free_port_block, input_stored, stop_process_group, wait_for
from huey.registry import Message

from docshift import settings
from docshift.tasks.queue import Jobs, Queue
from docshift.tasks.registry import Registry

QUEUE, SCHEDULE, JOBS = "huey.redis.docshift", "huey.schedule.docshift", "huey.redis.docshiftjobs"


class Plant:
    """A pickle whose loading creates ``path``: what anyone who can write to Redis could send."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return Path.touch, (Path(self.path),)


def pickled_message(name, *args):
    """A queue message as huey's default serializer writes it: a pickled Message."""
    return pickle.dumps(Message(str(uuid.uuid4()), name, None, 0, 0, None, args, {}, None, None, None, None, None,
                                None, 0))


@pytest.fixture
def cluster(s3, tmp_path, redis_url):
    cluster = Cluster(tmp_path, s3["env"], redis_url, NODE_MAX_SLOTS=2).start()
    yield cluster
    cluster.stop()


def test_a_pickled_message_runs_nothing_and_is_dropped(cluster, tmp_path, legacy):
    planted = {where: tmp_path / f"planted-{where}" for where in ("sweep", "queue", "schedule", "jobs")}
    # the sweep's look at the jobs waiting for a node
    cluster.redis.lpush(JOBS, pickle.dumps(Plant(planted["sweep"])))
    assert Jobs(cluster.config()).waiting() == []
    assert not planted["sweep"].exists()
    # the coordinator's consumer and its scheduler, and a node's
    cluster.redis.lpush(QUEUE, pickle.dumps(Plant(planted["queue"])))
    cluster.redis.zadd(SCHEDULE, {pickle.dumps(Plant(planted["schedule"])): 0})
    cluster.start_node("node")
    cluster.redis.lpush(JOBS, pickle.dumps(Plant(planted["jobs"])))
    wait_for(lambda: cluster.log().count("message dropped") >= 2 and cluster.log("node").count("message dropped") >= 2,
             60, "the messages dropped")
    assert [where for where, path in planted.items() if path.exists()] == []
    # and both sides go on working
    key = cluster.coordinator.register("after-pickles")
    task_id = cluster.coordinator.submit(key, legacy["doc"]).json()["task_id"]
    assert cluster.coordinator.wait(key, task_id, timeout=120)["status"] == "SUCCEEDED"


def held_task(cluster, legacy, customer):
    """A task dispatched to a node that takes nothing: PROCESSING, held by a job in Redis."""
    config = cluster.config()
    Registry(config, Jobs(config)).beat("node:idle:1", 1)
    key = cluster.coordinator.register(customer)
    task_id = cluster.coordinator.submit(key, legacy["doc"]).json()["task_id"]
    wait_for(lambda: cluster.rows()[task_id]["status"] == "PROCESSING", 30, "the dispatch")
    return key, cluster.rows()[task_id]


def test_forged_outcomes_are_not_applied(cluster, legacy):
    key, task = held_task(cluster, legacy, "forged-outcomes")
    forged = {"task_id": task["id"], "holder": task["worker"], "attempt": task["attempts"], "status": "SUCCEEDED",
              "size": 4321, "code": None, "message": None, "detected_format": "word-97", "extension": "docx",
              "fidelity": None, "outage": False, "restarts": 0}
    # unsigned, as huey's default serializer writes it: the holder and attempt are readable in Redis
    cluster.redis.lpush(QUEUE, pickled_message("docshift.tasks.queue.outcome", forged))
    wait_for(lambda: "message dropped" in cluster.log() or cluster.rows()[task["id"]]["status"] != "PROCESSING",
             30, "the forged outcome taken")
    assert cluster.rows()[task["id"]]["status"] == "PROCESSING"
    # signed JSON, with a key that is not the coordinator's
    Queue(cluster.config(QUEUE_KEY="f" * 64)).report(forged)
    wait_for(lambda: cluster.log().count("message dropped") >= 2, 30, "the wrongly signed outcome dropped")
    assert cluster.rows()[task["id"]]["status"] == "PROCESSING"
    # signed with the key, but there is no result behind it: retried, not counted
    Queue(cluster.config()).report(forged)
    wait_for(lambda: cluster.rows()[task["id"]]["attempts"] > task["attempts"]
             or cluster.rows()[task["id"]]["status"] != "PROCESSING", 30, "the outcome applied")
    row = cluster.rows()[task["id"]]
    assert row["status"] in ("QUEUED", "PROCESSING")  # taken back, maybe dispatched again already
    assert (row["billing_class"], row["result_size"]) == (None, None)
    assert cluster.usage(key)["included_used"] == 0
    assert "no result of 4321 bytes" in cluster.log()


def test_a_run_stopped_costs_no_attempt_only_when_the_coordinator_asked_for_it(cluster, legacy):
    """A node that reports its run preempted sends the task back to the queue. That costs the file no attempt only
    when the coordinator asked that job to stop (``Registry.stop``); otherwise it is a retry like any other."""
    key, task = held_task(cluster, legacy, "preempted-outcomes")
    registry, queue = Registry(cluster.config(), Jobs(cluster.config())), Queue(cluster.config())

    def report_preempted(row):
        queue.report({"task_id": row["id"], "holder": row["worker"], "attempt": row["attempts"], "status": "RETRY",
                      "outage": False, "restarts": 0, "preempted": True})
        wait_for(lambda: cluster.rows()[row["id"]]["worker"] != row["worker"], 30, "the outcome applied")
        wait_for(lambda: cluster.rows()[row["id"]]["status"] == "PROCESSING", 30, "the task dispatched again")
        return cluster.rows()[row["id"]]

    unasked = report_preempted(task)
    assert unasked["attempts"] == task["attempts"] + 1  # not asked for: an attempt used
    assert registry.stop(unasked["worker"]) and not registry.stop(unasked["worker"])  # asked once
    assert registry.to_stop([unasked["worker"], task["worker"]]) == {unasked["worker"]}
    asked = report_preempted(unasked)
    assert asked["attempts"] == unasked["attempts"]  # released, then claimed again: no attempt used
    assert cluster.usage(key)["included_used"] == 0


def test_a_job_asked_to_stop_before_a_node_began_it_is_skipped_at_no_attempt(cluster, legacy):
    """The coordinator may ask a job to stop while it still waits in Redis for a node: the node that takes it reports
    it preempted without converting it, and the file goes back to the queue without using an attempt."""
    key, task = held_task(cluster, legacy, "stopped-before-start")
    assert Registry(cluster.config(), Jobs(cluster.config())).stop(task["worker"])
    cluster.start_node("late")
    body = cluster.coordinator.wait(key, task["id"], timeout=120)
    assert body["status"] == "SUCCEEDED"
    assert f"job {task['worker']} of task {task['id']} was asked to stop before it started; skipped" in \
        cluster.log("late")
    assert "stopped as the coordinator asked" not in cluster.log("late")  # no LibreOffice was begun for it
    row = cluster.rows()[task["id"]]
    assert row["worker"] != task["worker"] and row["attempts"] == task["attempts"]
    assert cluster.usage(key)["included_used"] == 1


def test_a_node_gets_only_a_bounded_number_of_jobs(cluster, legacy):
    config = cluster.config()
    registry = Registry(config, Jobs(config))
    # an entry written by hand, unsigned, and a node that announces a million slots
    cluster.redis.hset("docshift:nodes", "node:forged:2", json.dumps({"slots": 50, "beat": time.time() + 3600}))
    registry.beat("node:greedy:1", 10**6)
    key = cluster.coordinator.register("greedy-node")
    tasks = [cluster.coordinator.submit(key, legacy["doc"], f"{n}.doc").json()["task_id"] for n in range(5)]

    def processing():
        registry.beat("node:greedy:1", 10**6)
        return sum(cluster.rows()[task_id]["status"] == "PROCESSING" for task_id in tasks)

    wait_for(lambda: processing() >= 2, 30, "the dispatch")
    for _ in range(6):  # the coordinator dispatches every second: give it several chances to overreach
        time.sleep(0.5)
        assert processing() == 2  # DOCSHIFT_NODE_MAX_SLOTS
    assert "node:forged:2" not in {name.decode() for name in cluster.redis.hkeys("docshift:nodes")}


def test_a_stale_node_run_never_overwrites_the_current_result(cluster, legacy, slow_xls):
    """A node that goes silent mid-conversion loses its job to another node; when it wakes up and
    finishes, what it made goes nowhere the task's result is read from."""
    stale = cluster.start_node("stale")
    key = cluster.coordinator.register("stale-node")
    task_id = cluster.coordinator.submit(key, slow_xls, "big.xls").json()["task_id"]
    # it has the input (the big workbook) and converts it: freeze it, so that its beats stop
    scratch = cluster.tmp_path / "stale"
    wait_for(lambda: any(path.is_file() and path.stat().st_size == slow_xls.stat().st_size
                         for path in (scratch / "tasks").rglob("*")), 90, "the stale node's input")
    stale.send_signal(signal.SIGSTOP)
    try:
        # the input changes under it (a small workbook), so that its result is told apart
        from docshift.storage import ObjectStore
        ObjectStore(cluster.coordinator.config()).put_input(task_id, legacy["xls"].read_bytes())
        wait_for(lambda: cluster.rows()[task_id]["status"] == "QUEUED", 60, "the job taken back")
        cluster.start_node("current")
        body = cluster.coordinator.wait(key, task_id, timeout=120)
        assert body["status"] == "SUCCEEDED"
    finally:
        stale.send_signal(signal.SIGCONT)
    wait_for(lambda: "ignored" in cluster.log(), 120, "the stale run's outcome")  # it has stored what it would
    downloaded = requests.get(cluster.coordinator.wait(key, task_id)["download_url"], timeout=10).content
    assert len(downloaded) == body["result_size"]
    assert cluster.usage(key)["included_used"] == 1


JOB = {"task_id": "tsk_0123456789abcdef01234567", "kind": "doc", "macros": "keep", "holder": "job:0123456789abcdef",
       "attempt": 1, "input": "http://store:8333/b/inputs/x?X-Amz-Signature=1",
       "result": "http://store:8333/b/results/x?X-Amz-Signature=2", "tenant": "acc_0123456789abcdef01234567",
       "filename": "Budget 2024.doc"}
OUTCOME = {"task_id": JOB["task_id"], "holder": JOB["holder"], "attempt": 1, "status": "SUCCEEDED", "size": 10,
           "code": None, "message": None, "detected_format": "word-97", "extension": "docx", "fidelity": {},
           "outage": False, "restarts": 0}


@pytest.mark.parametrize("change", [{"task_id": "../../etc/passwd"}, {"task_id": "tsk_0123456789abcdef0123456/"},
                                    {"kind": "sh"}, {"macros": "run"}, {"holder": "job:../../x"}, {"attempt": "1"},
                                    {"attempt": 0}, {"input": "file:///etc/passwd"}, {"result": "ftp://store/x"},
                                    {"tenant": "acc_x"}, {"tenant": None}, {"filename": None}])
def test_a_jobs_values_are_checked_before_they_reach_a_path(change):
    from docshift.errors import ForgedMessage
    from docshift.tasks import messages

    assert messages.job(dict(JOB)) == JOB
    with pytest.raises(ForgedMessage):
        messages.job({**JOB, **change})


@pytest.mark.parametrize("change", [{"status": "COUNTED"}, {"size": -1}, {"size": None}, {"extension": "exe"},
                                    {"extension": None}, {"detected_format": "../x"}, {"code": "DROP TABLE"},
                                    {"fidelity": []}, {"message": "x" * 5000}, {"restarts": True},
                                    {"task_id": "tsk_x"}, {"holder": "host:1"}, {"preempted": "yes"}])
def test_an_outcomes_values_are_checked_before_they_reach_the_database(change):
    from docshift.errors import ForgedMessage
    from docshift.tasks import messages
    from docshift.tasks.nodes import OUTCOME_FIELDS

    assert messages.outcome({**OUTCOME, "extra": 1}, OUTCOME_FIELDS) == OUTCOME  # unknown fields are left out
    with pytest.raises(ForgedMessage):
        messages.outcome({**OUTCOME, **change}, OUTCOME_FIELDS)


def test_a_jobs_links_reach_its_own_objects_only(app):
    from docshift.storage.s3 import result_key
    from docshift.web.context import get_store

    with app.app_context():
        store = get_store()
        store.put_input("tsk_mine", b"my input")
        store.put_input("tsk_other", b"another tenant's input")
        mine = result_key("tsk_mine", ("job:0123456789abcdef", 1))
        links = store.job_links("tsk_mine", mine, 60)
        assert requests.get(links["input"], timeout=10).content == b"my input"
        assert requests.get(links["input"].replace("tsk_mine", "tsk_other"), timeout=10).status_code == 403
        assert requests.put(links["input"], data=b"overwritten", timeout=10).status_code == 403
        assert requests.put(links["result"].replace("tsk_mine", "tsk_other"), data=b"x", timeout=10).status_code == 403
        assert requests.get(links["result"], timeout=10).status_code == 403
        assert requests.put(links["result"], data=b"my result", timeout=10).status_code == 200
        assert store.result_size(mine) == len(b"my result")
        assert input_stored(store, "tsk_other") and input_stored(store, "tsk_mine")


# Redis itself: a password, TLS, loopback ------------------------------------------------

@pytest.mark.parametrize("url", ["redis://10.1.2.3:6379/0", "redis://queue.example:6379/0",
                                 "rediss://queue.example:6380/0", "redis://user@queue.example:6379/0"])
def test_a_redis_url_without_a_password_off_loopback_is_refused(tmp_path, url):
    with pytest.raises(ValueError, match="password"):
        settings.load({"DATA_DIR": str(tmp_path), "QUEUE_URL": url, "QUEUE_KEY": "k" * 64})


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/0", "redis://localhost:6379/1", "redis://[::1]:6379/0",
                                 "unix:///run/redis/redis.sock", "redis://:secret@10.1.2.3:6379/0",
                                 "rediss://docshift:secret@queue.example:6380/0",
                                 "redis://queue.example:6379/0?password=secret"])
def test_a_redis_url_with_a_password_or_on_loopback_is_taken(tmp_path, url):
    assert settings.load({"DATA_DIR": str(tmp_path), "QUEUE_URL": url, "QUEUE_KEY": "k" * 64}).queue_url == url


def test_a_node_refuses_redis_without_a_password_off_loopback(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "DOCSHIFT_DATA_DIR": str(tmp_path), "DOCSHIFT_QUEUE_KEY": "k" * 64,
           "DOCSHIFT_QUEUE_URL": "redis://10.1.2.3:6379/0"}
    node = subprocess.run([sys.executable, "worker.py", "node"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert node.returncode != 0
    assert "password" in node.stderr and "10.1.2.3" in node.stderr


def test_a_node_refuses_to_start_without_the_queue_key(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "DOCSHIFT_DATA_DIR": str(tmp_path), "DOCSHIFT_QUEUE_URL": "redis://127.0.0.1:1/0"}
    node = subprocess.run([sys.executable, "worker.py", "node"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert node.returncode != 0 and "DOCSHIFT_QUEUE_KEY" in node.stderr


@pytest.fixture
def tls_redis(tmp_path):
    """A redis-server that speaks only TLS and wants a password: ``(url, password)``."""
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=tmp_path, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=docshift test CA", "-days", "1",
            "-keyout", "ca.key", "-out", "ca.crt")
    openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", "server.key", "-out", "server.csr")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-copy_extensions", "copy", "-days", "1", "-out", "server.crt")
    port, password = free_port_block(), "a-long-redis-password"
    process = subprocess.Popen(["redis-server", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
                                "--tls-cert-file", str(tmp_path / "server.crt"),
                                "--tls-key-file", str(tmp_path / "server.key"),
                                "--tls-ca-cert-file", str(tmp_path / "ca.crt"), "--tls-auth-clients", "no",
                                "--requirepass", password, "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"rediss://:{password}@127.0.0.1:{port}/0?ssl_ca_certs={tmp_path / 'ca.crt'}"
    import redis
    wait_for(lambda: redis.Redis.from_url(url).ping(), 30, "redis-server with TLS")
    yield url, password
    stop_process_group(process)


def test_the_queue_works_over_tls_with_a_password(tmp_path, tls_redis):
    url, password = tls_redis
    config = settings.load({"DATA_DIR": str(tmp_path), "QUEUE_URL": url, "QUEUE_KEY": "k" * 64})
    jobs = Jobs(config)
    jobs.send(JOB)
    assert [job["task_id"] for job in jobs.waiting()] == ["tsk_0123456789abcdef01234567"]
    import redis
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis.from_url(url.replace(password, "wrong")).ping()
    with pytest.raises(redis.exceptions.ConnectionError):
        redis.Redis.from_url(url.split("?")[0].replace("rediss://", "redis://")).ping()
