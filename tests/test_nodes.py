"""Conversion nodes on a real redis-server: a coordinator that converts nothing itself, nodes in
separate processes with their own scratch dirs, a node killed mid-batch, a node that comes late."""

import os
import signal
import subprocess
import time

import pytest
import requests
from conftest import BIN, ROOT, Service, free_port_block, stop_process_group, wait_for

FINAL = ("SUCCEEDED", "FAILED", "EXPIRED")
FAST = {"NODE_HEARTBEAT_SECONDS": 0.5, "NODE_SILENCE_SECONDS": 3, "SWEEP_SECONDS": 1}


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """A real redis-server on loopback, for this module only."""
    port = free_port_block()
    directory = tmp_path_factory.mktemp("redis")
    process = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", str(directory)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    import redis
    wait_for(lambda: redis.Redis(port=port).ping(), 30, "redis-server")
    yield f"redis://127.0.0.1:{port}/0"
    stop_process_group(process)


class Cluster:
    """A coordinator (web + worker with DOCSHIFT_WORKERS=0) and conversion nodes."""

    def __init__(self, tmp_path, s3_env, redis_url):
        # each test its own Redis database, so queues and node registries never mix
        self.queue_url = redis_url.rsplit("/", 1)[0] + f"/{int(time.time() * 1000) % 15 + 1}"
        import redis
        redis.Redis.from_url(self.queue_url).flushdb()
        self.tmp_path = tmp_path
        self.coordinator = Service(tmp_path / "coordinator", s3_env, QUEUE_URL=self.queue_url, **FAST)
        self.nodes = {}

    def start(self):
        self.coordinator.start_web()
        self.coordinator.start_worker(workers=0)
        self.coordinator.wait_healthy()
        return self

    def start_node(self, name):
        """A node process: only the queue, the store and its own scratch dir, nothing of the
        coordinator's data dir."""
        scratch = self.tmp_path / name
        scratch.mkdir()
        env = {key: value for key, value in self.coordinator.env.items() if not key.startswith("DOCSHIFT_")}
        env.update({key: value for key, value in self.coordinator.env.items()
                    if key.startswith(("DOCSHIFT_S3_", "DOCSHIFT_NODE_"))})
        env.update({"DOCSHIFT_QUEUE_URL": self.queue_url, "DOCSHIFT_DATA_DIR": str(scratch),
                    "DOCSHIFT_WORKERS": "1"})
        with open(scratch / "node.log", "ab") as log:
            self.nodes[name] = subprocess.Popen([str(BIN / "python"), "worker.py", "node"], cwd=ROOT, env=env,
                                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        return self.nodes[name]

    def stop(self):
        for process in self.nodes.values():
            stop_process_group(process)
        self.coordinator.stop()

    def usage(self, key):
        return requests.get(f"{self.coordinator.base_url}/v1/account/usage",
                            headers={"Authorization": f"Bearer {key}"}, timeout=10).json()


@pytest.fixture
def cluster(s3, tmp_path, redis_url):
    cluster = Cluster(tmp_path, s3["env"], redis_url).start()
    yield cluster
    cluster.stop()


def submit_batch(cluster, key, files):
    return [cluster.coordinator.submit(key, path, name).json()["task_id"] for name, path in files]


def test_two_nodes_convert_a_mixed_batch(cluster, legacy, tmp_path):
    junk = tmp_path / "junk.doc"
    junk.write_bytes(os.urandom(2048))
    cluster.start_node("node-a")
    cluster.start_node("node-b")
    key = cluster.coordinator.register("two-nodes")
    files = [(f"{n}-{path.name}", path) for n, path in enumerate([legacy["doc"], legacy["xls"], legacy["ppt"]] * 2)]
    tasks = submit_batch(cluster, key, files + [("junk.doc", junk)])
    bodies = [cluster.coordinator.wait(key, task_id, timeout=180) for task_id in tasks]
    assert [b["status"] for b in bodies] == ["SUCCEEDED"] * 6 + ["FAILED"]
    assert bodies[-1]["error"]["code"] == "unsupported_content"
    assert requests.get(bodies[0]["download_url"], timeout=10).status_code == 200
    assert cluster.usage(key)["included_used"] == 6
    workers = {row["worker"] for row in _rows(cluster)}
    assert all(worker.startswith("job:") for worker in workers)  # converted by nodes, not the coordinator


def test_a_node_killed_mid_batch_loses_and_doubles_nothing(cluster, legacy, slow_xls):
    victim = cluster.start_node("victim")
    cluster.start_node("survivor")
    key = cluster.coordinator.register("killed-node")
    files = [(f"big-{n}.xls", slow_xls) for n in range(3)] + [(f"{n}-{p.name}", p) for n, p in
                                                               enumerate([legacy["doc"], legacy["ppt"]])]
    tasks = submit_batch(cluster, key, files)
    import redis
    running = redis.Redis.from_url(cluster.queue_url)
    deadline = time.monotonic() + 90
    while not any(_node_pid(node) == victim.pid for node in running.hvals("docshift:running")):
        assert time.monotonic() < deadline, "the victim never took a job"
        time.sleep(0.05)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    bodies = [cluster.coordinator.wait(key, task_id, timeout=240) for task_id in tasks]
    assert [b["status"] for b in bodies] == ["SUCCEEDED"] * len(files)
    assert cluster.usage(key)["included_used"] == len(files)
    assert max(row["attempts"] for row in _rows(cluster)) >= 2  # the victim's job ran again


def test_a_node_started_later_picks_up_work_at_once(cluster, legacy):
    key = cluster.coordinator.register("late-node")
    task_id = cluster.coordinator.submit(key, legacy["doc"]).json()["task_id"]
    time.sleep(3)
    assert cluster.coordinator.wait_status(key, task_id) == "QUEUED"  # the coordinator converts nothing
    cluster.start_node("late")
    assert cluster.coordinator.wait(key, task_id, timeout=120)["status"] == "SUCCEEDED"


def _node_pid(name):
    """The pid in a node's name (node:host:pid)."""
    return int(name.decode().rsplit(":", 1)[1])


def _rows(cluster):
    from docshift.storage import db
    conn = db.connect(cluster.coordinator.config()["DATABASE"])
    try:
        return list(conn.query("SELECT * FROM conversions"))
    finally:
        conn.conn.close()


def test_a_coordinator_with_workers_converts_as_its_own_node(s3, tmp_path, redis_url, legacy):
    """DOCSHIFT_WORKERS > 0 on Redis: the coordinator converts too, and /healthz reports its
    LibreOffice, not a node that is not there."""
    cluster = Cluster(tmp_path, s3["env"], redis_url)
    coordinator = cluster.coordinator
    try:
        coordinator.start_web()
        coordinator.start_worker(workers=1)
        coordinator.wait_healthy()
        key = coordinator.register("coordinator-node")
        task_id = coordinator.submit(key, legacy["xls"]).json()["task_id"]
        assert coordinator.wait(key, task_id, timeout=120)["status"] == "SUCCEEDED"
        assert _rows(cluster)[0]["worker"].startswith("job:")
        time.sleep(2 * float(FAST["SWEEP_SECONDS"]))  # a sweep reports the engine again
        health = requests.get(f"{coordinator.base_url}/healthz", timeout=10)
        assert health.status_code == 200 and health.json()["checks"]["engine"] == "ok", health.text
    finally:
        cluster.stop()
