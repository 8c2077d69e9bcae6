"""A child's CPU and page faults with the kernel's 64 KB folios for its heaps, and without, file by file.

The engine's parent marks its heaps ``MADV_HUGEPAGE`` before its first fork (``engine/uno/process.py``), so that
the kernel may serve its children's new memory a folio of several pages a fault. Which sizes it serves is the
machine's setting (``/sys/kernel/mm/transparent_hugepage/hugepages-<size>/enabled``), so this bench runs one
engine and sets ``hugepages-64kB`` before each conversion: each file once with it at ``never`` and once at
``madvise``, the order alternating, ``--passes`` times over ``--files`` small corpus files (``service.py``'s
pick). The 2 MB size is left as the machine has it. Each child's CPU (user and system) and minor faults are read
from its parent's counts of reaped children, once the child is reaped. It prints, for each setting, the child's
CPU and faults per file, the paired difference (mean, and the share of files where ``madvise`` spent less) and
the median time of a conversion. The setting is put back as it was.

    .venv/bin/python bench/huge_pages.py [--files 48] [--passes 3] [--corpus ../shared/corpus]

Needs root (it writes the kernel's setting) and a kernel with multi-size huge pages (6.8 or later).
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from service import pick
from warm import children

from docshift.engine import Engine, Forkit

HERE = Path(__file__).resolve().parent
SETTING = Path("/sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled")
TICK = os.sysconf("SC_CLK_TCK")


def current(setting):
    """The chosen value of a sysfs setting, shown as ``always inherit [madvise] never``."""
    return next(word.strip("[]") for word in setting.read_text().split() if word.startswith("["))


def forkit_parent(engine):
    """The pid of the engine's parent: the python3 below the sandbox's processes."""
    todo = [engine.office.process.pid]
    while todo:
        pid = todo.pop()
        with open(f"/proc/{pid}/comm") as comm:
            if comm.read().strip() == "python3":
                return pid
        todo += children(pid)
    raise SystemExit("the engine's parent was not found")


def reaped(parent):
    """(CPU seconds, minor faults) of the parent's reaped children so far."""
    with open(f"/proc/{parent}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / TICK, int(fields[8])


def settle(parent, within=5.0):
    """Wait until no child of the parent is at work on a file (the last one is reaped)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        names = []
        for pid in children(parent):
            try:
                with open(f"/proc/{pid}/comm") as comm:
                    names.append(comm.read().strip())
            except OSError:
                continue
        if "forkit-file" not in names:
            return
        time.sleep(0.005)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=48)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--corpus", type=Path, default=HERE.parent.parent / "shared" / "corpus")
    args = parser.parse_args()
    if not SETTING.exists() or not os.access(SETTING, os.W_OK):
        sys.exit(f"{SETTING} is missing or not writable: run as root, on a kernel with multi-size huge pages")
    files, was = pick(args.corpus, args.files), current(SETTING)
    work = Path(tempfile.mkdtemp(prefix="huge-pages-"))
    engine = Engine(Forkit(work, name="huge-pages"))
    engine.start()
    spent = {"never": [], "madvise": []}
    try:
        parent = forkit_parent(engine)
        for round_ in range(args.passes):
            for n, path in enumerate(files):
                for value in ("never", "madvise") if (n + round_) % 2 == 0 else ("madvise", "never"):
                    SETTING.write_text(value)
                    settle(parent)
                    cpu, faults = reaped(parent)
                    out = engine.office.tasks_dir / f"job-{round_}-{n}-{value}"
                    started = time.perf_counter()
                    engine.convert(path, path.suffix[1:].lower(), out, 120)
                    took = time.perf_counter() - started
                    shutil.rmtree(out, ignore_errors=True)
                    settle(parent)
                    after = reaped(parent)
                    spent[value].append((after[0] - cpu, after[1] - faults, took))
    finally:
        SETTING.write_text(was)
        engine.close()
        shutil.rmtree(work, ignore_errors=True)
    print(f"# A child's CPU with and without 64 KB folios: {len(files)} files x {args.passes} passes, "
          f"2 MB huge pages '{current(Path(str(SETTING).replace('64kB', '2048kB')))}'\n")
    print("| hugepages-64kB | child CPU ms per file (mean) | minor faults per file (mean) | conversion median ms |\n"
          "|---|---|---|---|")
    for value, rows in spent.items():
        print(f"| {value} | {statistics.mean(r[0] for r in rows) * 1000:.1f} | "
              f"{statistics.mean(r[1] for r in rows):,.0f} | {statistics.median(r[2] for r in rows) * 1000:.1f} |")
    saved = [a[0] - b[0] for a, b in zip(spent["never"], spent["madvise"], strict=True)]
    print(f"\n- CPU saved per file with madvise: mean {statistics.mean(saved) * 1000:.1f} ms "
          f"(standard error {statistics.stdev(saved) / len(saved) ** 0.5 * 1000:.1f} ms), less in "
          f"{sum(s > 0 for s in saved)} of {len(saved)} pairs, more in {sum(s < 0 for s in saved)} "
          f"(CPU is counted in {1000 / TICK:.0f} ms ticks)")


if __name__ == "__main__":
    main()
