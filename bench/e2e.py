"""End-to-end benchmark against a running docshift.

Converts every file of a folder (default: ../shared/corpus) through the HTTP API,
one at a time, and compares each outcome with ``expected.csv``: ``ok`` must
SUCCEED, ``encrypted`` must FAIL ``encrypted_document``, ``bad`` must FAIL. In the
same run it converts the same files with a cold ``soffice --convert-to`` and
prints submit->final latency p50/p90 beside the cold times, as a ratio.

    DOCSHIFT_URL=http://127.0.0.1:8000 DOCSHIFT_API_KEY=dsk_... python bench/e2e.py [--limit N]
"""

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
TARGET = {"doc": "docx:MS Word 2007 XML", "xls": "xlsx:Calc MS Excel 2007 XML",
          "ppt": "pptx:Impress MS PowerPoint 2007 XML"}


def convert_through_api(url, key, path):
    """Submit ``path``, poll until final; returns (seconds, task body)."""
    headers = {"Authorization": f"Bearer {key}"}
    started = time.perf_counter()
    with open(path, "rb") as f:
        response = requests.post(f"{url}/v1/conversions", headers=headers, files={"file": (path.name, f)},
                                 timeout=60)
    if response.status_code != 202:
        return time.perf_counter() - started, {"status": f"HTTP {response.status_code}",
                                               "error": response.json()}
    status_url = response.json()["status_url"]
    while True:
        body = requests.get(status_url, headers=headers, timeout=30).json()
        if body["status"] not in ("QUEUED", "PROCESSING"):
            return time.perf_counter() - started, body
        time.sleep(0.05)


def convert_cold(path, timeout=120):
    """One cold ``soffice --convert-to`` with a fresh profile; returns (seconds, produced output)."""
    with tempfile.TemporaryDirectory() as tmp:
        kind = path.suffix.lower()[1:]
        argv = ["soffice", "--headless", "--norestore", f"-env:UserInstallation={Path(tmp, 'p').as_uri()}",
                "--convert-to", TARGET[kind], "--outdir", tmp, str(path)]
        started = time.perf_counter()
        try:
            subprocess.run(argv, capture_output=True, timeout=timeout, start_new_session=True)
        except subprocess.TimeoutExpired:
            return timeout, False
        elapsed = time.perf_counter() - started
        return elapsed, Path(tmp, f"{path.stem}.{TARGET[kind][:4]}").exists()


def quantile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def verdict(expected, body):
    if expected == "ok":
        return body["status"] == "SUCCEEDED"
    if expected == "encrypted":
        return body["status"] == "FAILED" and body.get("error", {}).get("code") == "encrypted_document"
    return body["status"] == "FAILED"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=HERE.parent.parent / "shared" / "corpus")
    parser.add_argument("--url", default=os.environ.get("DOCSHIFT_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("DOCSHIFT_API_KEY"))
    parser.add_argument("--limit", type=int, default=0, help="only the first N files of each type")
    args = parser.parse_args()
    if not args.key:
        sys.exit("set DOCSHIFT_API_KEY (or --key)")

    with open(args.corpus / "expected.csv") as f:
        rows = [row for row in csv.DictReader(f) if row["expected"] in ("ok", "encrypted", "bad")]
    if args.limit:
        per_type = Counter()
        rows = [r for r in rows if per_type.update([r["file"][:3]]) or per_type[r["file"][:3]] <= args.limit]

    outcomes = defaultdict(Counter)
    api_seconds, cold_seconds, mismatches = defaultdict(list), defaultdict(list), []
    for row in rows:
        path = args.corpus / row["file"]
        kind = path.suffix.lower()[1:]
        seconds, body = convert_through_api(args.url, args.key, path)
        code = body.get("error", {}).get("code") if body["status"] == "FAILED" else None
        outcomes[kind][(row["expected"], body["status"] + (f" {code}" if code else ""))] += 1
        if not verdict(row["expected"], body):
            mismatches.append((row["file"], row["expected"], body["status"], code))
        cold, produced = convert_cold(path)
        if body["status"] == "SUCCEEDED":
            api_seconds[kind].append(seconds)
            cold_seconds[kind].append(cold)

    print(f"# docshift e2e: {len(rows)} files from {args.corpus.name}, against {args.url}\n")
    print("| type | expected | outcome | files |")
    print("|---|---|---|---|")
    for kind in sorted(outcomes):
        for (expected, outcome), n in sorted(outcomes[kind].items()):
            print(f"| {kind} | {expected} | {outcome} | {n} |")
    total = len(rows) - len(mismatches)
    print(f"\nmatching expected.csv: {total}/{len(rows)}")
    for file, expected, status, code in mismatches:
        print(f"  mismatch: {file}: expected {expected}, got {status} {code or ''}")

    print("\nlatency of succeeded files, submit->SUCCEEDED through the API vs cold soffice, same files, same run:")
    print("| type | files | api p50 s | api p90 s | cold p50 s | cold p90 s | p50 ratio api/cold |")
    print("|---|---|---|---|---|---|---|")
    every_api, every_cold = [], []
    for kind in sorted(api_seconds):
        a, c = api_seconds[kind], cold_seconds[kind]
        every_api += a
        every_cold += c
        print(f"| {kind} | {len(a)} | {quantile(a, .5):.2f} | {quantile(a, .9):.2f} | {quantile(c, .5):.2f} "
              f"| {quantile(c, .9):.2f} | {quantile(a, .5) / quantile(c, .5):.2f} |")
    if every_api:
        print(f"| all | {len(every_api)} | {quantile(every_api, .5):.2f} | {quantile(every_api, .9):.2f} "
              f"| {quantile(every_cold, .5):.2f} | {quantile(every_cold, .9):.2f} "
              f"| {statistics.median(every_api) / statistics.median(every_cold):.2f} |")


if __name__ == "__main__":
    main()
