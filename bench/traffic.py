"""Real traffic against a live docshift: idle, a flood, polls, expiry, and the pool's speed.

Starts its own instance the way ``make run`` does (the Procfile's web, worker and embedded
object store under ``docshift.allinone``) in a fresh data dir on a free port, with a short result retention,
registers tenants through the local marketplace, and prints, in one run:

1. latency (submit -> SUCCEEDED) of one small file after 0, 30 and 75 s of idle;
2. while three tenants flood 100 tasks each: a fourth tenant's latency, one file at a time;
   /healthz every second; open-loop polls at 100 requests/s from a client process of their own
   (p50/p99 while the tenants upload and while the pool drains the backlog, errors); and a result
   that must turn EXPIRED (and its object be deleted) on time; and the CPU each part of the box
   used, and waited for, while the tenants uploaded;
3. the pool: median latency one file at a time and the throughput of a batch (all submitted at
   once, then waited for), against a cold ``soffice --convert-to`` of the same files, side by side;
4. the peak RSS of each engine parent (its children, one per file, have ended by then).

    .venv/bin/python bench/traffic.py [--files 60] [--idle 0,30,75]

Exit status 0 whatever the numbers: it is a benchmark, not a test.
"""

import argparse
import contextlib
import http.client
import json
import multiprocessing
import os
import queue
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import harness
import requests
from harness import quantile

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
RETENTION = 20
SWEEP = 5


class Instance:
    """web + worker + object store from the Procfile, as ``make run`` starts them."""

    def __init__(self, data_dir, **settings):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # the --bind keeps the API where make run has it, whatever PORT this shell has
        self.env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "DOCSHIFT_PORT": str(self.port),
                    "GUNICORN_CMD_ARGS": f"--bind 127.0.0.1:{self.port}",
                    "DOCSHIFT_DATA_DIR": str(data_dir), "DOCSHIFT_S3_PORT": str(free_port(10004)),
                    **{f"DOCSHIFT_{k}": str(v) for k, v in settings.items()}}
        for name in ("DOCSHIFT_S3_ENDPOINT", "DOCSHIFT_S3_ACCESS_KEY", "DOCSHIFT_S3_SECRET_KEY",
                     "PROMETHEUS_MULTIPROC_DIR"):
            self.env.pop(name, None)
        self.database = self.env.get("DOCSHIFT_DATABASE") or str(Path(data_dir) / "docshift.db")  # the tasks' rows
        Path(data_dir).parent.mkdir(parents=True, exist_ok=True)
        self.log = open(Path(data_dir).parent / "instance.log", "wb")  # noqa: SIM115 - closed by __exit__
        self.process = None
        self.on_nodes = str(settings.get("WORKERS")) == "0"

    def __enter__(self):
        subprocess.run([BIN / "flask", "--app", "app", "init-db"], cwd=ROOT, env=self.env, check=True,
                       capture_output=True)
        self.process = subprocess.Popen([BIN / "python", "-m", "docshift.allinone", "web", "worker", "objects"],
                                        cwd=ROOT, env=self.env, stdout=self.log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                answer = requests.get(f"{self.url}/healthz", timeout=2)
                # a coordinator that converts nothing itself is "failing" until a node takes jobs
                if answer.status_code == 200 or (self.on_nodes and answer.json()["checks"]["worker"] == "ok"):
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise SystemExit(f"the instance did not become healthy; see {self.log.name}")

    def __exit__(self, *exc):
        # allinone drains its processes (each in a process group of its own) in order; whatever is left
        # after a minute is killed, process by process
        left = descendants([self.process.pid])
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            for pid in [self.process.pid, *left]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.log.close()

    def store_env(self):
        """The embedded store's endpoint and credentials, as a conversion node is given them."""
        from docshift import settings

        config = settings.load({"DATA_DIR": self.env["DOCSHIFT_DATA_DIR"], "S3_PORT": int(self.env["DOCSHIFT_S3_PORT"]),
                                "S3_ENDPOINT": None, "S3_ACCESS_KEY": None, "S3_SECRET_KEY": None})
        return {"DOCSHIFT_S3_ENDPOINT": config.s3_endpoint, "DOCSHIFT_S3_ACCESS_KEY": config.s3_access_key,
                "DOCSHIFT_S3_SECRET_KEY": config.s3_secret_key}

    def register(self, customer):
        issued = subprocess.run([BIN / "flask", "--app", "app", "marketplace", "issue-token", "--customer", customer,
                                 "--plan", "business"], cwd=ROOT, env=self.env, check=True, capture_output=True,
                                text=True).stdout.strip().splitlines()[-1]
        token = issued.split("token=", 1)[1]
        answer = requests.post(f"{self.url}/marketplace/register", data={"x-amzn-marketplace-token": token},
                               headers={"Accept": "application/json"}, timeout=30)
        answer.raise_for_status()
        return answer.json()["api_key"]

    def pids(self, command):
        """Processes of this instance (by its data dir in their environment) whose command line has ``command``."""
        mine = f"DOCSHIFT_DATA_DIR={self.env['DOCSHIFT_DATA_DIR']}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if (entry.name.isdigit() and command.encode() in (entry / "cmdline").read_bytes()
                        and mine in (entry / "environ").read_bytes().split(b"\0")):
                    found.append(int(entry.name))
            except OSError:
                continue
        return found


def descendants(roots):
    """Every process below ``roots`` (LibreOffice runs a few levels down, in its sandbox)."""
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return sorted(found)


ROLES = (("forkit.py", "LibreOffice"), ("gunicorn", "web"), ("worker.py", "worker"), ("weed", "object store"),
         ("storage.seaweed", "object store"), ("docshift.allinone", "launcher"))


def scheduling(instance, clients):
    """{role: [seconds on a CPU, seconds runnable but waiting for one]} summed over the threads of
    the instance's processes, and of ``clients`` (this bench's own processes), from schedstat."""
    totals = {}
    for pid in descendants([instance.process.pid]) + [instance.process.pid] + clients:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            role = "clients (this bench)" if pid in clients else next(
                (name for marker, name in ROLES if marker in command), "other")
            for task in Path(f"/proc/{pid}/task").iterdir():
                ran, waited = (int(n) / 1e9 for n in (task / "schedstat").read_text().split()[:2])
                total = totals.setdefault(role, [0.0, 0.0])
                total[0] += ran
                total[1] += waited
        except (OSError, ValueError):
            continue
    return totals


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port(span=0):
    for _ in range(200):
        port = random.randrange(20000, 40000)
        try:
            for offset in {0, 1, 2, 3, 4, span}:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port + offset))
            return port
        except OSError:
            continue
    raise SystemExit("no free port")


@contextlib.contextmanager
def redis_server(directory):
    """A redis-server on a free loopback port, keeping nothing on disk, for conversion nodes' queue: yields the
    ``DOCSHIFT_QUEUE_URL`` that reaches it; stopped afterwards."""
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", str(directory)], stdout=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait()


def files_of(corpus, count):
    """``count`` corpus files that a cold soffice converts (expected ``ok``), all three types."""
    import csv
    with open(corpus / "expected.csv") as f:
        ok = [corpus / row["file"] for row in csv.DictReader(f) if row["expected"] == "ok"]
    random.Random(7).shuffle(ok)
    return ok[:count]


def small_file(corpus):
    """The smallest ok .doc: the probe for idle latency."""
    return min((p for p in files_of(corpus, 10_000) if p.suffix == ".doc"), key=lambda p: p.stat().st_size)


def latency(url, key, path):
    """(seconds a client polling every 50 ms waited, seconds until the task turned SUCCEEDED, status).

    The second is the service's own: from just before the upload to the moment the worker
    committed SUCCEEDED, which is ``result_expires_at`` less the retention this bench sets (the
    service's clock is this machine's). The first adds up to one poll interval on top."""
    began = time.time()
    seconds, body = harness.convert_through_api(url, key, path)
    own = None
    if body["status"] == "SUCCEEDED":
        expires = datetime.strptime(body["result_expires_at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        own = expires.timestamp() - RETENTION - began
    return seconds, own, body["status"]


def idle_latencies(instance, key, probe, idles):
    print("\n## Latency after idle (one small .doc, submit -> SUCCEEDED)")
    print("| idle s | until SUCCEEDED s | seen by the client s | status | worker CPU while idle |\n"
          "|---|---|---|---|---|")
    workers = instance.pids("worker.py")
    for idle in idles:
        before = sum(cpu_seconds(pid) for pid in workers)
        time.sleep(idle)
        used = sum(cpu_seconds(pid) for pid in workers) - before
        seconds, own, status = latency(instance.url, key, probe)
        share = f"{100 * used / idle:.1f}% of a core" if idle else "-"
        print(f"| {idle} | {own or float('nan'):.3f} | {seconds:.3f} | {status} | {share} |", flush=True)


def flood(instance, tenants, probe_key, probe, files):
    """Three tenants submit 100 tasks each at once; meanwhile the measurements of section 2."""
    print("\n## Flood: three tenants submit 100 tasks each")
    stop = threading.Event()
    results = {"second": [], "health": [], "polls": [], "poll_errors": 0, "refused": 0, "accepted": []}
    lock = threading.Lock()

    expiring = requests.post(f"{instance.url}/v1/conversions", headers={"Authorization": f"Bearer {probe_key}"},
                             files={"file": (probe.name, probe.read_bytes())}, timeout=30).json()
    expiring_body = harness.poll(expiring["status_url"], probe_key)

    def submit_all(key):
        # plain http.client and a body built beforehand, as the poller does: a client's own CPU is
        # not on the service's cores, except in this bench
        uploads = [multipart_body(f"{n}-{files[n % len(files)].name}", files[n % len(files)].read_bytes())
                   for n in range(100)]
        target = urlsplit(instance.url)
        connection = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        for body, content_type in uploads:
            connection.request("POST", "/v1/conversions", body=body,
                               headers={"Authorization": f"Bearer {key}", "Content-Type": content_type})
            answer = connection.getresponse()
            reply = json.loads(answer.read())
            with lock:
                if answer.status == 202:
                    results["accepted"].append((key, reply["status_url"]))
                    results["targets"].put(results["accepted"][-1])
                else:
                    results["refused"] += 1
        connection.close()

    def second_tenant():
        while not stop.is_set():
            results["second"].append(latency(instance.url, probe_key, probe)[0])
            stop.wait(1)

    def health():
        while not stop.is_set():
            started = time.perf_counter()
            try:
                code = requests.get(f"{instance.url}/healthz", timeout=5).status_code
            except requests.RequestException:
                code = "error"
            results["health"].append((code, time.perf_counter() - started))
            stop.wait(1)

    started = time.perf_counter()
    # the polling client is a process of its own, as a real one is: it shares no interpreter lock
    # with the three tenants' uploads, and its numbers are the service's, not this script's
    context = multiprocessing.get_context("spawn")
    targets, polled, stop_polls = context.Queue(), context.Queue(), context.Event()
    poller = context.Process(target=open_loop_polls, args=(targets, polled, stop_polls), daemon=True)
    poller.start()
    results["targets"] = targets
    watchers = [threading.Thread(target=t) for t in (second_tenant, health)]
    for w in watchers:
        w.start()
    submitters = [threading.Thread(target=submit_all, args=(key,)) for key in tenants]
    clients = [os.getpid(), poller.pid]
    before, upload_started = scheduling(instance, clients), time.perf_counter()
    for s in submitters:
        s.start()
    for s in submitters:
        s.join()
    uploaded = time.time()
    after, upload_seconds = scheduling(instance, clients), time.perf_counter() - upload_started
    expiry = expiry_check(instance, probe_key, expiring, expiring_body)
    for key, url in list(results["accepted"]):
        harness.poll(url, key, interval=0.5)
    drained = time.perf_counter() - started
    stop.set()
    stop_polls.set()
    try:
        results["polls"], results["poll_errors"] = polled.get(timeout=120)
    except queue.Empty:
        raise SystemExit(f"the polling process answered nothing (exit code {poller.exitcode})") from None
    poller.join()
    for w in watchers:
        w.join()

    second = results["second"]
    print(f"- flood: {len(results['accepted'])} accepted, {results['refused']} refused, drained in {drained:.1f} s")
    print(f"- fourth tenant, one file at a time during the flood: {len(second)} files, "
          f"p50 {statistics.median(second):.3f} s, max {max(second):.3f} s")
    codes = [code for code, _ in results["health"]]
    print(f"- /healthz every second: {codes.count(200)}/{len(codes)} answered 200, "
          f"slowest {max(s for _, s in results['health']) * 1000:.1f} ms")
    for phase, polls in (("over the whole flood", [s for _, s in results["polls"]]),
                         ("while the three tenants upload", [s for t, s in results["polls"] if t < uploaded]),
                         ("while the pool drains the backlog", [s for t, s in results["polls"] if t >= uploaded])):
        print(f"- open-loop polls at 100/s {phase}: {len(polls)} polls, p50 {quantile(polls, 0.5) * 1000:.1f} ms, "
              f"p99 {quantile(polls, 0.99) * 1000:.1f} ms")
    print(f"- poll errors: {results['poll_errors']} (timeout 5 s)")
    # the upload phase's polls wait for a CPU as much as for the web: every role's share of it
    print(f"- while the tenants upload ({upload_seconds:.1f} s), cores used / cores waited for "
          f"(runnable, no CPU free), per role: " + ", ".join(
              f"{role} {(after[role][0] - before[role][0]) / upload_seconds:.2f} / "
              f"{(after[role][1] - before[role][1]) / upload_seconds:.2f}"
              for role in sorted(before.keys() & after.keys(), key=lambda r: before[r][0] - after[r][0])))
    print(f"- expiry during the flood: {expiry}")


def multipart_body(filename, data):
    """(body, Content-Type) of a multipart/form-data upload of ``data`` as the part ``file``."""
    boundary = os.urandom(16).hex()
    head = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n")
    return head.encode() + data + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def open_loop_polls(targets, polled, stop):
    """GET a random accepted task 100 times a second, whatever the answers take (open loop), until
    ``stop``; puts ([(wall-clock start, seconds)], errors) on ``polled``. Runs in a process of its own.

    Each thread keeps one plain ``http.client`` connection: requests' own work (about 1 ms of CPU a
    call, under this process's interpreter lock) would be measured as the service's, on the same
    cores the service needs."""
    latencies, errors, known, lock = [], [0], [], threading.Lock()
    mine = threading.local()

    def one_poll(key, url):
        wall, began = time.time(), time.perf_counter()
        target = urlsplit(url)
        ok = False
        for _ in range(2):
            reused = getattr(mine, "connection", None) is not None
            try:
                if not reused:
                    mine.connection = http.client.HTTPConnection(target.hostname, target.port, timeout=5)
                mine.connection.request("GET", target.path, headers={"Authorization": f"Bearer {key}"})
                answer = mine.connection.getresponse()
                answer.read()
                ok = answer.status == 200
                break
            except (OSError, http.client.HTTPException) as error:
                mine.connection.close()
                mine.connection = None
                # a kept connection the server closed after its keep-alive is retried once, as requests
                # does; a timeout or any other failure is an error
                if not (reused and isinstance(error, ConnectionError)):
                    break
        with lock:
            latencies.append((wall, time.perf_counter() - began))
            errors[0] += not ok

    with ThreadPoolExecutor(32) as pool:
        tick, n = time.perf_counter(), 0
        while not stop.is_set():
            while not targets.empty():
                known.append(targets.get())
            if known:
                pool.submit(one_poll, *random.choice(known))
                n += 1
            tick += 0.01
            time.sleep(max(0.0, tick - time.perf_counter()))
    polled.put((latencies, errors[0]))


def expiry_check(instance, key, submitted, body):
    """The view says EXPIRED as soon as ``result_expires_at`` passes; the link dies after a sweep."""
    link = body["download_url"]
    expires = datetime.strptime(body["result_expires_at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    time.sleep(max(0.0, (expires - datetime.now(UTC)).total_seconds()) + 0.2)
    view = requests.get(submitted["status_url"], headers={"Authorization": f"Bearer {key}"}, timeout=10).json()
    deadline = time.monotonic() + SWEEP * 3 + 30
    while requests.get(link, timeout=10).status_code == 200 and time.monotonic() < deadline:
        time.sleep(0.5)
    late = (datetime.now(UTC) - expires).total_seconds()
    gone = requests.get(link, timeout=10).status_code != 200
    return (f"view {view['status']} 0.2 s after result_expires_at; object "
            f"{'deleted' if gone else 'STILL THERE'} {late:.1f} s after it")


def pool_against_cold(instance, key, files):
    """Median latency one file at a time, and the throughput of a batch: all files submitted at once,
    then waited for in order by one poller (16 clients polling every 50 ms would be 320 requests/s of
    their own, on the cores the pool needs; the API asks for a poll every 2 s)."""
    print(f"\n## The pool against a cold soffice, on the same {len(files)} files")
    one = [latency(instance.url, key, path) for path in files]
    own, seen = [o for _, o, _ in one if o is not None], [s for s, _, _ in one]
    started = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        submitted = list(pool.map(lambda p: harness.submit(instance.url, key, p)[0], files))
    bodies = [harness.poll(url, key) for url in submitted]
    burst = time.perf_counter() - started
    done = sum(body["status"] == "SUCCEEDED" for body in bodies)
    cold = [harness.convert_cold(path)[0] for path in files]
    print("| measure | docshift | cold soffice | ratio |\n|---|---|---|---|")
    for what, values in (("submit -> SUCCEEDED", own), ("the same, seen by a client polling every 50 ms", seen)):
        print(f"| median latency one at a time, {what} (s, {len(values)} files) | {statistics.median(values):.3f} "
              f"| {statistics.median(cold):.3f} | {statistics.median(values) / statistics.median(cold):.2f} |")
    print(f"| throughput of the batch (files/s, {done}/{len(files)} SUCCEEDED) | {len(files) / burst:.2f} "
          f"| {len(files) / sum(cold):.2f} | {(len(files) / burst) / (len(files) / sum(cold)):.1f}x |")


def rss(instance):
    peaks = []
    for pid in descendants(instance.pids("worker.py")):
        try:
            if not Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1].endswith(b"/forkit.py"):
                continue
            status = Path(f"/proc/{pid}/status").read_text()
        except (OSError, IndexError):  # gone, or a zombie: no command line
            continue
        peaks.append(int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM"))) // 1024)
    print(f"\n## LibreOffice parents' peak RSS (MiB): {sorted(peaks)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    parser.add_argument("--files", type=int, default=60, help="corpus files for the pool section")
    parser.add_argument("--idle", default="0,30,75", help="idle seconds before each latency probe")
    args = parser.parse_args()
    files = files_of(args.corpus, args.files)
    probe = small_file(args.corpus)
    with tempfile.TemporaryDirectory(prefix="docshift-bench-") as tmp, \
            Instance(Path(tmp) / "data", RESULT_RETENTION_SECONDS=RETENTION, SWEEP_SECONDS=SWEEP) as instance:
            print(f"# docshift traffic bench: {instance.url}, {os.cpu_count()} cores")
            probe_key = instance.register("probe")
            harness.convert_through_api(instance.url, probe_key, probe)  # warm-up
            idle_latencies(instance, probe_key, probe, [int(s) for s in args.idle.split(",")])
            tenants = [instance.register(f"flood-{n}") for n in range(3)]
            flood(instance, tenants, probe_key, probe, files)
            pool_against_cold(instance, instance.register("pool"), files)
            rss(instance)


if __name__ == "__main__":
    main()
