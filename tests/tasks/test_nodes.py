"""Conversion nodes on a real redis-server: a coordinator that converts nothing itself, nodes in
separate processes with their own scratch dirs and no credential of the object store, a node killed
mid-batch, a node that comes late."""

import os
import signal
import subprocess
import time

import pytest
import requests
from conftest import (
    FAST_NODES,
    Cluster,
    a_first_burst_gives_a_slot_back,
    free_port_block,
    long_files_keep_a_slot_free,
    stop_process_group,
    wait_for,
)

from docshift.tasks.queue import Jobs
from docshift.tasks.registry import Registry


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
    workers = {row["worker"] for row in cluster.rows().values()}
    assert all(worker.startswith("job:") for worker in workers)  # converted by nodes, not the coordinator


def test_a_node_killed_mid_batch_loses_and_doubles_nothing(cluster, legacy, slow_xls):
    victim = cluster.start_node("victim")
    cluster.start_node("survivor")
    key = cluster.coordinator.register("killed-node")
    files = [(f"big-{n}.xls", slow_xls) for n in range(3)] + [(f"{n}-{p.name}", p) for n, p in
                                                               enumerate([legacy["doc"], legacy["ppt"]])]
    tasks = submit_batch(cluster, key, files)
    config = cluster.config()
    registry = Registry(config, Jobs(config))
    deadline = time.monotonic() + 90
    while not any(node and _node_pid(node) == victim.pid for node in _runners(cluster, registry)):
        assert time.monotonic() < deadline, "the victim never took a job"
        time.sleep(0.05)
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    bodies = [cluster.coordinator.wait(key, task_id, timeout=240) for task_id in tasks]
    assert [b["status"] for b in bodies] == ["SUCCEEDED"] * len(files)
    assert cluster.usage(key)["included_used"] == len(files)
    assert max(row["attempts"] for row in cluster.rows().values()) >= 2  # the victim's job ran again


def test_on_nodes_long_files_keep_one_slot_free_for_other_accounts(s3, tmp_path, redis_url, slow_xls, legacy):
    """The coordinator's dispatch keeps the nodes' last free slot as the one box keeps its last thread."""
    cluster = Cluster(tmp_path, s3["env"], redis_url, CONVERSION_TIMEOUT=9, SWEEP_SECONDS=3600).start()
    try:
        cluster.start_node("slot-a")  # one slot each
        cluster.start_node("slot-b")
        long_files_keep_a_slot_free(cluster.coordinator, slow_xls, legacy["doc"])
    finally:
        cluster.stop()


def test_on_nodes_a_first_burst_of_long_files_gives_a_slot_to_another_account_s_file(s3, tmp_path, redis_url,
                                                                                      charts_xls, legacy):
    """The coordinator asks a node to stop one of the first burst's runs as the one box stops its own: the node kills
    its LibreOffice and reports the run preempted, and the task goes back to the queue without using an attempt."""
    cluster = Cluster(tmp_path, s3["env"], redis_url, CONVERSION_TIMEOUT=24, SWEEP_SECONDS=3600).start()
    try:
        cluster.start_node("slot-a")  # one slot each
        cluster.start_node("slot-b")
        config = cluster.config()
        registry = Registry(config, Jobs(config))

        def on_nodes(backlog):  # a node has each job in hand, not only the coordinator's claim: the stop kills it
            rows = cluster.rows()
            return all(rows[t]["status"] == "PROCESSING" and registry.runner(rows[t]["worker"]) for t in backlog)

        a_first_burst_gives_a_slot_back(cluster.coordinator, charts_xls, legacy["doc"], running=on_nodes)
        assert "its node is asked to stop it" in cluster.log()
        assert "stopped as the coordinator asked" in cluster.log("slot-a") + cluster.log("slot-b")
    finally:
        cluster.stop()


def test_a_node_started_later_picks_up_work_at_once(cluster, legacy):
    """Until a node takes jobs, files wait and /healthz says why (it said "ok" with no node alive)."""
    key = cluster.coordinator.register("late-node")
    task_id = cluster.coordinator.submit(key, legacy["doc"]).json()["task_id"]
    time.sleep(3)
    assert cluster.coordinator.wait_status(key, task_id) == "QUEUED"  # the coordinator converts nothing
    health = requests.get(f"{cluster.coordinator.base_url}/healthz", timeout=5)
    assert health.status_code == 503
    assert health.json()["checks"]["engine"].startswith("failing: no conversion node takes jobs (0 alive")
    cluster.start_node("late")
    assert cluster.coordinator.wait(key, task_id, timeout=120)["status"] == "SUCCEEDED"
    wait_for(lambda: requests.get(f"{cluster.coordinator.base_url}/healthz", timeout=5).status_code == 200, 10,
             "/healthz ok within a beat of the node's")


def _runners(cluster, registry):
    """The nodes that say they run a dispatched job: the runner of each PROCESSING task's holder."""
    return [registry.runner(row["worker"]) for row in cluster.rows().values() if row["status"] == "PROCESSING"]


def _node_pid(name):
    """The pid in a node's name (node:host:pid:start)."""
    return int(name.split(":")[2])


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
        assert next(iter(cluster.rows().values()))["worker"].startswith("job:")
        time.sleep(2 * float(FAST_NODES["SWEEP_SECONDS"]))  # a sweep reports the engine again
        health = requests.get(f"{coordinator.base_url}/healthz", timeout=10)
        assert health.status_code == 200 and health.json()["checks"]["engine"] == "ok", health.text
    finally:
        cluster.stop()


def test_a_coordinator_started_while_redis_is_down_waits_for_it_and_then_converts(s3, tmp_path, legacy):
    """A failover, or Redis and the coordinator restarted together: the coordinator's worker waits for Redis, as a
    node does. It used to exit at its first question to Redis, and one box's launcher then stopped the web too."""
    import redis

    port = free_port_block()

    def redis_server():
        server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                   "--appendonly", "no", "--dir", str(tmp_path)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait_for(lambda: redis.Redis(port=port).ping(), 30, "redis-server")
        return server

    server = redis_server()
    cluster = Cluster(tmp_path, s3["env"], f"redis://127.0.0.1:{port}/0")
    stop_process_group(server)
    try:
        cluster.coordinator.start_web()
        cluster.coordinator.start_worker(workers=0)
        wait_for(lambda: "waits for Redis before it starts" in cluster.log(), 60, "the coordinator waiting")
        time.sleep(2)
        assert cluster.coordinator.processes["worker"].poll() is None, cluster.log()[-2000:]
        server = redis_server()
        cluster.start_node("after-the-outage")
        cluster.coordinator.wait_healthy()  # a node takes jobs
        key = cluster.coordinator.register("after-the-outage")
        task_id = cluster.coordinator.submit(key, legacy["doc"]).json()["task_id"]
        assert cluster.coordinator.wait(key, task_id, timeout=120)["status"] == "SUCCEEDED"
    finally:
        cluster.stop()
        stop_process_group(server)
