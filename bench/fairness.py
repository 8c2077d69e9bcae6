"""Can one account's long files slow another account down? Through the whole service, as clients meet it.

Starts its own instance the way ``make run`` does (``traffic.Instance``, the default workers, a conversion timeout of
``--timeout`` seconds) and registers two accounts. A victim sends one small file (the corpus's smallest ``.doc``) every
``--every`` seconds and polls each until it is final, every 50 ms. First alone for ``--alone`` seconds; then for
``--attack`` seconds while the other account keeps ``--backlog`` long files waiting, sending another as each fails.

The long file is a workbook of 220 line charts over 2,000 rows, made here with openpyxl and a plain ``soffice``
(420 KB; a plain LibreOffice takes about a minute on it, so it runs until the timeout and fails, which costs its
sender nothing). Such files can hold every conversion slot; the fair claim keeps the last free one from an account
whose files run long while another account is about (``storage/tasks.py``).

That workbook peaks at 3.4 GB in a plain LibreOffice. With ``--memory-mb`` (as root), the whole service runs in a
memory cgroup of that size (a container's ``--memory``, a unit's ``MemoryMax``), where the engine's watch kills its
child near the limit (``docshift/engine/memory.py``; else the kernel would, after reclaiming what it can); the file is
tried again alone, and the victim's files that come meanwhile wait a long run's time (10 s of the default 120 s
timeout, a twelfth) at most, counted once, then convert beside it. The page cache the service's code runs from is
charged to the cgroup that first read it: ``--drop-caches`` empties the page cache first, so that it is the
service's own, as in a container, and the kernel's reclaim near the limit takes the code every conversion runs.

With ``--redis`` the queue is a redis-server on loopback: the worker is a coordinator that converts as a node of its
own (``DOCSHIFT_WORKERS`` > 0), so the claim, the reserve and the stopping of a first burst's run go the conversion
nodes' way (a job, a sealed request to stop it, the node's beat).

Prints the victim's latency, submit to SUCCEEDED: median, p90 and max, alone and under attack, and their ratio;
then what became of the long files. Exit status 0 whatever the numbers: it is a benchmark, not a test.

    .venv/bin/python bench/fairness.py [--alone 30] [--attack 240] [--timeout 40] [--backlog 10]
        [--memory-mb 2000 [--drop-caches]] [--redis]
"""

import argparse
import contextlib
import csv
import os
import secrets
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import requests
from harness import charts_workbook, quantile
from service import stop
from traffic import Instance, redis_server

HERE = Path(__file__).resolve().parent


def long_workbook(out):
    """The 220-chart workbook as an .xls, saved by a plain soffice."""
    charts_workbook(out, 220)
    subprocess.run(["soffice", f"-env:UserInstallation=file://{out}/profile", "--headless", "--convert-to",
                    "xls:MS Excel 97", "--outdir", str(out), str(out / "charts.xlsx")],
                   check=True, capture_output=True, timeout=300)
    return out / "charts.xls"


def memory_cgroup(megabytes):
    """A memory cgroup of that size (v2, or v1's memory hierarchy), this process in it: all it starts from now on
    follows. None without ``megabytes``."""
    if not megabytes:
        return None
    v2 = Path("/sys/fs/cgroup/cgroup.controllers").exists()
    root = Path("/sys/fs/cgroup") if v2 else Path("/sys/fs/cgroup/memory")
    group = root / f"docshift-bench-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    (group / ("memory.max" if v2 else "memory.limit_in_bytes")).write_text(str(megabytes << 20))
    (group / "cgroup.procs").write_text(str(os.getpid()))
    return group


def leave(group):
    """This process back in its hierarchy's root: the service stays in ``group``."""
    if group is not None:
        (group.parent / "cgroup.procs").write_text(str(os.getpid()))


def pressure(group):
    """What the kernel went through in ``group``: major faults (code read again from disk), and how often a charge
    met the limit."""
    stat = dict(line.split() for line in (group / "memory.stat").read_text().splitlines())
    if (group / "memory.events").exists():
        events = dict(line.split() for line in (group / "memory.events").read_text().splitlines())
        return f"{stat['pgmajfault']} major faults, the limit met {events['max']} times"
    return (f"{stat['total_pgmajfault']} major faults, the limit met {(group / 'memory.failcnt').read_text().strip()}"
            " times")


def remove(group):
    """``group`` gone, once the service's processes have left it."""
    for _ in range(100):
        with contextlib.suppress(OSError):
            group.rmdir()
            return
        time.sleep(0.1)


def smallest_doc(corpus):
    with open(corpus / "expected.csv") as f:
        docs = [corpus / row["file"] for row in csv.DictReader(f)
                if row["expected"] == "ok" and row["file"].lower().endswith(".doc")]
    return min(docs, key=lambda p: p.stat().st_size)


class Account:
    def __init__(self, url, key):
        self.url, self.key, self.session = url, key, requests.Session()
        self.session.headers["Authorization"] = f"Bearer {key}"

    def submit(self, path):
        with open(path, "rb") as f:
            response = self.session.post(f"{self.url}/v1/conversions", files={"file": (path.name, f)}, timeout=60)
        return response.json()["task_id"] if response.status_code == 202 else None

    def final(self, task_id, interval=0.05):
        while True:
            body = self.session.get(f"{self.url}/v1/conversions/{task_id}", timeout=30).json()
            if body["status"] not in ("QUEUED", "PROCESSING"):
                return body
            time.sleep(interval)


def victim(account, path, seconds, every):
    """Latencies of the files sent every ``every`` seconds for ``seconds``; for a file refused or failed, why."""
    latencies, threads = [], []

    def one():
        began, client = time.monotonic(), Account(account.url, account.key)  # a session of its own: one thread each
        task_id = client.submit(path)
        body = client.final(task_id) if task_id else None
        latencies.append(time.monotonic() - began if body and body["status"] == "SUCCEEDED"
                         else "refused" if body is None else body["error"]["code"])

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        thread = threading.Thread(target=one)
        thread.start()
        threads.append(thread)
        time.sleep(every)
    for thread in threads:
        thread.join()
    return latencies


def attacker(account, path, backlog, stop_at, outcomes):
    """Keeps ``backlog`` long files unfinished until ``stop_at``; counts what became of them."""
    pending = set()
    while time.monotonic() < stop_at:
        while len(pending) < backlog:
            task_id = account.submit(path)
            if task_id is None:
                outcomes["refused"] += 1
                break
            pending.add(task_id)
        for task_id in list(pending):
            body = account.session.get(f"{account.url}/v1/conversions/{task_id}", timeout=30).json()
            if body["status"] not in ("QUEUED", "PROCESSING"):
                pending.discard(task_id)
                outcomes[body["status"] + ("" if body["status"] == "SUCCEEDED" else f" {body['error']['code']}")] += 1
        time.sleep(0.5)


def describe(latencies):
    done = [x for x in latencies if isinstance(x, float)]
    failed = Counter(x for x in latencies if isinstance(x, str))
    if not done:
        return f"none converted: {dict(failed)}", None
    return (f"{len(done)}/{len(latencies)} converted; median {statistics.median(done):.2f} s, "
            f"p90 {quantile(done, 0.9):.2f} s, max {max(done):.2f} s" + (f"; not: {dict(failed)}" if failed else "")
            ), statistics.median(done)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=HERE.parent.parent / "shared" / "corpus")
    parser.add_argument("--alone", type=float, default=30)
    parser.add_argument("--attack", type=float, default=240)
    parser.add_argument("--every", type=float, default=0.5)
    parser.add_argument("--timeout", type=float, default=40)
    parser.add_argument("--backlog", type=int, default=10)
    parser.add_argument("--log", type=Path, help="keep the service's log there")
    parser.add_argument("--memory-mb", type=int, help="the service in a memory cgroup of this size (as root)")
    parser.add_argument("--drop-caches", action="store_true",
                        help="empty the page cache before the service starts: its files are charged to its cgroup")
    parser.add_argument("--redis", action="store_true", help="the queue on a redis-server: the conversion nodes' way")
    args = parser.parse_args()
    small = smallest_doc(args.corpus)
    with tempfile.TemporaryDirectory(prefix="docshift-bench-fairness-") as tmp, contextlib.ExitStack() as stack:
        heavy_file = long_workbook(Path(tmp))
        queue = {"QUEUE_URL": stack.enter_context(redis_server(Path(tmp))),
                 "QUEUE_KEY": secrets.token_hex(32)} if args.redis else {}
        instance, group = Instance(Path(tmp) / "data", CONVERSION_TIMEOUT=args.timeout, **queue), None
        try:
            if args.drop_caches:
                os.sync()
                Path("/proc/sys/vm/drop_caches").write_text("3")
            group = memory_cgroup(args.memory_mb)
            try:
                instance.__enter__()
            finally:
                leave(group)
            keys = [instance.register(name) for name in ("victim", "attacker")]
            good, bad = Account(instance.url, keys[0]), Account(instance.url, keys[1])
            good.final(good.submit(small))  # warm: the first file of its type
            print(f"# {instance.url}: the victim sends {small.name} ({small.stat().st_size // 1024} KB) every "
                  f"{args.every} s; the attacker keeps {args.backlog} of {heavy_file.stat().st_size // 1024} KB "
                  f"workbooks waiting, timeout {args.timeout:.0f} s"
                  + (f", the service in {args.memory_mb} MB" if args.memory_mb else "")
                  + (", the queue on Redis" if args.redis else ""), flush=True)
            alone, alone_median = describe(victim(good, small, args.alone, args.every))
            print(f"victim alone: {alone}", flush=True)
            outcomes = Counter()
            stop_at = time.monotonic() + args.attack
            flood = threading.Thread(target=attacker, args=(bad, heavy_file, args.backlog, stop_at, outcomes))
            flood.start()
            attacked, attacked_median = describe(victim(good, small, args.attack, args.every))
            flood.join()
            print(f"victim under attack: {attacked}")
            print(f"the attacker's files: {dict(outcomes)}")
            if group is not None:
                print(f"the service's cgroup: {pressure(group)}")
            if alone_median and attacked_median:
                print(f"\n| victim's median latency under attack / alone | {attacked_median / alone_median:.1f}x |")
        finally:
            stop(instance)
            if group is not None:
                remove(group)
            if args.log:
                shutil.copyfile(instance.log.name, args.log)


if __name__ == "__main__":
    main()
