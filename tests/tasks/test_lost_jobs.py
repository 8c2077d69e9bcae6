"""Jobs lost between the coordinator and its nodes, on a real redis-server: a job that vanished
(Redis restarted empty, a node with another key popped it) is sent again without using the file's
attempts; a node whose queue key is not the coordinator's refuses to start; keys rotate; an old job
replayed is refused and its task sent again; and what a holder of the queue key reads in Redis is
what docs/security.md says."""

import base64
import hashlib
import hmac
import json
import re
import secrets
import subprocess
import threading
import time
from datetime import timedelta

import pytest
import redis
import requests
from conftest import ROOT, Cluster, free_port_block, post_file, stop_process_group, wait_for
from cryptography.fernet import Fernet

from docshift.errors import BadSetting
from docshift.tasks.conversion import MAX_ATTEMPTS, max_run_seconds
from docshift.tasks.queue import Jobs
from docshift.tasks.registry import Registry

JOBS = "huey.redis.docshiftjobs"


@pytest.fixture
def cluster(s3, tmp_path, redis_url):
    cluster = Cluster(tmp_path, s3["env"], redis_url).start()
    yield cluster
    cluster.stop()


class IdleNode:
    """A node that announces a slot and takes nothing: what the coordinator sends stays in Redis."""

    def __init__(self, cluster, name="node:idle:1"):
        config = cluster.config()
        self.registry, self.name = Registry(config, Jobs(config)), name
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)
        self.thread.start()

    def _beat(self):
        while not self.stopping.is_set():
            try:  # again at once after Redis restarted empty
                self.registry.beat(self.name, 1)
            except Exception:
                pass
            self.stopping.wait(0.3)

    def stop(self):
        self.stopping.set()
        self.thread.join()
        self.registry.leave(self.name)


def waiting_job(cluster, task_id, not_holders=()):
    """The job of ``task_id`` waiting in Redis, once one not held by ``not_holders`` is there."""
    jobs = Jobs(cluster.config())
    found = []

    def sent():
        found[:] = [job for job in jobs.waiting() if job["task_id"] == task_id and job["holder"] not in not_holders]
        return found or cluster.rows()[task_id]["status"] == "FAILED"
    wait_for(sent, 60, f"a job of {task_id} in Redis")
    row = cluster.rows()[task_id]
    assert row["status"] != "FAILED", (row["error_code"], row["error_message"], row["attempts"])
    return found[0]


def test_lost_jobs_use_none_of_the_files_attempts(cluster, legacy):
    idle = IdleNode(cluster)
    # a node with another key: it pops a job, cannot open it, drops it
    stranger = Jobs(cluster.config(QUEUE_KEY=secrets.token_hex(32)))
    key = cluster.coordinator.register("lost-jobs")
    task_id = cluster.coordinator.submit(key, legacy["doc"]).json()["task_id"]
    lost = set()
    for loss in range(MAX_ATTEMPTS + 1):  # more than a file's attempts
        job = waiting_job(cluster, task_id, lost)
        if loss % 2:
            cluster.redis.flushdb()  # Redis restarted without persistence
        else:
            assert not stranger.take()
        assert Jobs(cluster.config()).waiting() == []
        lost.add(job["holder"])
    waiting_job(cluster, task_id, lost)  # sent once more
    row = cluster.rows()[task_id]
    assert row["status"] == "PROCESSING" and row["attempts"] == 1, dict(row)

    idle.stop()
    cluster.start_node("node")
    body = cluster.coordinator.wait(key, task_id, timeout=180)
    assert body["status"] == "SUCCEEDED"
    assert cluster.rows()[task_id]["attempts"] == 1  # one conversion, one attempt
    assert cluster.usage(key)["included_used"] == 1


@pytest.fixture
def own_redis(tmp_path):
    """A redis-server of this test's own, without persistence, that ``restart()`` kills and starts
    again, empty, on the same port."""
    port = free_port_block()
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(tmp_path)]
    import redis

    class Server:
        url = f"redis://127.0.0.1:{port}/0"

        def start(self):
            self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                            start_new_session=True)
            wait_for(lambda: redis.Redis(port=port).ping(), 30, "redis-server")

        def restart(self):
            self.process.kill()
            self.process.wait()
            self.start()

    server = Server()
    server.start()
    yield server
    stop_process_group(server.process)


@pytest.mark.slow
def test_redis_restarted_empty_under_a_batch(s3, tmp_path, own_redis, legacy):
    cluster = Cluster(tmp_path, s3["env"], own_redis.url).start()
    try:
        cluster.start_node("node")
        key = cluster.coordinator.register("redis-restart")
        files = [legacy["doc"], legacy["xls"], legacy["ppt"]] * 5 + [legacy["doc"]]
        tasks = [cluster.coordinator.submit(key, path, f"{n}-{path.name}").json()["task_id"]
                 for n, path in enumerate(files)]
        wait_for(lambda: sum(row["status"] == "SUCCEEDED" for row in cluster.rows().values()) >= 4, 180,
                 "the batch under way")
        own_redis.restart()
        bodies = [cluster.coordinator.wait(key, task_id, timeout=240) for task_id in tasks]
        assert [body["status"] for body in bodies] == ["SUCCEEDED"] * 16
        assert cluster.usage(key)["included_used"] == 16
        # the jobs Redis lost were sent again without using an attempt
        assert [row["attempts"] for row in cluster.rows().values()] == [1] * 16
    finally:
        cluster.stop()


# the queue key: one for all, rotated, and a node that holds another refuses to start ---------------

def node_exit(cluster, name, queue_key):
    """Start a node with ``queue_key``; its exit status and the seconds it took to exit (None if it did not)."""
    started = time.monotonic()
    process = cluster.start_node(name, queue_key=queue_key)
    try:
        status = process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        return None, None
    return status, time.monotonic() - started


def test_a_node_whose_key_is_not_the_coordinators_refuses_to_start(cluster, legacy):
    idle = IdleNode(cluster)
    key = cluster.coordinator.register("wrong-key")
    task_id = cluster.coordinator.submit(key, legacy["doc"]).json()["task_id"]
    job = waiting_job(cluster, task_id)
    new = secrets.token_hex(32)
    # another key altogether; and a new key put first (it would seal outcomes the coordinator cannot open)
    for name, queue_key, why in (("other", secrets.token_hex(32), "opens with none of this node's keys"),
                                 ("new-first", f"{new},{cluster.queue_key}", "the coordinator does not hold")):
        status, seconds = node_exit(cluster, name, queue_key)
        assert status is not None, f"the node with {name} key still runs after 60 s"
        assert status != 0 and seconds < 15, (status, seconds)
        assert "DOCSHIFT_QUEUE_KEY" in cluster.log(name) and why in cluster.log(name), cluster.log(name)
        print(f"a node with the {name} key exited ({status}) in {seconds:.1f} s")
    # it took nothing: the job still waits
    assert [waiting["holder"] for waiting in Jobs(cluster.config()).waiting()] == [job["holder"]]

    # the coordinator's key first, a new one after (the first step of a rotation): it converts
    idle.stop()
    cluster.start_node("rotating", queue_key=f"{cluster.queue_key},{new}")
    assert cluster.coordinator.wait(key, task_id, timeout=180)["status"] == "SUCCEEDED"
    assert cluster.rows()[task_id]["attempts"] == 1


def test_keys_rotate_sealed_with_the_first_opened_with_any(tmp_path, redis_url):
    from docshift import settings

    old, new = secrets.token_hex(32), secrets.token_hex(32)
    url = redis_url  # database 0: clusters take 1-15

    def jobs(queue_key):
        return Jobs(settings.load({"DATA_DIR": str(tmp_path), "QUEUE_URL": url, "QUEUE_KEY": queue_key}))

    jobs(old).huey.storage.conn.flushdb()
    job = {"task_id": "tsk_0123456789abcdef01234567", "kind": "doc", "macros": "keep",
           "holder": "job:0123456789abcdef", "attempt": 1, "input": "http://store/i", "result": "http://store/r",
           "tenant": "acc_0123456789abcdef01234567", "filename": "a.doc"}
    jobs(old).send(job)
    assert jobs(f" {new} , {old} ").waiting() == [job]  # any of the keys opens
    assert jobs(new).waiting() == []  # not this one
    jobs(old).huey.storage.conn.flushdb()
    jobs(f"{new},{old}").send(job)  # sealed with the first
    assert jobs(new).waiting() == [job] and jobs(old).waiting() == []
    # every key of the list is long enough, and named without its value
    for bad in (f"{new},short", f"{new},,{'x' * 10}"):
        with pytest.raises(BadSetting, match="DOCSHIFT_QUEUE_KEY") as raised:
            settings.load({"DATA_DIR": str(tmp_path), "QUEUE_URL": url, "QUEUE_KEY": bad})
        assert new not in str(raised.value)


# an old job replayed -------------------------------------------------------------------------------

def sealed_at(queue_key, purpose, fields, at):
    """What docshift seals, as Fernet under the key derived for ``purpose``, sealed at ``at``: how an
    old message looks (as one captured from Redis and replayed later)."""
    derived = hmac.new(queue_key.encode(), purpose.encode(), hashlib.sha256).digest()
    return Fernet(base64.urlsafe_b64encode(derived)).encrypt_at_time(json.dumps(fields).encode(), int(at))


def opened(queue_key, purpose, blob):
    derived = hmac.new(queue_key.encode(), purpose.encode(), hashlib.sha256).digest()
    return json.loads(Fernet(base64.urlsafe_b64encode(derived)).decrypt(blob))


def test_an_old_job_replayed_is_refused_and_its_task_sent_again(cluster, legacy):
    idle = IdleNode(cluster)
    key = cluster.coordinator.register("replayed")
    task_id = cluster.coordinator.submit(key, legacy["doc"]).json()["task_id"]
    job = waiting_job(cluster, task_id)
    # the job as the coordinator sealed it, but as if it had been sealed longer ago than a job lives
    message = opened(cluster.queue_key, "queue:docshift-jobs", cluster.redis.rpop(JOBS))
    assert message["args"][0]["holder"] == job["holder"]
    lifetime = max_run_seconds(cluster.config())
    cluster.redis.lpush(JOBS, sealed_at(cluster.queue_key, "queue:docshift-jobs", message,
                                        time.time() - lifetime - 60))
    idle.stop()
    cluster.start_node("node")
    wait_for(lambda: "queue message dropped" in cluster.log("node"), 90, "the old job refused")
    assert "older than" in cluster.log("node")
    body = cluster.coordinator.wait(key, task_id, timeout=180)  # sent again, converted
    assert body["status"] == "SUCCEEDED"
    row = cluster.rows()[task_id]
    assert row["worker"] != job["holder"] and row["attempts"] == 1
    assert cluster.usage(key)["included_used"] == 1


# what a holder of the queue key reads in Redis -----------------------------------------------------

def test_what_a_key_holder_reads_in_redis_is_what_security_md_says(cluster, legacy):
    idle = IdleNode(cluster)
    try:
        key = cluster.coordinator.register("key-holder")
        task_id = cluster.coordinator.submit(key, legacy["doc"]).json()["task_id"]
        waiting_job(cluster, task_id)
        # all of Redis, read by anyone who reaches it: every entry is sealed
        found = {}
        for name in cluster.redis.keys("*"):
            kind = cluster.redis.type(name).decode()
            raw = {"list": lambda n: cluster.redis.lrange(n, 0, -1), "hash": lambda n: cluster.redis.hvals(n),
                   "string": lambda n: [cluster.redis.get(n)], "zset": lambda n: cluster.redis.zrange(n, 0, -1)}[kind]
            found[name.decode()] = raw(name)
        assert JOBS in found
        assert not any(task_id.encode() in value or key.encode() in value for values in found.values()
                       for value in values)
        # with the key: each waiting job's fields, the customer's links among them
        fields = set(Jobs(cluster.config()).waiting()[0])
        assert fields >= {"input", "result", "filename"} and "tenant" not in fields
    finally:
        idle.stop()
    section = (ROOT / "docs" / "security.md").read_text().split("## Redis and the queue key", 1)[1].split("\n## ")[0]
    named = set(re.findall(r"`([a-z_]+)`", section))
    assert fields <= named, f"docs/security.md does not say that a key holder reads {sorted(fields - named)}"


class HeartbeatBetweenLooks(Registry):
    """The registry as the coordinator reads it, with a node's heartbeat landing right after each look at the running
    jobs: the node writes the job it runs again, as it does once Redis restarted empty (a real write to Redis)."""

    def runner(self, holder):
        seen = super().runner(holder)
        self.beat("node:late:1", 1)
        self.running(holder, "node:late:1")
        return seen


def test_a_node_that_writes_its_job_again_after_the_look_costs_the_file_no_attempt(app, client, account, legacy,
                                                                                   redis_url):
    """Redis restarted empty: the coordinator finds a job neither waiting nor running, well after it sent it, and
    the node's next heartbeat writes the job again right after that look. One look decides both whether the job is
    gone and whether a node began it: the job goes back without using an attempt. (Two looks, as before, took the
    second for a node that began it: `test_redis_restarted_empty_under_a_batch` saw attempt 2 once on a clean
    clone.)"""
    from dataclasses import replace

    from docshift.storage import connection, tasks
    from docshift.tasks import maintenance
    from docshift.web.context import get_db, get_store

    task_id = post_file(client, account, legacy["doc"].read_bytes(), "letter.doc").get_json()["task_id"]
    config = replace(app.config["DOCSHIFT"], queue_url=redis_url.rsplit("/", 1)[0] + "/14",
                     queue_key=secrets.token_hex(32))
    registry = HeartbeatBetweenLooks(config, Jobs(config))
    registry.redis.flushdb()
    with app.app_context():
        conn = get_db()
        tasks.start_processing(conn, task_id, "job:" + secrets.token_hex(8))
        later = connection.now() + timedelta(seconds=config.node_silence_seconds + 1)
        maintenance.recover_stuck(conn, get_store(), config, later, registry)
        row = tasks.get_task(conn, task_id)
    assert (row.status, row.attempts) == ("QUEUED", 0)


class RunWrittenLate(Registry):
    """A node's registry whose first write of a job's run meets Redis gone, as it restarts (the rest are real)."""

    def __init__(self, config, jobs):
        super().__init__(config, jobs)
        self.failed = []

    def running(self, holder, node):
        if not self.failed:
            self.failed.append(holder)
            raise redis.exceptions.ConnectionError("Error while reading from Redis: Connection reset by peer")
        super().running(holder, node)


def test_a_job_whose_run_is_not_written_is_converted_not_held_for_ever(cluster, legacy):
    """A node took a job as Redis restarted, and writing that it runs it failed. The job was kept in the node's
    list of runs (which every beat writes again) but never converted: the coordinator, told at every beat that the
    node runs it, never took it back, and the task stayed PROCESSING (`test_redis_restarted_empty_under_a_batch`,
    on a clean clone: 240 s). The node now converts what it took, and its next beat writes the run."""
    from docshift.tasks.nodes import Node
    from docshift.tasks.shared import Conversions

    config = cluster.config(WORKERS="1")
    node = Node(config, Conversions(config, on_change=lambda: None), 1)
    node.registry = RunWrittenLate(config, node.jobs)
    key = cluster.coordinator.register("run-written-late")
    task_id = cluster.coordinator.submit(key, legacy["doc"]).json()["task_id"]
    node.start()
    try:
        body = cluster.coordinator.wait(key, task_id, timeout=120)
        assert body["status"] == "SUCCEEDED" and node.registry.failed, body
        assert cluster.rows()[task_id]["attempts"] == 1
        wait_for(lambda: not node._running, 10, "the node's list of runs to empty")
    finally:
        node.stop()


@pytest.mark.slow
def test_a_node_run_waits_out_redis_down_before_it_stores_its_result(own_redis, tmp_path):
    """Just before it stores its result, a node's run asks the coordinator's registry whether its job was taken back
    (``JobStore.put_result``). Redis down at that moment is an outage the run waits out, as it waits out the object
    store, not a conversion that broke and uses one of the file's attempts."""
    from docshift import settings
    from docshift.errors import QueueUnavailable, StorageUnavailable
    from docshift.tasks.conversion import Patience

    config = settings.load({"DATA_DIR": str(tmp_path / "side"), "QUEUE_URL": own_redis.url,
                            "QUEUE_KEY": secrets.token_hex(32)})
    registry = Registry(config, Jobs(config))
    own_redis.process.kill()
    own_redis.process.wait()
    with pytest.raises(QueueUnavailable) as down:
        registry.revoked("job:0123456789abcdef")
    assert isinstance(down.value, StorageUnavailable)
    back = threading.Timer(1.5, own_redis.start)
    back.start()
    try:
        assert Patience(60)(registry.revoked, "job:0123456789abcdef") is False
    finally:
        back.join()


@pytest.mark.slow
def test_an_outcome_sent_while_redis_is_down_goes_when_it_is_back(tmp_path, own_redis):
    """A node whose run ended (a failure: only a success waited for Redis before) while Redis did not answer: its
    outcome was dropped, and the task stayed PROCESSING, its slot taken, until its lease ran out. The node now sends
    it again until Redis takes it."""
    from docshift import settings
    from docshift.tasks.nodes import Node
    from docshift.tasks.queue import Queue

    config = settings.load({"DATA_DIR": str(tmp_path / "node"), "QUEUE_URL": own_redis.url,
                            "QUEUE_KEY": secrets.token_hex(32)})
    node = Node(config, None, 1)
    outcome = {"task_id": "tsk_" + "a" * 24, "holder": "h", "attempt": 1, "status": "FAILED",
               "code": "encrypted_document", "message": "The file is password-protected."}
    own_redis.process.kill()
    own_redis.process.wait()
    sending = threading.Thread(target=node.report, args=(outcome,))
    sending.start()
    time.sleep(1.5)
    assert sending.is_alive()  # still trying
    own_redis.start()
    sending.join(30)
    assert not sending.is_alive()
    assert Queue(config).pending() == 1  # the outcome, waiting for the coordinator

    # a node told to stop (drained) while Redis is away gives up at once: the coordinator takes the job back
    own_redis.process.kill()
    own_redis.process.wait()
    sending = threading.Thread(target=node.report, args=(outcome,))
    sending.start()
    time.sleep(1)
    node.stopping.set()
    sending.join(10)
    assert not sending.is_alive()
    own_redis.start()


@pytest.mark.slow
def test_healthz_says_when_the_queue_s_redis_does_not_answer(s3, tmp_path, own_redis, legacy):
    """/healthz said 200, every part ok, with Redis down; and the coordinator logged a traceback a second for each
    duty that asks Redis."""
    cluster = Cluster(tmp_path, s3["env"], own_redis.url).start()
    try:
        cluster.start_node("node")
        healthz = f"{cluster.coordinator.base_url}/healthz"
        wait_for(lambda: requests.get(healthz, timeout=5).status_code == 200, 60, "a node taking jobs")
        own_redis.process.kill()
        own_redis.process.wait()
        wait_for(lambda: "failing: the queue's Redis: " in requests.get(healthz, timeout=5).json()["checks"][
            "engine"], 30, "/healthz naming Redis")
        assert requests.get(healthz, timeout=5).status_code == 503
        time.sleep(3)  # the duties that ask Redis each second say so once, not at every turn with a traceback
        said = cluster.log()
        assert said.count("duty dispatch waits for what does not answer") == 1 and "duty dispatch failed" not in said
        own_redis.start()
        wait_for(lambda: requests.get(healthz, timeout=5).status_code == 200, 60, "/healthz ok again")
        wait_for(lambda: "duty dispatch runs again" in cluster.log(), 30, "the duty's return in the log")
    finally:
        cluster.stop()
