"""What a child's copying, before its file comes, of the parent's pages that children write saves: two engines side
by side, one whose children copy nothing.

A child's first write to a page it shares with the engine's parent copies that page in a fault, on the way of its
file's conversion. The parent learns which pages children write from a learner of each self-test file, and every
child copies those while it waits (``docshift/engine/uno/written.py``). This bench starts two engines, one as the
service runs it and one with no learners (``Forkit(learners=0)``: its children copy nothing), and converts each of
``--files`` small corpus files (``service.py``'s pick) on each in turn, the order alternating, ``--passes`` times,
as ``huge_pages.py`` does. It prints each engine's conversion time (a waiting child gets the file, to its checked
result; the worker's part included) and CPU per file (the parent's, and its children's with what they copied while
waiting), the children's minor faults, how long each engine's start took, and whether each file's fidelity report is
the same from both.

    .venv/bin/python bench/copies.py [--files 48] [--passes 3] [--corpus ../shared/corpus]
"""

import argparse
import functools
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from huge_pages import HERE, TICK, counts, paired, settle
from service import pick
from warm import Memory

from docshift.engine import Engine, Forkit

SIDES = {"copies nothing": 0, "copies what children write": None}  # learners: none, or the service's default


def convert(engine, job):
    path, out = job
    return engine.convert(path, path.suffix[1:].lower(), out, 120)


def floods(engines, files, rounds):
    """{side: [(files/s, CPU seconds a file of the parent and its reaped children)]}: all ``files`` converted two at
    a time on one engine, then on the other, the order alternating each round. A child's CPU counts once it is
    reaped: what the children left waiting did counts in the next round."""
    watcher = Memory()
    for engine in engines.values():
        watcher.watch(engine.office)
    parents = {side: watcher.parent_of[engine.office] for side, engine in engines.items()}
    found = {side: [] for side in engines}
    sides = list(engines)
    for round_ in range(rounds):
        for side in sides if round_ % 2 == 0 else sides[::-1]:
            settle(parents[side])
            before = counts(parents[side])
            began = time.perf_counter()
            engine = engines[side]
            jobs = [(path, engine.office.tasks_dir / f"flood-{round_}-{n}") for n, path in enumerate(files)]
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(functools.partial(convert, engine), jobs))
            took = time.perf_counter() - began
            settle(parents[side])
            after = counts(parents[side])
            found[side].append((len(files) / took, (after[0] + after[1] - before[0] - before[1]) / len(files)))
            shutil.rmtree(engines[side].office.tasks_dir, ignore_errors=True)
            engines[side].office.tasks_dir.mkdir(parents=True, exist_ok=True)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=48)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--corpus", type=Path, default=HERE.parent.parent / "shared" / "corpus")
    parser.add_argument("--floods", type=int, default=4, help="rounds of all the files two at a time on each engine")
    args = parser.parse_args()
    files = pick(args.corpus, args.files)
    work = Path(tempfile.mkdtemp(prefix="copies-"))
    engines = {}
    try:
        for side, learners in SIDES.items():
            options = {} if learners is None else {"learners": learners}
            engines[side] = Engine(Forkit(Path(tempfile.mkdtemp(dir=work)), name=f"copies-{learners}", **options))
            engines[side].start()
        starts = {side: engine.office.timings.get("self_test", 0.0) for side, engine in engines.items()}
        pages = {side: engine.office.pages for side, engine in engines.items()}
        _, spent, reports = paired(engines, files, args.passes)
        flooded = floods(engines, files, args.floods)
    finally:
        for engine in engines.values():
            engine.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"# Pages copied before the file comes: {len(files)} files x {args.passes} passes, the two engines in turn\n")
    print("| engine | pages a child copies, grows (learners) | conversion median (mean) | parent CPU per file | "
          "children's CPU per file | children's minor faults per file | self-test at start |\n"
          "|---|---|---|---|---|---|---|")
    for side in SIDES:
        rows = spent[side]
        print(f"| {side} | {pages[side]['copied']:,}, {pages[side]['grown']:,} "
              f"({pages[side]['learners']}) "
              f"| {statistics.median(r[3] for r in rows) * 1000:.1f} ms "
              f"({statistics.mean(r[3] for r in rows) * 1000:.1f}) | {statistics.mean(r[0] for r in rows) * 1000:.1f} "
              f"ms | {statistics.mean(r[1] for r in rows) * 1000:.1f} ms | {statistics.mean(r[2] for r in rows):,.0f} "
              f"| {starts[side]:.2f} s |")
    without, with_ = (spent[side] for side in SIDES)
    for what, index in (("conversion time", 3), ("CPU, parent and children", None)):
        saved = [(a[index] - b[index]) if index is not None else (a[0] + a[1]) - (b[0] + b[1])
                 for a, b in zip(without, with_, strict=True)]
        print(f"- {what} saved per file: mean {statistics.mean(saved) * 1000:.1f} ms (standard error "
              f"{statistics.stdev(saved) / len(saved) ** 0.5 * 1000:.1f} ms), median "
              f"{statistics.median(saved) * 1000:.1f} ms; less in {sum(s > 0 for s in saved)} of {len(saved)} pairs, "
              f"more in {sum(s < 0 for s in saved)}")
    print(f"\n## The files two at a time on each engine in turn ({args.floods} rounds, the order alternating)\n\n"
          "| engine | files/s, each round | parent and children's CPU per file, each round |\n|---|---|---|")
    for side in SIDES:
        print(f"| {side} | {', '.join(f'{rate:.2f}' for rate, _ in flooded[side])} | "
              f"{', '.join(f'{cpu * 1000:.1f} ms' for _, cpu in flooded[side])} |")
    same = sum(a == b for a, b in zip(*(reports[side] for side in SIDES), strict=True))
    print(f"- fidelity reports the same from both engines: {same} of {len(without)} conversions "
          f"(CPU is counted in {1000 / TICK:.0f} ms ticks)")


if __name__ == "__main__":
    main()
