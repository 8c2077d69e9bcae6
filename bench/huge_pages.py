"""What large pages save the engine's parent and its children, file by file: two engines side by side, one denied
every huge page and large folio by the kernel.

Before its first fork the engine's parent puts its heaps in 2 MB pages (``MADV_COLLAPSE``), which a fork copies
and a child's exit frees as one entry each, and marks them ``MADV_HUGEPAGE``, so that a child's new heap may come
in the large folios the machine serves to mappings that ask (``hugepages-64kB`` at ``madvise``, which ``make run``
sets). This bench starts two engines: one as the service runs it, and one started under ``PR_SET_THP_DISABLE``,
which the kernel keeps for every process below it (its sandbox, its parent, each child) and which refuses them
both. Each of ``--files`` small corpus files (``service.py``'s pick) goes to each engine in turn, the order
alternating, ``--passes`` times. A file's CPU is its parent's own (the fork of the child that takes the next file
included) and its child's, read from the parent's counts once the child is reaped; faults are the child's minor
faults. Each file's fidelity report from the two engines is compared: large pages must not change what a result
holds. ``--folios never|madvise`` sets ``hugepages-64kB`` for the run (and puts it back); by default it is left as
the machine has it.

    .venv/bin/python bench/huge_pages.py [--files 48] [--passes 3] [--folios madvise] [--corpus ../shared/corpus]
"""

import argparse
import ctypes
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from service import pick
from warm import Memory, children

from docshift.engine import Engine, Forkit

HERE = Path(__file__).resolve().parent
FOLIOS = Path("/sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled")
PR_SET_THP_DISABLE = 41
TICK = os.sysconf("SC_CLK_TCK")
SIDES = ("without", "with")


def chosen(setting):
    """The chosen value of a sysfs setting, shown as ``always inherit [madvise] never``; None if it is missing."""
    try:
        return next(word.strip("[]") for word in setting.read_text().split() if word.startswith("["))
    except OSError:
        return None


def started(work, side):
    """An engine, started (its parent's self-test passed, a child waiting); ``without``: under PR_SET_THP_DISABLE,
    which this process holds only while the engine starts (its processes keep it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    engine = Engine(Forkit(Path(tempfile.mkdtemp(dir=work)), name=f"pages-{side}"))
    if side == "without" and libc.prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0:
        raise SystemExit(f"PR_SET_THP_DISABLE: {os.strerror(ctypes.get_errno())}")
    try:
        engine.start()
    finally:
        libc.prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0)
    return engine


def counts(parent):
    """(the parent's own CPU seconds, its reaped children's CPU seconds, their minor faults)."""
    with open(f"/proc/{parent}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK, (int(fields[13]) + int(fields[14])) / TICK, int(fields[8])


def settle(parent, within=5.0):
    """Wait until no child of the parent is at work on a file, reaped: unlike ``warm.ended``, a zombie still
    counts, since its CPU reaches the parent's counts only once it is reaped."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        names = []
        for pid in children(parent):
            try:
                with open(f"/proc/{pid}/comm") as comm:
                    names.append(comm.read().strip())
            except OSError:
                continue
        if not any(name.startswith("forkit-file") for name in names):  # a child at work, named with its job's tag
            return
        time.sleep(0.005)


def huge(parent):
    """The parent's memory in 2 MB pages, and its RSS, in MiB."""
    with open(f"/proc/{parent}/smaps_rollup") as rollup:
        found = {line.split(":")[0]: int(line.split()[1]) for line in rollup if line.split(":")[0] in
                 ("Rss", "AnonHugePages")}
    return found["AnonHugePages"] >> 10, found["Rss"] >> 10


def paired(engines, files, passes):
    """Each of ``files`` converted by each of ``engines`` ({side: Engine}) in turn, the order alternating, ``passes``
    times: ({side: the parent's memory in 2 MB pages and its RSS}, {side: [[parent CPU, children's CPU, children's
    minor faults, seconds] of each file]}, {side: [each file's fidelity report]})."""
    watcher = Memory()
    for engine in engines.values():
        watcher.watch(engine.office)
    parents = {side: watcher.parent_of[engine.office] for side, engine in engines.items()}
    memory = {side: huge(parent) for side, parent in parents.items()}
    sides = list(engines)
    spent, reports = {side: [] for side in sides}, {side: [] for side in sides}
    for round_ in range(passes):
        for n, path in enumerate(files):
            for side in sides if (n + round_) % 2 == 0 else sides[::-1]:
                parent = parents[side]
                settle(parent)
                before = counts(parent)
                out = engines[side].office.tasks_dir / f"job-{round_}-{n}"
                began = time.perf_counter()
                reports[side].append(engines[side].convert(path, path.suffix[1:].lower(), out, 120).fidelity)
                took = time.perf_counter() - began
                shutil.rmtree(out, ignore_errors=True)
                settle(parent)
                after = counts(parent)
                spent[side].append([a - b for a, b in zip(after, before, strict=True)] + [took])
    return memory, spent, reports


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=48)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--folios", choices=("never", "madvise"), help="set hugepages-64kB for the run (root)")
    parser.add_argument("--corpus", type=Path, default=HERE.parent.parent / "shared" / "corpus")
    args = parser.parse_args()
    files, was = pick(args.corpus, args.files), chosen(FOLIOS)
    if args.folios:
        FOLIOS.write_text(args.folios)
    work = Path(tempfile.mkdtemp(prefix="huge-pages-"))
    engines = {}
    try:
        engines = {side: started(work, side) for side in SIDES}
        memory, spent, reports = paired(engines, files, args.passes)
    finally:
        for engine in engines.values():
            engine.close()
        if args.folios and was:
            FOLIOS.write_text(was)
        shutil.rmtree(work, ignore_errors=True)
    print(f"# Large pages for the engine: {len(files)} files x {args.passes} passes, the two engines in turn; "
          f"hugepages-64kB '{args.folios or was}'\n")
    print("| engine | parent CPU per file | child CPU per file | child's minor faults | conversion median | "
          "parent in 2 MB pages, of its RSS (after its start) |\n|---|---|---|---|---|---|")
    for side in SIDES:
        rows = spent[side]
        print(f"| {side} large pages | {statistics.mean(r[0] for r in rows) * 1000:.1f} ms | "
              f"{statistics.mean(r[1] for r in rows) * 1000:.1f} ms | {statistics.mean(r[2] for r in rows):,.0f} | "
              f"{statistics.median(r[3] for r in rows) * 1000:.1f} ms | {memory[side][0]} of {memory[side][1]} MiB |")
    same = sum(a == b for a, b in zip(reports["without"], reports["with"], strict=True))
    print(f"\n- fidelity reports the same from both engines: {same} of {len(reports['with'])} conversions")
    saved = [(a[0] + a[1]) - (b[0] + b[1]) for a, b in zip(spent["without"], spent["with"], strict=True)]
    print(f"- CPU saved per file, parent and child: mean {statistics.mean(saved) * 1000:.1f} ms (standard error "
          f"{statistics.stdev(saved) / len(saved) ** 0.5 * 1000:.1f} ms); less in {sum(s > 0 for s in saved)} of "
          f"{len(saved)} pairs, more in {sum(s < 0 for s in saved)} (CPU is counted in {1000 / TICK:.0f} ms ticks)")


if __name__ == "__main__":
    main()
