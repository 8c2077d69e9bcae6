"""Conversion nodes against one box: the same batch, side by side, in one run.

1. one box: web + worker (two worker threads, a LibreOffice child each file) + store, the SQLite queue;
2. a coordinator on Redis (``DOCSHIFT_WORKERS=0``: it converts nothing) with one node of one
   worker thread, then with a second such node;

and prints each round's throughput, and the coordinator's own CPU seconds per conversion
(its worker process: claims, dispatch, outcomes; and its web), so the reader can see how many
nodes one coordinator can feed. Starts its own redis-server on loopback.

    .venv/bin/python bench/nodes.py [--files 40]

Exit status 0 whatever the numbers: it is a benchmark, not a test.
"""

import argparse
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import harness
from traffic import BIN, ROOT, Instance, cpu_seconds, files_of, redis_server


def burst(instance, key, files):
    started = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        bodies = list(pool.map(lambda p: harness.convert_through_api(instance.url, key, p)[1], files))
    return time.perf_counter() - started, bodies


def start_node(instance, name, scratch):
    env = {k: v for k, v in instance.env.items() if not k.startswith("DOCSHIFT_")}
    # a node needs no credential of the store: each job brings its links
    env.update({"DOCSHIFT_QUEUE_URL": instance.env["DOCSHIFT_QUEUE_URL"], "DOCSHIFT_WORKERS": "1",
                "DOCSHIFT_QUEUE_KEY": instance.env["DOCSHIFT_QUEUE_KEY"], "DOCSHIFT_DATA_DIR": str(scratch)})
    log = open(scratch.parent / f"{name}.log", "wb")  # noqa: SIM115 - the node's, for as long as it runs
    return subprocess.Popen([BIN / "python", "worker.py", "node"], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def wait_for_nodes(instance, count):
    import redis
    conn = redis.Redis.from_url(instance.env["DOCSHIFT_QUEUE_URL"])
    deadline = time.monotonic() + 120
    while conn.hlen("docshift:nodes") < count:
        if time.monotonic() > deadline:
            sys.exit("the nodes did not register")
        time.sleep(0.2)
    time.sleep(5)  # their LibreOffice parent preinitialises before the first job


def coordinator_cpu(instance):
    """CPU seconds so far of the coordinator's worker process, and of its web (which also answers
    the benchmark's polls, every 50 ms per file)."""
    return (sum(cpu_seconds(pid) for pid in instance.pids("worker.py")),
            sum(cpu_seconds(pid) for pid in instance.pids("gunicorn")))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    parser.add_argument("--files", type=int, default=40)
    args = parser.parse_args()
    files = files_of(args.corpus, args.files)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="docshift-nodes-") as tmp:
        tmp = Path(tmp)
        with Instance(tmp / "box" / "data", WORKERS=2) as box:
            key = box.register("box")
            harness.convert_through_api(box.url, key, files[0])
            seconds, bodies = burst(box, key, files)
            rounds.append(("one box, 2 workers", seconds, bodies, None))

        nodes = []
        with redis_server(tmp) as queue_url:
            try:
                with Instance(tmp / "coordinator" / "data", WORKERS=0, QUEUE_URL=queue_url,
                              QUEUE_KEY=secrets.token_hex(32)) as coordinator:
                    key = coordinator.register("nodes")
                    for count in (1, 2):
                        scratch = tmp / f"node-{count}"
                        scratch.mkdir()
                        nodes.append(start_node(coordinator, f"node-{count}", scratch))
                        wait_for_nodes(coordinator, count)
                        harness.convert_through_api(coordinator.url, key, files[0])
                        before = coordinator_cpu(coordinator)
                        seconds, bodies = burst(coordinator, key, files)
                        after = coordinator_cpu(coordinator)
                        used = (after[0] - before[0], after[1] - before[1])
                        rounds.append((f"coordinator + {count} node(s), 1 worker thread each", seconds, bodies, used))
            finally:  # the nodes drain while Redis still answers
                for node in nodes:
                    os.killpg(node.pid, signal.SIGINT)
                    node.wait(60)

    print(f"# conversion nodes: the same {len(files)} corpus files per round, {os.cpu_count()} cores\n")
    print("| round | seconds | files/s | succeeded | coordinator CPU per conversion: worker, web |")
    print("|---|---|---|---|---|")
    for name, seconds, bodies, cpu in rounds:
        ok = sum(b["status"] == "SUCCEEDED" for b in bodies)
        per = f"{cpu[0] / len(files) * 1000:.1f} ms, {cpu[1] / len(files) * 1000:.1f} ms" if cpu else "-"
        print(f"| {name} | {seconds:.1f} | {len(files) / seconds:.2f} | {ok}/{len(files)} | {per} |")
    one, two = rounds[1][1], rounds[2][1]
    print(f"\ntwo nodes / one node: {one / two:.2f}x; two nodes / one box of two workers: "
          f"{rounds[0][1] / two:.2f}x")
    cpu = rounds[2][3][0] / len(files)
    print(f"the coordinator's worker uses {cpu * 1000:.1f} ms of CPU per conversion: one core of it feeds about "
          f"{1 / cpu:.0f} conversions/s (the web's share depends on how often clients poll)")


if __name__ == "__main__":
    main()
