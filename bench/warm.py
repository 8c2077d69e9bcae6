"""The engine against its limit: as many plain warm LibreOffices doing the same load and store.

On the same files, in one run:

1. One at a time: each file through one plain warm LibreOffice (``plain_warm.py``: default profile, no
   sandbox, load + store and nothing else) and through one docshift Office (``engine.convert``: the
   sandbox, the VBA check, the export with embedded objects, the output checks, stored values, the
   fidelity inventory), side by side: the two take turns on each file, ``--repeat`` times, and each
   keeps its fastest time. The per-file overhead is ours minus plain; its median is the figure. Our time
   runs until LibreOffice has closed the document too, as the plain side's does (docshift's bridge answers
   before it closes, so a task's result is there sooner than this says).
   The plain LibreOffice runs at the CPU priority docshift gives its own (nice 10, in an autogroup of
   that nice), so that the machine's other load weighs on both alike.
2. Throughput: ``--pool`` plain warm LibreOffices taking files from one queue, the longest first (by the
   plain times of 1), then ``--pool`` Offices doing the same, sharing one pool as a worker process's threads
   do. The ratio pool / plain is the figure (target >= 0.9): once with every file of one account, once with
   the files of ``--tenants`` accounts in turn (a docshift LibreOffice converts one account's files only: an
   account's first file takes over an Office's spare, and a new spare starts; its later files find that
   account's LibreOffice warm in the pool, on either Office), and once more with those accounts'
   LibreOffices already warm from a file each before the clock starts, as in a worker that served them a
   while before the flood.
3. What the results hold: the fidelity reports summed per part, and how many are complete.

    .venv/bin/python bench/warm.py [--corpus ../shared/corpus] [--pool 2] [--limit N]

Only files that both convert are counted in the timings; both passes see the same files in the same order.
"""

import argparse
import queue
import statistics
import subprocess
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

from docshift.engine import Engine, convert
from docshift.engine.office import UNO_PYTHON, Office
from docshift.errors import ConversionFailed
from docshift.formats import FORMATS
from docshift.settings import Settings

HERE = Path(__file__).resolve().parent

TIMEOUT = 60


class Plain:
    """One plain warm LibreOffice (``plain_warm.py``) in a process of its own."""

    def __init__(self, work):
        self.work = Path(tempfile.mkdtemp(dir=work))
        self.process = subprocess.Popen([UNO_PYTHON, str(HERE / "plain_warm.py"), str(self.work / "profile")],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        assert self.process.stdout.readline().strip() == "ready"

    def convert(self, path, n):
        kind = path.suffix.lower()[1:]
        target = self.work / f"{n}.{FORMATS[kind].target}"
        self.process.stdin.write(f"{path}\t{target}\t{FORMATS[kind].export_filter}\n")
        seconds = float(self.process.stdout.readline())
        target.unlink(missing_ok=True)
        return seconds if seconds >= 0 else None

    def close(self):
        self.process.stdin.close()
        self.process.wait(30)


class Ours:
    """One docshift Office, as a worker thread runs it: with its spare, each file for account ``n % tenants``
    (a LibreOffice converts one account's files only: another account's file goes to that account's idle one,
    or to a fresh one). The Offices of one flood share a pool, as a worker process's threads do: an account's
    idle LibreOffice serves its next file on either."""

    def __init__(self, work, name, tenants=1, warm_with=None, pool=None):
        if pool is None:
            pool = Engine.pool(Path(tempfile.mkdtemp(dir=work)), accounts=Settings().office_accounts)
        self.office = Office(pool.base_dir, name=name, spare=True, pool=pool)
        self.office.start()
        self.tenants = tenants
        self.switches = 0
        self._spare_up()
        # ``warm_with`` (a file): each account has had a file converted here before, as in a worker that served
        # these accounts a while ago; their LibreOffices wait warm, and the clock has not started yet
        for tenant in range(tenants if warm_with else 0):
            self.convert(warm_with, tenant)
            self._spare_up()
        self.switches = 0

    def _spare_up(self):
        """A worker starts its spare long before a flood: it is up before the clock starts."""
        deadline = time.monotonic() + 120
        while self.office._spare is None and time.monotonic() < deadline:
            time.sleep(0.1)

    def convert(self, path, n, closed=False):
        """Seconds until the result is checked (until LibreOffice has also closed the document if ``closed``:
        the plain side's time includes its close) and the fidelity report."""
        kind = path.suffix.lower()[1:]
        started = time.perf_counter()
        tenant = f"account-{n % self.tenants}"
        starts = self.office.starts
        self.office.take(tenant)
        self.switches += self.office.starts - starts
        out = self.office.tasks_dir / f"job-{n}"
        try:
            converted = convert.convert(self.office, path, kind, out, TIMEOUT)
        except ConversionFailed:
            return None, None
        if closed and self.office.current is not None:
            self.office.current.settle(TIMEOUT)
        seconds = time.perf_counter() - started
        return seconds, converted.fidelity

    def close(self):
        self.office.close()


def one_at_a_time(files, work, repeat):
    """Each file through the plain LibreOffice and through ours, side by side: the two take turns going first,
    ``repeat`` times, and each keeps its fastest time of the file (what the machine's other load adds is noise
    on both sides; the fastest is the work itself)."""
    plain, ours = Plain(work), Ours(work, "bench-one")
    plain_times, ours_times, fidelity = {}, {}, {}
    try:
        for n, path in enumerate(files):
            tried = {"plain": [], "ours": []}
            for turn in range(repeat):
                order = ["plain", "ours"] if (n + turn) % 2 == 0 else ["ours", "plain"]
                for side in order:
                    if side == "plain":
                        tried["plain"].append(plain.convert(path, n))
                    else:
                        seconds, fidelity[path] = ours.convert(path, n, closed=True)
                        tried["ours"].append(seconds)
            plain_times[path] = None if None in tried["plain"] else min(tried["plain"])
            ours_times[path] = None if None in tried["ours"] else min(tried["ours"])
    finally:
        plain.close()
        ours.close()
    return plain_times, ours_times, fidelity


def throughput(files, work, pool, make, took):
    """Seconds for ``pool`` runners made by ``make`` (inside their own thread) to convert every file; ``took``
    (a dict) gets each file's seconds."""
    todo = queue.Queue()
    for item in enumerate(files):
        todo.put(item)
    ready = threading.Barrier(pool + 1)
    done = []

    def run(index):
        try:
            runner = make(index)
        except BaseException:
            ready.abort()  # the others, and the clock, stop waiting for this runner: the run fails
            raise
        ready.wait()
        try:
            while True:
                try:
                    n, path = todo.get_nowait()
                except queue.Empty:
                    break
                started = time.perf_counter()
                runner.convert(path, n)
                took[path] = time.perf_counter() - started
        finally:
            done.append(time.perf_counter())
            runner.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(pool)]
    for thread in threads:
        thread.start()
    ready.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return max(done) - started


def flood(files, work, args, tenants, warm_with=None):
    """Pool / plain warm limit over ``files``, the files of ``tenants`` accounts in turn (a plain LibreOffice
    serves them all; ours replaces its LibreOffice for each new account). A few files take LibreOffice 12-20 s
    of CPU one time and 3-4 s less the next: rounds alternate who goes first, and each round names what the
    three longest took on each side."""
    warmth = ", each account's LibreOffices warm from an earlier file" if warm_with else ""
    print(f"\nthroughput over the same {len(files)} files, {args.pool} at a time, {tenants} account(s) in turn"
          f"{warmth}:")
    plain_seconds = ours_seconds = 0.0
    for round_ in range(args.rounds):
        made = []
        pool = Engine.pool(Path(tempfile.mkdtemp(dir=work)), accounts=Settings().office_accounts)

        def ours(i, made=made, pool=pool):
            made.append(Ours(work, f"bench-pool-{i}", tenants, warm_with, pool))
            return made[-1]

        runs = [("plain", lambda i: Plain(work)), ("ours", ours)]
        took = {"plain": {}, "ours": {}}
        seconds = {name: throughput(files, work, args.pool, make, took[name])
                   for name, make in runs[::1 - 2 * (round_ % 2)]}
        plain_seconds, ours_seconds = plain_seconds + seconds["plain"], ours_seconds + seconds["ours"]
        print(f"- round {round_ + 1}: {args.pool} plain warm LibreOffices {seconds['plain']:.1f} s "
              f"({len(files) / seconds['plain']:.2f} files/s), {args.pool} docshift Offices {seconds['ours']:.1f} s "
              f"({len(files) / seconds['ours']:.2f} files/s): {seconds['plain'] / seconds['ours']:.2f}x; "
              f"{sum(runner.switches for runner in made)} fresh LibreOffices taken over; the longest, plain / ours: "
              + ", ".join(f"{path.name} {took['plain'].get(path, 0):.1f} s / {took['ours'].get(path, 0):.1f} s"
                          for path in files[:3]))
    return plain_seconds / ours_seconds


def fidelity_summary(reports):
    parts, complete, lost = defaultdict(lambda: [0, 0]), 0, Counter()
    for report in reports:
        complete += report["complete"]
        for what, count in report["counts"].items():
            if count["source"] is not None and count["result"] is not None:
                parts[what][0] += count["source"]
                parts[what][1] += min(count["result"], count["source"])
        lost.update(loss["what"] for loss in report["lost"])
    print(f"\nfidelity: {complete} of {len(reports)} results complete")
    print("| part | in the sources | kept | results naming a loss |")
    print("|---|---|---|---|")
    for what, (source, result) in sorted(parts.items()):
        print(f"| {what} | {source} | {result} | {lost[what]} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=HERE.parent.parent / "shared" / "corpus")
    parser.add_argument("--pool", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="only the first N files of each type")
    parser.add_argument("--rounds", type=int, default=2, help="throughput rounds, alternating who goes first")
    parser.add_argument("--repeat", type=int, default=2, help="one at a time: tries of each file on each side")
    parser.add_argument("--tenants", type=int, default=4, help="accounts whose files come in turn, in the flood")
    args = parser.parse_args()
    files = []
    for kind in FORMATS:
        found = sorted(args.corpus.glob(f"{kind}/*.{kind}"))
        files += found[:args.limit] if args.limit else found
    work = Path(tempfile.mkdtemp(prefix="bench-warm-"))

    plain_times, ours_times, fidelity = one_at_a_time(files, work, args.repeat)
    both = [p for p in files if plain_times[p] is not None and ours_times[p] is not None]
    overhead = [ours_times[p] - plain_times[p] for p in both]
    print(f"# {len(both)} of {len(files)} files converted by both, {args.corpus}\n")
    print("one at a time, seconds per file:")
    print("| type | files | plain warm p50 | ours p50 | overhead p50 | overhead p90 |")
    print("|---|---|---|---|---|---|")
    for kind in [*FORMATS, "all"]:
        chosen = [p for p in both if kind == "all" or p.suffix.lower() == f".{kind}"]
        extra = sorted(ours_times[p] - plain_times[p] for p in chosen)
        print(f"| {kind} | {len(chosen)} | {statistics.median(plain_times[p] for p in chosen):.3f} | "
              f"{statistics.median(ours_times[p] for p in chosen):.3f} | {statistics.median(extra) * 1000:.1f} ms | "
              f"{extra[int(0.9 * (len(extra) - 1))] * 1000:.1f} ms |")
    slowest = sorted(both, key=lambda p: plain_times[p], reverse=True)[:3]
    print("slowest for plain warm: " + ", ".join(
        f"{p.name} {plain_times[p]:.2f} s (ours {ours_times[p]:.2f} s)" for p in slowest))

    plain_sum, ours_sum = sum(plain_times[p] for p in both), sum(ours_times[p] for p in both)
    print(f"one at a time, all files: plain warm {plain_sum:.1f} s, ours {ours_sum:.1f} s: {plain_sum / ours_sum:.2f}x")
    # The flood takes the longest files first, on both sides alike: a 20 s file started last would make the
    # run's length a matter of when it happened to start, not of how fast the files go through.
    longest_first = sorted(both, key=lambda p: plain_times[p], reverse=True)
    ratios = {tenants: flood(longest_first, work, args, tenants) for tenants in (1, args.tenants)}
    smallest = min((p for p in both if p.suffix.lower() == ".doc"), key=lambda p: p.stat().st_size)
    warm = flood(longest_first, work, args, args.tenants, warm_with=smallest)
    print("\n| figure | measured | target |")
    print("|---|---|---|")
    print(f"| pool / plain warm limit, one account, all rounds | {ratios[1]:.2f}x | >= 0.9x |")
    print(f"| pool / plain warm limit, {args.tenants} accounts in turn, all rounds | {ratios[args.tenants]:.2f}x | "
          ">= 0.9x |")
    print(f"| the same, each account's LibreOffices warm from an earlier file | {warm:.2f}x | >= 0.9x |")
    print(f"| median overhead per file over one warm LibreOffice | {statistics.median(overhead) * 1000:.1f} ms "
          "| <= 30 ms |")
    fidelity_summary([fidelity[p] for p in files if fidelity[p] is not None])


if __name__ == "__main__":
    main()
