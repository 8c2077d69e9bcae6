"""What the bubblewrap sandbox costs: one engine parent (``Forkit``) in it and one with DOCSHIFT_SANDBOX=off,
side by side in one run, over the same corpus files.

For each mode, in alternating rounds: the start of the parent (launch and preinit, and the self-test
it passes before taking work), then every file converted once, each in a fresh child of that parent
(latency per file, and throughput: files per second over the pass).
Prints both and the ratio sandbox / off.

    python bench/sandbox.py [--files 30] [--rounds 2] [--corpus ../shared/corpus]
"""

import argparse
import csv
import statistics
import tempfile
import time
from pathlib import Path

from harness import HERE, quantile

from docshift.engine import Forkit
from docshift.formats import FORMATS


def files(corpus, count):
    """The first ``count`` ``ok`` files of the corpus, the three types in turn."""
    with open(corpus / "expected.csv") as f:
        rows = [row["file"] for row in csv.DictReader(f) if row["expected"] == "ok"]
    by_kind = {kind: [r for r in rows if r.endswith(f".{kind}")] for kind in FORMATS}
    chosen = [r for group in zip(*by_kind.values()) for r in group][:count]
    return [corpus / r for r in chosen]


def one_round(sandboxed, paths, work):
    office = Forkit(work, name="bench-on" if sandboxed else "bench-off", sandboxed=sandboxed)
    began = time.perf_counter()
    office.start()
    started = time.perf_counter() - began
    latencies = []
    began = time.perf_counter()
    for n, path in enumerate(paths):
        kind = path.suffix[1:]
        target = work / f"{n}.{FORMATS[kind].target}"
        t = time.perf_counter()
        try:
            office.export(path, target, FORMATS[kind].export_filter, 120)
        except Exception as error:
            print(f"  {path.name}: {type(error).__name__}")
        latencies.append(time.perf_counter() - t)
    elapsed = time.perf_counter() - began
    timings = office.timings
    office.close()
    return {"start": started, "launch": timings["launch"], "self_test": timings["self_test"],
            "latencies": latencies, "rate": len(paths) / elapsed}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=HERE.parent.parent / "shared" / "corpus")
    parser.add_argument("--files", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    paths = files(args.corpus, args.files)
    results = {True: [], False: []}
    with tempfile.TemporaryDirectory(prefix="docshift-bench-sandbox-") as tmp:
        for n in range(args.rounds):
            for sandboxed in (True, False) if n % 2 == 0 else (False, True):
                work = Path(tmp) / f"{n}-{sandboxed}"
                results[sandboxed].append(one_round(sandboxed, paths, work))
    figures = {}
    for sandboxed, rounds in results.items():
        every = [s for r in rounds for s in r["latencies"]]
        figures[sandboxed] = {
            "start s (median)": statistics.median(r["start"] for r in rounds),
            "  launch s": statistics.median(r["launch"] for r in rounds),
            "  self-test s": statistics.median(r["self_test"] for r in rounds),
            "latency p50 s": statistics.median(every),
            "latency p90 s": quantile(every, 0.9),
            "throughput files/s": statistics.median(r["rate"] for r in rounds),
        }
    print(f"\n{len(paths)} corpus files x {args.rounds} rounds, one parent each way, a child per file, same run")
    print("| | sandbox | DOCSHIFT_SANDBOX=off | sandbox / off |\n|---|---|---|---|")
    for name in figures[True]:
        on, off = figures[True][name], figures[False][name]
        print(f"| {name} | {on:.3f} | {off:.3f} | {on / off:.2f} |")


if __name__ == "__main__":
    main()
