"""The whole service as a client meets it: many accounts against one, a flood against plain warm LibreOffices.

Starts its own instance the way ``make run`` does (``traffic.Instance``: the Procfile's web, worker and object
store under ``docshift.allinone``, a fresh data dir, a free port, the default workers), registers every account
through the local marketplace before any clock starts, and drives it over HTTP only: POST /v1/conversions, poll
the task, download the result from its presigned link. On the same ``--files`` corpus files (expected ``ok``, under
300 KB unless ``--smallest``/``--largest`` say otherwise, the three types mixed, picked the same way every run), in
one run, it prints:

1. Accounts taking turns: the throughput of all files submitted at once by ``--threads`` client threads, then waited
   for (poll, download), from one account, and from 24 accounts where file i is account i % 24's (accounts never used
   before, so that each is met for the first time), and many / one (target >= 0.9). Twice: one, many, one, many.
2. Median overhead per file, one file at a time: submit -> SUCCEEDED polled every 5 ms, less one plain warm
   LibreOffice's time for the file (``plain_warm.py``: load and store and nothing else); median and p90
   (target median <= 30 ms). Then where it went, from each task's own timestamps (read from the service's
   database): the submission until its row, the queue, the run less the plain time, and the poll that saw it.
   These plain times also order the flood, longest first.
3. A flood of two accounts (file i is account i % 2's), longest first, against two plain warm LibreOffices taking
   the same files from one queue, longest first; twice, alternating who goes first; service / plain
   (target >= 0.9).
4. CPU seconds each part of the service spent on each flood, against the plain LibreOffices' (each process's own
   and its reaped children's, from /proc, at the flood's start and end): LibreOffice (the engine's parent and its
   children, in their sandbox), the worker, the web, the store; and per file. On 2 cores this says where the flood's
   time goes. Then the kernel's share of LibreOffice's: a fork per file, its page faults and its exit are there.
5. Memory during each flood, from /proc every ~50 ms: the whole service's peak (the sum over its process tree: web,
   worker, object store, LibreOffice), as RSS and, every 10th sample, as PSS (forked children share pages); the
   largest single LibreOffice process's peak RSS; and, if the engine's parent (a process running ``forkit.py``)
   exists, the parent's peak RSS and its children's. The plain LibreOffices' figures are printed beside them.

    .venv/bin/python bench/service.py [--files 48] [--corpus ../shared/corpus] [--threads 8]
    .venv/bin/python bench/service.py --files 36 --smallest 300000 --largest 4194304   # the corpus's larger files

Exit status 0 whatever the numbers: it is a benchmark, not a test. Fidelity is bench/warm.py's.
"""

import argparse
import csv
import itertools
import os
import queue
import random
import signal
import sqlite3
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import requests
from harness import Plain, quantile
from traffic import Instance, descendants

from docshift.formats import FORMATS

HERE = Path(__file__).resolve().parent
ACCOUNTS = 24
FINAL = {"SUCCEEDED", "FAILED", "EXPIRED"}
MIB = 1024 * 1024


def pick(corpus, count, largest=300_000, smallest=0):
    """``count`` files that convert (expected ``ok``) of ``smallest`` bytes up to under ``largest``, doc, xls and ppt
    in turn, in a seeded order."""
    with open(corpus / "expected.csv") as f:
        ok = [corpus / row["file"] for row in csv.DictReader(f) if row["expected"] == "ok"]
    kinds = []
    for kind in FORMATS:
        chosen = sorted(p for p in ok if p.suffix.lower() == f".{kind}" and smallest <= p.stat().st_size < largest)
        random.Random(kind).shuffle(chosen)
        kinds.append(chosen)
    return [p for group in itertools.zip_longest(*kinds) for p in group if p][:count]


class Client:
    """The API as a client calls it, one kept connection per thread; the files are read once, beforehand."""

    def __init__(self, url, files):
        self.url, self.blobs, self.mine = url, {p: p.read_bytes() for p in files}, threading.local()

    def session(self):
        if not hasattr(self.mine, "session"):
            self.mine.session = requests.Session()
        return self.mine.session

    def submit(self, key, path):
        answer = self.session().post(f"{self.url}/v1/conversions", headers={"Authorization": f"Bearer {key}"},
                                     files={"file": (path.name, self.blobs[path])}, timeout=60)
        if answer.status_code != 202:
            raise SystemExit(f"{path.name} refused: HTTP {answer.status_code} {answer.text[:200]}")
        return answer.json()["status_url"]

    def wait(self, key, status_url, interval):
        while True:
            body = self.session().get(status_url, headers={"Authorization": f"Bearer {key}"}, timeout=30).json()
            if body["status"] in FINAL:
                return body
            time.sleep(interval)

    def fetch(self, body):
        """Whether the task SUCCEEDED and its result downloaded from its presigned link."""
        if body["status"] != "SUCCEEDED":
            return False
        answer = self.session().get(body["download_url"], timeout=60)
        return answer.status_code == 200 and len(answer.content) == body["result_size"]

    def batch(self, jobs, threads):
        """(seconds, results downloaded) for ``jobs`` [(key, path)]: all submitted by ``threads`` threads, then
        polled in order by one thread every 50 ms (a poller per task would be requests on the service's own
        cores), each result downloaded by the threads as soon as its task is final."""
        started = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            urls = list(pool.map(lambda job: self.submit(*job), jobs))
            fetched = [pool.submit(self.fetch, self.wait(key, url, 0.05)) for (key, _), url in zip(jobs, urls)]
            done = sum(f.result() for f in fetched)
        return time.perf_counter() - started, done

    def latency(self, key, path, seen=None):
        """Seconds from the submission until a poll every 5 ms sees SUCCEEDED (None if it did not); ``seen`` (a
        dict) gets {task id: (submitted, seen)} on the wall clock, which the task's own timestamps are on."""
        started, wall = time.perf_counter(), time.time()
        body = self.wait(key, self.submit(key, path), 0.005)
        took = time.perf_counter() - started
        if seen is not None:
            seen[body["task_id"]] = (wall, wall + took)
        return took if body["status"] == "SUCCEEDED" else None


def plain_flood(plains, files):
    """Seconds for the plain LibreOffices to convert ``files``, each taking the next from one queue."""
    todo = queue.Queue()
    for path in files:
        todo.put(path)

    def run(plain):
        while True:
            try:
                plain.convert(todo.get_nowait())
            except queue.Empty:
                return

    threads = [threading.Thread(target=run, args=(plain,)) for plain in plains]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def read(pid, name):
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return b""


class Memory(threading.Thread):
    """Samples a process tree every ~50 ms until stopped: the tree's peak RSS sum, each LibreOffice process's peak
    RSS (VmHWM: its peak between samples too), and the engine's parent (``forkit.py``) apart from the children it
    forks (which carry its command line). PSS (smaps_rollup walks each process's page tables: 4-7 ms for a
    LibreOffice, on the cores the flood needs) only every ``PSS_EVERY`` th sample."""

    PSS_EVERY = 10

    def __init__(self, roots):
        super().__init__(daemon=True)
        self.roots, self.stop = roots, threading.Event()
        self.pss = self.rss = 0
        self.unreadable = set()  # processes whose PSS could not be read: their RSS stands in
        self.office, self.parents, self.children = {}, {}, {}  # pid -> peak RSS
        self.samples, self.cpu = 0, 0.0

    def run(self):
        began = time.thread_time()
        while not self.stop.wait(0.05):
            self.sample(self.samples % self.PSS_EVERY == 0)
        self.cpu = time.thread_time() - began

    def sample(self, with_pss):
        tree, pss, rss = descendants(self.roots), 0, 0
        commands = {pid: read(pid, "cmdline") for pid in tree}
        # the engine's processes: the parent and its children run forkit.py (its sandbox, bwrap, names it too)
        engine = {pid for pid in tree if b"forkit.py" in commands[pid] and read(pid, "comm").strip() != b"bwrap"}
        for pid in tree:
            status = dict(line.split(":", 1) for line in read(pid, "status").decode().splitlines() if ":" in line)
            if "VmRSS" not in status:
                continue  # gone, or a zombie
            resident, peak = int(status["VmRSS"].split()[0]) * 1024, int(status["VmHWM"].split()[0]) * 1024
            rss += resident
            if with_pss:
                rollup = read(pid, "smaps_rollup")
                shared = next((int(line.split()[1]) * 1024 for line in rollup.splitlines()
                               if line.startswith(b"Pss:")), None)
                if shared is None:
                    self.unreadable.add(pid)
                pss += resident if shared is None else shared
            command = commands[pid]
            ppid = stat(pid)[0] if pid in engine else 0
            if ppid:  # (0: gone since its status was read, a child or the parent)
                parent = self.children if ppid in engine else self.parents
                parent[pid] = max(parent.get(pid, 0), peak)
            if b"soffice" in command or pid in engine or status.get("Name", "").strip() == "soffice.bin":
                self.office[pid] = max(self.office.get(pid, 0), peak)
        self.pss, self.rss, self.samples = max(self.pss, pss), max(self.rss, rss), self.samples + 1

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.join()

    def report(self, who):
        lines = [f"{who}: whole peak RSS sum {mib(self.rss)} MiB, PSS sum {mib(self.pss)} MiB (every "
                 f"{self.PSS_EVERY}th sample"
                 + (f"; RSS for {len(self.unreadable)} processes whose PSS was unreadable" if self.unreadable else "")
                 + f"); {self.samples} samples, {self.cpu:.2f} s of the bench's CPU"]
        if self.parents:
            lines.append(f"  engine parent (forkit.py) peak RSS {mib(max(self.parents.values()))} MiB "
                         f"({len(self.parents)} seen); its children's peak RSS "
                         f"{mib(max(self.children.values(), default=0))} MiB ({len(self.children)} seen)")
        if self.office:
            peaks = sorted(self.office.values(), reverse=True)
            lines.append(f"  largest LibreOffice process peak RSS {mib(peaks[0])} MiB; {len(peaks)} processes seen, "
                         f"peaks (MiB): {' '.join(mib(n) for n in peaks[:12])}{' ...' if len(peaks) > 12 else ''}")
        return "\n".join(lines)


PARTS = ((b"forkit", "LibreOffice"), (b"soffice", "LibreOffice"), (b"bwrap", "LibreOffice"),
         (b"worker.py", "worker"), (b"gunicorn", "web"), (b"weed", "store"), (b"seaweed", "store"))
TICK = os.sysconf("SC_CLK_TCK")
PART_ORDER = ("LibreOffice", "worker", "web", "store", "other")
SYSTEM = " (system)"  # cpu_by_part's key of a part's kernel time


def cpu_by_part(roots):
    """{part: CPU seconds} of the process trees below ``roots``: each process's own and that of its children it
    reaped (a child forked and ended during a flood counts in its parent's); and {part + SYSTEM: the kernel's share
    of them} (a fork, its page faults and its exit are the kernel's time)."""
    spent = {}
    for pid in descendants(roots):
        fields, command = read(pid, "stat").rsplit(b")", 1), read(pid, "cmdline")
        if len(fields) != 2:
            continue
        part = next((name for marker, name in PARTS if marker in command), "other")
        utime, stime, cutime, cstime = (int(x) / TICK for x in fields[1].split()[11:15])
        spent[part] = spent.get(part, 0.0) + utime + stime + cutime + cstime
        spent[part + SYSTEM] = spent.get(part + SYSTEM, 0.0) + stime + cstime
    return spent


def mib(n):
    return f"{n / MIB:.0f}"


def stat(pid):
    """(parent pid, start time) of a process, (0, None) once it is gone."""
    fields = read(pid, "stat").rsplit(b")", 1)
    return (int(fields[1].split()[1]), fields[1].split()[19]) if len(fields) == 2 else (0, None)


def register(instance, names):
    """API keys of fresh accounts (the marketplace's CLI and registration page: a few at a time, untimed)."""
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(instance.register, names))


def turns(client, files, one, many, args):
    """Section 1: one account, then 24 fresh accounts in turn, twice."""
    print(f"\n## 1. {ACCOUNTS} accounts taking turns against one account, {len(files)} files, "
          f"{args.threads} client threads")
    print("| round | one account files/s | 24 accounts files/s | many / one | results downloaded one / many |\n"
          "|---|---|---|---|---|")
    totals = {"one": 0.0, "many": 0.0}
    for round_, keys in enumerate(many, 1):
        time.sleep(args.settle)
        one_s, one_done = client.batch([(one, p) for p in files], args.threads)
        time.sleep(args.settle)
        many_s, many_done = client.batch([(keys[i % ACCOUNTS], p) for i, p in enumerate(files)], args.threads)
        totals["one"], totals["many"] = totals["one"] + one_s, totals["many"] + many_s
        print(f"| {round_} | {len(files) / one_s:.2f} | {len(files) / many_s:.2f} | {one_s / many_s:.2f}x "
              f"| {one_done}/{len(files)} / {many_done}/{len(files)} |", flush=True)
    return totals["one"] / totals["many"]


def overhead(client, key, plain, files, database):
    """Section 2: each file one at a time through the service and through a plain warm LibreOffice, taking turns
    going first; then where the time went, from the tasks' own timestamps in the service's ``database``. Returns
    {file: plain seconds} and [service - plain seconds]."""
    print("\n## 2. Overhead per file, one at a time: submit -> SUCCEEDED (polled every 5 ms) less one plain warm "
          "LibreOffice's time")
    plain_times, extra, seen, ran = {}, [], {}, {}
    for n, path in enumerate(files):
        before = set(seen)
        if n % 2:
            ours, plain_times[path] = client.latency(key, path, seen), plain.convert(path)
        else:
            plain_times[path], ours = plain.convert(path), client.latency(key, path, seen)
        if ours is not None and plain_times[path] is not None:
            extra.append(ours - plain_times[path])
            ran.update((task, plain_times[path]) for task in set(seen) - before)
    kept = [plain_times[p] for p in files if plain_times[p] is not None]
    print(f"- {len(extra)}/{len(files)} files converted by both; plain warm median {statistics.median(kept):.3f} s")
    print(f"- overhead median {statistics.median(extra) * 1000:.1f} ms, p90 {quantile(extra, 0.9) * 1000:.1f} ms")
    stages(database, seen, ran)
    return plain_times, extra


def stages(database, seen, ran):
    """Medians of where each file's time went, from its task's row: the submission until the row's creation
    (``created_at``, stamped before the upload is stored), the queue (until a run claims it: ``started_at``), the
    run (until SUCCEEDED is counted: ``finished_at``) less the plain LibreOffice's time for the file, and until a
    poll saw it."""
    def moment(text):
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()

    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as conn:
        rows = {task: conn.execute("SELECT created_at, started_at, finished_at FROM conversions WHERE id = ?",
                                   [task]).fetchone() for task in ran}
    parts = {"submitted -> row": [], "row -> claimed": [], "claimed -> counted, less plain": [],
             "counted -> seen": []}
    for task, (created, started, finished) in ((task, map(moment, row)) for task, row in rows.items() if row):
        submitted, saw = seen[task]
        for part, seconds in zip(parts, (created - submitted, started - created, finished - started - ran[task],
                                         saw - finished)):
            parts[part].append(seconds)
    print("- where it went, medians: " + ", ".join(f"{part} {statistics.median(values) * 1000:.1f} ms"
                                                   for part, values in parts.items() if values))


def floods(client, instance, keys, plains, files, args):
    """Section 3 and 4: two accounts' flood against as many plain warm LibreOffices, rounds alternating who goes
    first, memory sampled during each."""
    print(f"\n## 3. Two accounts' flood against {len(plains)} plain warm LibreOffices, {len(files)} files, "
          "longest first")
    jobs = [(keys[i % 2], p) for i, p in enumerate(files)]
    totals, memory, cpu = {"service": 0.0, "plain": 0.0}, {}, {}
    for round_ in range(args.rounds):
        took = {}
        for side in ("plain", "service") if round_ % 2 == 0 else ("service", "plain"):
            time.sleep(args.settle)
            roots = [instance.process.pid] if side == "service" else [p.process.pid for p in plains]
            before = cpu_by_part(roots)
            with Memory(roots) as memory[side, round_]:
                if side == "service":
                    took[side], done = client.batch(jobs, args.threads)
                else:
                    took[side] = plain_flood(plains, files)
            after = cpu_by_part(roots)
            cpu[side, round_] = {part: after[part] - before.get(part, 0.0) for part in after}
            totals[side] += took[side]
        print(f"- round {round_ + 1}: service {len(files) / took['service']:.2f} files/s ({done}/{len(files)} "
              f"downloaded), plain {len(files) / took['plain']:.2f} files/s: "
              f"{took['plain'] / took['service']:.2f}x", flush=True)
    print("\n## 4. CPU seconds of each part during the floods (ms per file)")
    print("| round | side | " + " | ".join(part for part in PART_ORDER) + " | all |\n|---|---|"
          + "---|" * (len(PART_ORDER) + 1))
    for (side, round_), spent in sorted(cpu.items(), key=lambda item: (item[0][1], item[0][0])):
        cells = [f"{spent.get(part, 0.0):.2f} ({spent.get(part, 0.0) / len(files) * 1000:.0f})" for part in PART_ORDER]
        whole = sum(seconds for part, seconds in spent.items() if not part.endswith(SYSTEM))
        print(f"| {round_ + 1} | {side} | " + " | ".join(cells) + f" | {whole:.2f} ({whole / len(files) * 1000:.0f}) |")
    print("\nOf LibreOffice's, the kernel's (system time: forks, page faults, exits), ms per file: " + ", ".join(
        f"round {round_ + 1} {side} {spent.get('LibreOffice' + SYSTEM, 0.0) / len(files) * 1000:.0f}"
        for (side, round_), spent in sorted(cpu.items(), key=lambda item: (item[0][1], item[0][0]))))
    print("\n## 5. Memory during the floods")
    for (side, round_), sampled in sorted(memory.items(), key=lambda item: (item[0][1], item[0][0])):
        print(sampled.report(f"- round {round_ + 1}, {'the service' if side == 'service' else 'plain LibreOffices'}"))
    return totals["plain"] / totals["service"], memory


def stop(instance):
    """The instance's process group stopped as ``make run``'s Ctrl-C does, then whatever of its tree outlived
    that (LibreOffice runs in sessions of its own) killed, each by its pid and start time."""
    if instance.process is None:
        return
    tree = [(pid, stat(pid)[1]) for pid in descendants([instance.process.pid])]
    try:
        instance.__exit__(None, None, None)
    finally:
        for pid, began in tree:
            if began is not None and stat(pid)[1] == began:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=HERE.parent.parent / "shared" / "corpus")
    parser.add_argument("--files", type=int, default=48)
    parser.add_argument("--threads", type=int, default=8, help="client threads submitting and downloading")
    parser.add_argument("--plain", type=int, default=2, help="plain warm LibreOffices (the service's default "
                                                             "workers on 2 cores)")
    parser.add_argument("--rounds", type=int, default=2, help="flood rounds, alternating who goes first")
    parser.add_argument("--settle", type=float, default=3, help="seconds of quiet before each timed run")
    parser.add_argument("--workers", type=int, help="the service's conversions at once (default: its own default)")
    parser.add_argument("--largest", type=int, default=300_000, help="files under this many bytes")
    parser.add_argument("--smallest", type=int, default=0, help="files of at least this many bytes (the "
                                                                "warm-up's first file of each type too)")
    parser.add_argument("--only", choices=("flood",), help="run only this section (the flood then goes largest "
                                                           "file first)")
    args = parser.parse_args()
    files = pick(args.corpus, args.files, args.largest, args.smallest)
    with tempfile.TemporaryDirectory(prefix="docshift-bench-service-") as tmp:
        workers = {} if args.workers is None else {"WORKERS": args.workers}
        instance = Instance(Path(tmp) / "data", MAX_PENDING_TASKS=100_000, **workers)
        plains = []
        try:
            instance.__enter__()
            mix = ", ".join(f"{sum(p.suffix == '.' + k for p in files)} .{k}" for k in FORMATS)
            print(f"# docshift through the whole service: {instance.url}, {os.cpu_count()} cores, {len(files)} files "
                  f"({mix}), {sum(p.stat().st_size for p in files) // 1024} KB in all", flush=True)
            one, *rest = register(instance, ["one", "flood-0", "flood-1"]
                                  + [f"turns-{r}-{n}" for r in range(2) for n in range(ACCOUNTS)])
            flood_keys, many = rest[:2], [rest[2:2 + ACCOUNTS], rest[2 + ACCOUNTS:]]
            client = Client(instance.url, files)
            # the service's first files of each type start what it starts once; not what is measured
            warm_up = [next(p for p in files if p.suffix == f".{k}") for k in FORMATS]
            client.batch([(one, p) for p in warm_up], 1)
            plains = [Plain(tmp) for _ in range(args.plain)]
            for plain in plains:
                for path in warm_up:
                    plain.convert(path)
            if args.only == "flood":
                largest_first = sorted(files, key=lambda p: p.stat().st_size, reverse=True)
                ratio, _ = floods(client, instance, flood_keys, plains, largest_first, args)
                print(f"\n| two accounts' flood / {args.plain} plain warm LibreOffices, all rounds | {ratio:.2f}x |")
                return
            ratio_turns = turns(client, files, one, many, args)
            plain_times, extra = overhead(client, one, plains[0], files, instance.database)
            longest_first = sorted(files, key=lambda p: plain_times[p] or 0, reverse=True)
            ratio_flood, memory = floods(client, instance, flood_keys, plains, longest_first, args)
            print("\n| figure | measured | target |\n|---|---|---|")
            print(f"| {ACCOUNTS} accounts in turn / one account, both rounds | {ratio_turns:.2f}x | >= 0.9x |")
            print(f"| two accounts' flood / {args.plain} plain warm LibreOffices, all rounds | {ratio_flood:.2f}x "
                  "| >= 0.9x |")
            print(f"| median overhead per file over one warm LibreOffice (p90) | "
                  f"{statistics.median(extra) * 1000:.1f} ms ({quantile(extra, 0.9) * 1000:.1f} ms) | <= 30 ms |")
            ours = [m for (side, _), m in memory.items() if side == "service"]
            print(f"| whole service's peak during the flood, RSS sum (PSS sum) | {max(m.rss for m in ours) / MIB:.0f} "
                  f"MiB ({max(m.pss for m in ours) / MIB:.0f} MiB) | |")
            if any(m.parents for m in ours):
                print(f"| engine parent's RSS; a child's peak RSS | "
                      f"{max(max(m.parents.values(), default=0) for m in ours) / MIB:.0f} MiB; "
                      f"{max(max(m.children.values(), default=0) for m in ours) / MIB:.0f} MiB | |")
            print(f"| largest LibreOffice process's peak RSS | "
                  f"{max(max(m.office.values(), default=0) for m in ours) / MIB:.0f} MiB | |")
        finally:
            for plain in plains:
                plain.close()
            stop(instance)


if __name__ == "__main__":
    main()
