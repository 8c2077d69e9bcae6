"""The engine against its limit: as many plain warm LibreOffices doing the same load and store.

On the same files, in one run:

1. One at a time: each file through one plain warm LibreOffice (``plain_warm.py``: default profile, no
   sandbox, load + store and nothing else) and through docshift's engine (``Engine.convert``: the pre-check,
   a fresh child of the preinitialised parent in its sandbox, the VBA check, the export with embedded objects,
   the output checks, stored values, the fidelity inventory), side by side: the two take turns on each file,
   ``--repeat`` times, and each keeps its fastest time. The per-file overhead is ours minus plain; its median is
   the figure. The plain side's time includes closing the document; ours ends when the result is checked, since
   a child exits right after its answer, with nothing to close (the next file waits until it is gone all the
   same, so that its exit is not counted against the next file of either side).
   The plain LibreOffice runs at the CPU priority docshift gives its own (nice 10, in an autogroup of
   that nice), so that the machine's other load weighs on both alike.
2. Throughput: ``--pool`` plain warm LibreOffices taking files from one queue, the longest first (by the
   plain times of 1), then ``--pool`` threads sharing one engine (one parent, a child per file), as a worker
   process's threads do. The ratio ours / plain is the figure (target >= 0.9). Whose files they are no longer
   matters to the engine: every file gets a child of its own, whichever account sent it, so the rounds of
   accounts in turn that this script ran for the per-account LibreOffices are gone.
3. What the results hold: the fidelity reports summed per part, and how many are complete.
4. Memory: the parent's RSS once it has started, and the peak RSS of its children, sampled from /proc every
   ``SAMPLE_SECONDS`` while they convert (a child's RSS counts the pages it still shares with the parent).

    .venv/bin/python bench/warm.py [--corpus ../shared/corpus] [--pool 2] [--limit N]

Only files that both convert are counted in the timings; both passes see the same files in the same order.
"""

import argparse
import os
import queue
import shutil
import statistics
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

from harness import Plain

from docshift.engine import Engine, Forkit
from docshift.engine.forkit import UNO_PYTHON
from docshift.errors import ConversionFailed
from docshift.formats import FORMATS

HERE = Path(__file__).resolve().parent

TIMEOUT = 60
SAMPLE_SECONDS = 0.02


def started_engine(work, name, memory):
    """An engine of its own under ``work``, started (launch and self-test) before any clock, its parent's RSS
    taken by ``memory``."""
    engine = Engine(Forkit(Path(tempfile.mkdtemp(dir=work)), name=name))
    engine.start()
    memory.watch(engine.office)
    return engine


class Ours:
    """A worker thread's use of the engine: each file in a fresh child of the engine's parent, which the threads
    of one process share. Closing it leaves the engine running: its owner closes that."""

    def __init__(self, engine):
        self.engine = engine

    def convert(self, path, n):
        """Seconds until the result is checked and its fidelity report made, and that report."""
        kind = path.suffix.lower()[1:]
        out = self.engine.office.tasks_dir / f"job-{n}"
        started = time.perf_counter()
        try:
            converted = self.engine.convert(path, kind, out, TIMEOUT)
        except ConversionFailed:
            return None, None
        seconds = time.perf_counter() - started
        shutil.rmtree(out, ignore_errors=True)
        return seconds, converted.fidelity

    def close(self):
        pass


def children(pid):
    """The pids of ``pid``'s children: the kernel lists them by the thread that forked them, and the engine's
    parent forks on LibreOffice's main loop, not on its first thread."""
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as listed:
                found += [int(child) for child in listed.read().split()]
    except OSError:
        pass
    return found


def status(pid, field):
    """A field of ``/proc/<pid>/status`` in bytes (VmRSS, VmHWM), or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as lines:
            return next(int(line.split()[1]) << 10 for line in lines if line.startswith(f"{field}:"))
    except (OSError, StopIteration, ValueError):
        return None


def ended(pid):
    """Whether process ``pid`` is done with a file: gone, a zombie waiting for its parent to reap it, or a child
    that waits for a file and has had none (``forkit-ready``)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                return True
        with open(f"/proc/{pid}/comm") as comm:
            return comm.read().strip() == "forkit-ready"
    except (OSError, IndexError):
        return True


class Memory(threading.Thread):
    """The engines' parents' RSS after their start, and the peak RSS (VmHWM) of every child they fork, sampled
    every ``SAMPLE_SECONDS``."""

    def __init__(self):
        super().__init__(daemon=True, name="memory")
        self.parents = {}  # the parent's pid: its RSS once started
        self.parent_of = {}  # a Forkit: its parent's pid
        self.peaks = {}  # (parent pid, child pid): the highest VmHWM seen
        self.stopped = threading.Event()

    def watch(self, forkit):
        """Find ``forkit``'s parent as ``tests/conftest.py``'s ``office_pids`` does (the ``forkit.py`` below the
        worker whose own parent is no forkit), here going down from the process the worker started, and take its
        RSS. Only LibreOffice's Python counts: bubblewrap's own command line names ``forkit.py`` too."""
        todo = [forkit.process.pid]
        while todo:
            pid = todo.pop()
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as command:
                    argv = command.read().split(b"\0")
                if argv[0] == UNO_PYTHON.encode() and argv[1].endswith(b"/forkit.py"):
                    self.parents[pid] = status(pid, "VmRSS")
                    self.parent_of[forkit] = pid
                    return
            except (OSError, IndexError):
                pass
            todo += children(pid)
        raise RuntimeError(f"no forkit parent below {forkit.process.pid}")

    def run(self):
        while not self.stopped.wait(SAMPLE_SECONDS):
            self.sample()

    def sample(self):
        for parent in list(self.parents):
            for pid in children(parent):
                peak = status(pid, "VmHWM")
                if peak is not None:
                    self.peaks[parent, pid] = max(peak, self.peaks.get((parent, pid), 0))

    def settle(self, engine, within=10):
        """Wait until ``engine``'s children at work have ended (a child exits after its answer; the parent reaps it
        at once), taking their peaks; those that wait for a file stay."""
        parent = self.parent_of[engine.office]
        deadline = time.monotonic() + within
        while any(not ended(pid) for pid in children(parent)) and time.monotonic() < deadline:
            self.sample()
            time.sleep(0.001)

    def report(self):
        mib = 1 << 20
        parents = [rss for rss in self.parents.values() if rss]
        peaks = sorted(self.peaks.values())
        print(f"\nmemory: the parent's RSS after its start {statistics.median(parents) / mib:.0f} MiB "
              f"(median of {len(parents)} starts, {min(parents) / mib:.0f}-{max(parents) / mib:.0f}); ", end="")
        if not peaks:
            print("no child seen")
            return
        print(f"a child's peak RSS over {len(peaks)} children seen (sampled every {SAMPLE_SECONDS * 1000:.0f} ms): "
              f"max {peaks[-1] / mib:.0f} MiB, p90 {peaks[int(0.9 * (len(peaks) - 1))] / mib:.0f} MiB, "
              f"median {statistics.median(peaks) / mib:.0f} MiB (with the pages it shares with the parent)")


def one_at_a_time(files, work, repeat, memory):
    """Each file through the plain LibreOffice and through ours, side by side: the two take turns going first,
    ``repeat`` times, and each keeps its fastest time of the file (what the machine's other load adds is noise
    on both sides; the fastest is the work itself)."""
    plain, engine = Plain(work), started_engine(work, "bench-one", memory)
    ours = Ours(engine)
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
                        seconds, fidelity[path] = ours.convert(path, n)
                        memory.settle(engine)
                        tried["ours"].append(seconds)
            plain_times[path] = None if None in tried["plain"] else min(tried["plain"])
            ours_times[path] = None if None in tried["ours"] else min(tried["ours"])
    finally:
        plain.close()
        engine.close()
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


def flood(files, work, args, memory):
    """Ours / plain warm limit over ``files``. A few files take LibreOffice 12-20 s of CPU one time and 3-4 s
    less the next: rounds alternate who goes first, and each round names what the three longest took on each
    side."""
    print(f"\nthroughput over the same {len(files)} files, {args.pool} at a time:")
    plain_seconds = ours_seconds = 0.0
    for round_ in range(args.rounds):
        engine = started_engine(work, f"bench-pool-{round_}", memory)  # started before the clock, as a worker's is
        forked = engine.office.children
        runs = [("plain", lambda i: Plain(work)), ("ours", lambda i, engine=engine: Ours(engine))]
        took = {"plain": {}, "ours": {}}
        try:
            seconds = {name: throughput(files, work, args.pool, make, took[name])
                       for name, make in runs[::1 - 2 * (round_ % 2)]}
        finally:
            forked, restarts = engine.office.children - forked, engine.restarts
            engine.close()
        plain_seconds, ours_seconds = plain_seconds + seconds["plain"], ours_seconds + seconds["ours"]
        print(f"- round {round_ + 1}: {args.pool} plain warm LibreOffices {seconds['plain']:.1f} s "
              f"({len(files) / seconds['plain']:.2f} files/s), one engine, {args.pool} threads "
              f"{seconds['ours']:.1f} s ({len(files) / seconds['ours']:.2f} files/s): "
              f"{seconds['plain'] / seconds['ours']:.2f}x; {forked} children forked, {restarts} parent restarts; "
              "the longest, plain / ours: "
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
    args = parser.parse_args()
    files = []
    for kind in FORMATS:
        found = sorted(args.corpus.glob(f"{kind}/*.{kind}"))
        files += found[:args.limit] if args.limit else found
    work = Path(tempfile.mkdtemp(prefix="bench-warm-"))
    memory = Memory()
    memory.start()
    try:
        plain_times, ours_times, fidelity = one_at_a_time(files, work, args.repeat, memory)
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
                  f"{statistics.median(ours_times[p] for p in chosen):.3f} | {statistics.median(extra) * 1000:.1f} ms "
                  f"| {extra[int(0.9 * (len(extra) - 1))] * 1000:.1f} ms |")
        slowest = sorted(both, key=lambda p: plain_times[p], reverse=True)[:3]
        print("slowest for plain warm: " + ", ".join(
            f"{p.name} {plain_times[p]:.2f} s (ours {ours_times[p]:.2f} s)" for p in slowest))

        plain_sum, ours_sum = sum(plain_times[p] for p in both), sum(ours_times[p] for p in both)
        print(f"one at a time, all files: plain warm {plain_sum:.1f} s, ours {ours_sum:.1f} s: "
              f"{plain_sum / ours_sum:.2f}x")
        # The flood takes the longest files first, on both sides alike: a 20 s file started last would make the
        # run's length a matter of when it happened to start, not of how fast the files go through.
        longest_first = sorted(both, key=lambda p: plain_times[p], reverse=True)
        ratio = flood(longest_first, work, args, memory)
    finally:
        memory.stopped.set()
        shutil.rmtree(work, ignore_errors=True)
    print("\n| figure | measured | target |")
    print("|---|---|---|")
    print(f"| engine / plain warm limit, {args.pool} at a time, all rounds | {ratio:.2f}x | >= 0.9x |")
    print(f"| median overhead per file over one warm LibreOffice | {statistics.median(overhead) * 1000:.1f} ms "
          "| <= 30 ms |")
    print("accounts in turn: no engine figure any more (every file gets a fresh child, whoever's it is); "
          "the service's own bench measures them through HTTP")
    memory.report()
    fidelity_summary([fidelity[p] for p in files if fidelity[p] is not None])


if __name__ == "__main__":
    main()
