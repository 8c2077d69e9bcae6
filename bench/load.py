"""Load on the HTTP API while conversions run, against a running docshift.

For ``--seconds`` (default 30), ``--submitters`` threads (default 2, the default
worker pool on 2 cores) each keep one slow conversion in flight: submit one of
the slowest ``ok`` files of the corpus (by ``cold_soffice_s`` in
``expected.csv``), wait for it to end, submit again. Meanwhile ``--pollers``
threads (default 8) hammer ``GET /v1/conversions/{task_id}`` on existing tasks
(the in-flight ones and finished ones, so both the plain and the presigning
path are exercised) and, every ``--usage-every`` request, ``GET
/v1/account/usage``, in a closed loop, each with its own ``requests.Session``.

Every request's latency and every error (non-2xx or exception) is recorded.
The report gives, per kind of request, count, requests/s, p50/p90/p99/max in
ms and errors; the conversions completed in the window; and whether the target
holds: poll p99 < 20 ms and zero errors, while two conversions run.

    DOCSHIFT_URL=http://127.0.0.1:8000 DOCSHIFT_API_KEY=dsk_... python bench/load.py [--seconds 30]

The exit status is 0 whatever the numbers (it is a benchmark, not a test).
"""

import csv
import os
import resource
import sys
import threading
import time
from collections import Counter, defaultdict

import harness
import requests
from harness import quantile

POLL_TARGET_MS = 20.0
FINAL = ("SUCCEEDED", "FAILED", "EXPIRED")


class Recorder:
    """Latencies and errors per kind of request, shared by all threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.latency = defaultdict(list)   # kind -> [seconds]
        self.errors = defaultdict(Counter)  # kind -> Counter(description)

    def record(self, kind, seconds, error=None):
        with self.lock:
            self.latency[kind].append(seconds)
            if error:
                self.errors[kind][error] += 1


class Shared:
    """Task ids the pollers pick from, and what the submitters achieved."""

    def __init__(self):
        self.lock = threading.Lock()
        self.tasks = []            # task ids known to exist (finished or in flight)
        self.completed = Counter()  # final status -> conversions ended inside the window
        self.in_flight_seconds = 0.0
        self.left_running = 0       # conversions still under way when the window ended

    def add_task(self, task_id):
        with self.lock:
            if task_id not in self.tasks:
                self.tasks.append(task_id)

    def pick(self, i):
        with self.lock:
            return self.tasks[i % len(self.tasks)] if self.tasks else None


def timed(session, recorder, kind, method, url, expect, **kwargs):
    """One request; records its latency under ``kind``; returns (the response if as expected, seconds)."""
    started = time.perf_counter()
    try:
        response = session.request(method, url, **kwargs)
        _ = response.content  # the whole body is part of the latency
    except requests.RequestException as error:
        seconds = time.perf_counter() - started
        recorder.record(kind, seconds, f"{type(error).__name__}")
        return None, seconds
    seconds = time.perf_counter() - started
    error = None if response.status_code == expect else f"HTTP {response.status_code}"
    if error:
        try:
            error += f" {response.json().get('code', '')}".rstrip()
        except ValueError:
            pass
    recorder.record(kind, seconds, error)
    return (response if error is None else None), seconds


def slow_files(args, count):
    """The ``count`` ``ok`` files with the largest cold_soffice_s (read in place, never copied)."""
    with open(args.corpus / "expected.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["expected"] == "ok" and r.get("cold_soffice_s")]
    rows.sort(key=lambda r: -float(r["cold_soffice_s"]))
    return [(args.corpus / r["file"], float(r["cold_soffice_s"])) for r in rows[:count]]


def quick_file(args):
    """The ``ok`` file converted fastest warm, for the SUCCEEDED task the pollers read from the start."""
    with open(args.corpus / "expected.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["expected"] == "ok" and r.get("warm_unoserver_s")]
    return args.corpus / min(rows, key=lambda r: float(r["warm_unoserver_s"]))["file"]


def post(session, args, recorder, path, kind="submit"):
    with open(path, "rb") as f:
        response, _ = timed(session, recorder, kind, "POST", f"{args.url}/v1/conversions", 202,
                            headers={"Authorization": f"Bearer {args.key}"},
                            files={"file": (path.name, f)}, timeout=60)
    return response.json()["task_id"] if response is not None else None


def status_of(session, args, recorder, task_id, kind="poll"):
    response, seconds = timed(session, recorder, kind, "GET", f"{args.url}/v1/conversions/{task_id}", 200,
                              headers={"Authorization": f"Bearer {args.key}"}, timeout=10)
    if response is None:
        return None
    status = response.json()["status"]
    # the same latency again, split by what the task was (SUCCEEDED presigns a download_url)
    recorder.record(f"{kind} ({'in flight' if status not in FINAL else status})", seconds)
    return status


def submitter(number, args, files, recorder, shared, window):
    """Keep one conversion in flight until the window ends: submit, wait for it to end, submit again."""
    session = requests.Session()
    i = number
    while time.monotonic() < window["end"]:
        path, _ = files[i % len(files)]
        i += 1
        submitted = time.monotonic()
        task_id = post(session, args, recorder, path)
        if task_id is None:
            time.sleep(0.5)
            continue
        shared.add_task(task_id)
        status = None
        while time.monotonic() < window["end"]:
            status = status_of(session, args, recorder, task_id, kind="wait")
            if status in FINAL:
                break
            time.sleep(args.wait_interval)
        ended = min(time.monotonic(), window["end"])
        with shared.lock:
            # time with this submitter's conversion in flight, counted inside the measured window
            shared.in_flight_seconds += max(0.0, ended - max(submitted, window["start"] or ended))
            if status in FINAL and window["start"] and ended >= window["start"]:
                shared.completed[status] += 1
            elif status not in FINAL:
                shared.left_running += 1


def poller(number, args, recorder, shared, deadline):
    """Closed loop: poll existing tasks, and the usage every ``--usage-every`` requests."""
    session = requests.Session()
    headers = {"Authorization": f"Bearer {args.key}"}
    i = number
    while time.monotonic() < deadline:
        i += 1
        if args.usage_every and i % args.usage_every == 0:
            ok = timed(session, recorder, "usage", "GET", f"{args.url}/v1/account/usage", 200,
                       headers=headers, timeout=10)[0] is not None
        else:
            task_id = shared.pick(i)
            ok = task_id is not None and status_of(session, args, recorder, task_id) is not None
        if not ok:
            time.sleep(0.05)  # no tight loop on a refused connection
        elif args.think:
            time.sleep(args.think)


def cpu_times():
    """(busy, total) jiffies of the whole machine, from /proc/stat (None elsewhere)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def wait_until(check, timeout, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)
    return False


def print_report(args, recorder, shared, elapsed, cpu, machine, files, notes):
    print(f"# docshift load: {args.pollers} pollers + {args.submitters} submitters, "
          f"{elapsed:.1f} s against {args.url}\n")
    print("| request | count | req/s | p50 ms | p90 ms | p99 ms | max ms | errors |")
    print("|---|---|---|---|---|---|---|---|")
    order = ["poll", "poll (in flight)", "poll (SUCCEEDED)", "poll (FAILED)", "poll (EXPIRED)",
             "usage", "submit", "wait"]  # the submitters' waits are not split by state
    kinds = [k for k in order if k in recorder.latency]
    for kind in kinds:
        values = [v * 1000 for v in recorder.latency[kind]]
        errors = sum(recorder.errors[kind].values())
        print(f"| {kind} | {len(values)} | {len(values) / elapsed:.1f} | {quantile(values, .5):.1f} "
              f"| {quantile(values, .9):.1f} | {quantile(values, .99):.1f} | {max(values, default=0):.1f} "
              f"| {errors} |")
    print("\n(`poll` is the pollers' GET /v1/conversions/{id}, split below it by the task's state; "
          "`wait` is the submitters' own polling of their task, every "
          f"{args.wait_interval:g} s, not part of the target.)")
    looped = len(recorder.latency.get("poll", [])) + len(recorder.latency.get("usage", []))
    if looped and elapsed:
        rate = looped / elapsed
        mean = max(0.0, args.pollers / rate - args.think) * 1000
        print(f"\nclosed loop (Little's law): {args.pollers} pollers / {rate:.0f} req/s "
              f"- {args.think:g} s think = {mean:.1f} ms mean latency; with no think time a "
              f"{POLL_TARGET_MS:g} ms p99 needs well over {args.pollers / POLL_TARGET_MS * 1000:.0f} req/s.")
    every_error = Counter()
    for kind, counter in recorder.errors.items():
        for what, n in counter.items():
            every_error[f"{kind}: {what}"] += n
    if every_error:
        print("\nerrors:")
        for what, n in every_error.most_common():
            print(f"  {n} x {what}")
    done = sum(shared.completed.values())
    share = shared.in_flight_seconds / (elapsed * args.submitters) if elapsed and args.submitters else 0
    print(f"\nconversions ended in the window: {done} "
          f"({', '.join(f'{n} {s}' for s, n in sorted(shared.completed.items())) or 'none'}); "
          f"a conversion was in flight {share:.0%} of the window per submitter; files: "
          + ", ".join(f"{p.name} ({s:.1f} s cold)" for p, s in files))
    busy = "" if machine is None else f"machine CPU busy {machine:.0%} of {os.cpu_count()} cores; "
    print(f"load generator CPU: {cpu:.1f} s over {elapsed:.1f} s ({cpu / elapsed:.0%} of one core, "
          f"on the same machine); {busy}load average {os.getloadavg()[0]:.2f}")
    for note in notes:
        print(f"note: {note}")
    polls = [v * 1000 for v in recorder.latency["poll"]]
    p99 = quantile(polls, .99)
    errors = sum(sum(c.values()) for c in recorder.errors.values())
    met = bool(polls) and p99 < POLL_TARGET_MS and errors == 0
    print(f"\n**target (poll p99 < {POLL_TARGET_MS:g} ms, zero errors): "
          f"{'MET' if met else 'NOT MET'}** (poll p99 {p99:.1f} ms, {errors} errors)")


def main():
    parser = harness.arguments(__doc__)
    parser.add_argument("--seconds", type=float, default=30, help="length of the measured window")
    parser.add_argument("--pollers", type=int, default=8)
    parser.add_argument("--submitters", type=int, default=2, help="conversions kept in flight")
    parser.add_argument("--usage-every", type=int, default=10,
                        help="each poller's every Nth request is GET /v1/account/usage (0: never)")
    parser.add_argument("--think", type=float, default=0, help="pause of a poller between requests, s")
    parser.add_argument("--wait-interval", type=float, default=0.2,
                        help="how often a submitter polls its own task, s")
    parser.add_argument("--slow-files", type=int, default=4,
                        help="submit the N ok files with the largest cold_soffice_s, in turn")
    args = parser.parse_args()
    if not args.key:
        sys.exit("set DOCSHIFT_API_KEY (or --key)")
    args.url = args.url.rstrip("/")
    args.seconds = min(max(args.seconds, 1), 3600)
    files = slow_files(args, args.slow_files)
    recorder, shared, notes = Recorder(), Shared(), []
    setup = Recorder()  # requests before the window are not reported
    session = requests.Session()

    # a SUCCEEDED task from the start, so polls exercise the presigned download_url as well
    quick = post(session, args, setup, quick_file(args))
    if quick is None:
        sys.exit(f"the setup submission was refused: {dict(setup.errors)}")
    shared.add_task(quick)
    if not wait_until(lambda: status_of(session, args, setup, quick) in FINAL, 60):
        notes.append("the setup task did not finish in 60 s")

    # the submitters stop at the window's end; before the window is set, 30 s + the window at most
    window = {"start": None, "end": time.monotonic() + 30 + args.seconds}
    threads = [threading.Thread(target=submitter, args=(n, args, files, recorder, shared, window),
                                daemon=True) for n in range(args.submitters)]
    for thread in threads:
        thread.start()

    def processing():
        with shared.lock:
            tasks = [t for t in shared.tasks if t != quick]
        states = [status_of(session, args, setup, t) for t in tasks]
        return states.count("PROCESSING") >= args.submitters

    if not wait_until(processing, 30):
        notes.append(f"{args.submitters} conversions were not PROCESSING within 30 s; measuring anyway")

    # the measured window: pollers plus the submitters already under way
    with recorder.lock:
        recorder.latency.clear()
        recorder.errors.clear()
    cpu_before, machine_before = resource.getrusage(resource.RUSAGE_SELF), cpu_times()
    started = time.monotonic()
    window["start"] = started
    deadline = started + args.seconds
    window["end"] = deadline
    pollers = [threading.Thread(target=poller, args=(n, args, recorder, shared, deadline), daemon=True)
               for n in range(args.pollers)]
    for thread in pollers:
        thread.start()
    for thread in pollers:
        thread.join(max(0, deadline + 15 - time.monotonic()))
    elapsed = time.monotonic() - started
    cpu_after, machine_after = resource.getrusage(resource.RUSAGE_SELF), cpu_times()
    machine = None
    if machine_before and machine_after and machine_after[1] > machine_before[1]:
        machine = (machine_after[0] - machine_before[0]) / (machine_after[1] - machine_before[1])
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    # the submitters stop at the deadline too (within one request); they account their time as they leave
    for thread in threads:
        thread.join(max(0, deadline + 75 - time.monotonic()))
    if any(thread.is_alive() for thread in threads + pollers):
        notes.append("a thread was still blocked in a request when the report was made")
    if shared.left_running:
        notes.append(f"{shared.left_running} conversion(s) still running at the end are left to the worker")
    with recorder.lock:
        print_report(args, recorder, shared, elapsed, cpu, machine, files, notes)


if __name__ == "__main__":
    main()
