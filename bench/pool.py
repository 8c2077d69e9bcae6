"""Speed of the conversion pool over the corpus, against a running docshift.

1. One file at a time: each outcome against ``expected.csv`` (``ok`` SUCCEEDS,
   ``encrypted`` FAILS ``encrypted_document``, ``bad`` FAILS) and submit->SUCCEEDED
   latency p50/p90 per type.
2. A burst: every ``ok`` file submitted at once; throughput of the default pool.
3. A cold ``soffice --convert-to`` of a sample of the same files, in the same run,
   for the ratios: median latency / cold median (target <= 0.3) and pool
   throughput / one cold soffice's (target >= 5).
Peak RSS of each LibreOffice process is sampled from /proc while the passes run.

    DOCSHIFT_URL=http://127.0.0.1:8000 DOCSHIFT_API_KEY=dsk_... python bench/pool.py
"""

import os
import statistics
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import harness
from harness import quantile


class RssSampler(threading.Thread):
    """Peak VmHWM of every LibreOffice process of docshift's: the engine's parents (``forkit.py`` under LibreOffice's
    Python; bubblewrap's command line names it too) and the children they fork, one per file."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peaks = {}
        self.stopped = threading.Event()

    def run(self):
        while not self.stopped.wait(0.25):
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                try:
                    with open(f"/proc/{entry}/cmdline", "rb") as f:
                        cmdline = f.read()
                    if not cmdline.startswith(b"/usr/bin/python3\0") or b"forkit.py\0" not in cmdline:
                        continue
                    with open(f"/proc/{entry}/status") as f:
                        hwm = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
                except (OSError, StopIteration):
                    continue
                self.peaks[entry] = max(self.peaks.get(entry, 0), hwm * 1024)


def main():
    parser = harness.arguments(__doc__)
    parser.add_argument("--cold-sample", type=int, default=40, help="files converted cold for the ratios")
    parser.add_argument("--burst-clients", type=int, default=8)
    args = parser.parse_args()
    rows = harness.corpus(args)
    sampler = RssSampler()
    sampler.start()

    bodies, latency = [], defaultdict(list)
    for row in rows:
        seconds, body = harness.convert_through_api(args.url, args.key, args.corpus / row["file"])
        bodies.append(body)
        if body["status"] == "SUCCEEDED":
            latency[harness.kind(row["file"])].append(seconds)

    ok_files = [args.corpus / row["file"] for row, body in zip(rows, bodies) if body["status"] == "SUCCEEDED"]
    started = time.perf_counter()
    with ThreadPoolExecutor(args.burst_clients) as pool:
        urls = list(pool.map(lambda p: harness.submit(args.url, args.key, p)[0], ok_files))
        burst = list(pool.map(lambda u: harness.poll(u, args.key, interval=0.2), urls))
    burst_seconds = time.perf_counter() - started
    sampler.stopped.set()

    step = max(1, len(ok_files) // args.cold_sample)
    sample = ok_files[::step][:args.cold_sample]
    cold = [harness.convert_cold(path)[0] for path in sample]

    print(f"# docshift corpus: {len(rows)} files from {args.corpus.name}, against {args.url}\n")
    harness.print_outcomes(rows, bodies)
    every = [s for values in latency.values() for s in values]
    print("\none at a time, submit->SUCCEEDED:")
    print("| type | files | p50 s | p90 s |")
    print("|---|---|---|---|")
    for k in sorted(latency) + ["all"]:
        values = every if k == "all" else latency[k]
        print(f"| {k} | {len(values)} | {quantile(values, .5):.3f} | {quantile(values, .9):.3f} |")
    cold_median = statistics.median(cold)
    pool_rate = len(ok_files) / burst_seconds
    cold_rate = len(cold) / sum(cold)
    burst_ok = sum(body["status"] == "SUCCEEDED" for body in burst)
    print(f"\ncold soffice, {len(sample)} of the same files, this run: p50 {cold_median:.3f} s, "
          f"p90 {quantile(cold, .9):.3f} s, {cold_rate:.2f} files/s")
    print(f"burst of {len(ok_files)} files ({burst_ok} SUCCEEDED) through the pool: {burst_seconds:.1f} s, "
          f"{pool_rate:.2f} files/s")
    print("\n| ratio | measured | target |")
    print("|---|---|---|")
    print(f"| median latency / cold soffice median | {statistics.median(every) / cold_median:.2f} | <= 0.30 |")
    print(f"| pool throughput / one cold soffice | {pool_rate / cold_rate:.1f} | >= 5 |")
    if sampler.peaks:
        peaks = sorted(sampler.peaks.values())
        print(f"\npeak RSS per LibreOffice process ({len(peaks)} processes seen): "
              f"max {peaks[-1] / 2**20:.0f} MiB, median {statistics.median(peaks) / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
