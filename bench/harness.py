"""What the benchmarks share: the corpus list, an API client, a cold soffice, quantiles."""

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import requests

from docshift.formats import FORMATS

HERE = Path(__file__).resolve().parent
UNO_PYTHON = "/usr/bin/python3"  # LibreOffice's Python (Debian's, with python3-uno), which plain_warm.py needs
TARGET = {"doc": "docx:MS Word 2007 XML", "xls": "xlsx:Calc MS Excel 2007 XML",
          "ppt": "pptx:Impress MS PowerPoint 2007 XML"}


def arguments(description):
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=HERE.parent.parent / "shared" / "corpus")
    parser.add_argument("--url", default=os.environ.get("DOCSHIFT_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("DOCSHIFT_API_KEY"))
    parser.add_argument("--limit", type=int, default=0, help="only the first N files of each type")
    return parser


def corpus(args):
    """Rows of expected.csv (file, expected) that the benchmarks compare against."""
    if not args.key:
        sys.exit("set DOCSHIFT_API_KEY (or --key)")
    with open(args.corpus / "expected.csv") as f:
        rows = [row for row in csv.DictReader(f) if row["expected"] in ("ok", "encrypted", "bad")]
    if args.limit:
        seen = Counter()
        rows = [r for r in rows if seen.update([kind(r["file"])]) or seen[kind(r["file"])] <= args.limit]
    return rows


def kind(file):
    return Path(file).suffix.lower()[1:]


def submit(url, key, path):
    """POST the file; returns the status URL, or the problem body if it was refused."""
    with open(path, "rb") as f:
        response = requests.post(f"{url}/v1/conversions", headers={"Authorization": f"Bearer {key}"},
                                 files={"file": (path.name, f)}, timeout=60)
    if response.status_code != 202:
        return None, {"status": f"HTTP {response.status_code}", "error": response.json()}
    return response.json()["status_url"], None


def poll(status_url, key, interval=0.05):
    while True:
        body = requests.get(status_url, headers={"Authorization": f"Bearer {key}"}, timeout=30).json()
        if body["status"] not in ("QUEUED", "PROCESSING"):
            return body
        time.sleep(interval)


def convert_through_api(url, key, path):
    """Submit ``path`` and poll until final; returns (seconds, task body)."""
    started = time.perf_counter()
    status_url, refused = submit(url, key, path)
    body = refused or poll(status_url, key)
    return time.perf_counter() - started, body


def convert_cold(path, timeout=120):
    """One cold ``soffice --convert-to`` with a fresh profile; returns (seconds, produced output)."""
    with tempfile.TemporaryDirectory() as tmp:
        target = TARGET[kind(path.name)]
        argv = ["soffice", "--headless", "--norestore", f"-env:UserInstallation={Path(tmp, 'p').as_uri()}",
                "--convert-to", target, "--outdir", tmp, str(path)]
        started = time.perf_counter()
        try:
            subprocess.run(argv, capture_output=True, timeout=timeout, start_new_session=True)
        except subprocess.TimeoutExpired:
            return timeout, False
        return time.perf_counter() - started, Path(tmp, f"{path.stem}.{target[:4]}").exists()


def quantile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def outcome(body):
    code = body.get("error", {}).get("code") if body["status"] == "FAILED" else None
    return body["status"] + (f" {code}" if code else "")


def as_expected(expected, body):
    """``ok`` must SUCCEED, ``encrypted`` must FAIL encrypted_document, ``bad`` must FAIL."""
    if expected == "ok":
        return body["status"] == "SUCCEEDED"
    if expected == "encrypted":
        return outcome(body) == "FAILED encrypted_document"
    return body["status"] == "FAILED"


def print_outcomes(rows, bodies):
    table = Counter((kind(row["file"]), row["expected"], outcome(body)) for row, body in zip(rows, bodies))
    print("| type | expected | outcome | files |")
    print("|---|---|---|---|")
    for (k, expected, result), n in sorted(table.items()):
        print(f"| {k} | {expected} | {result} | {n} |")
    misses = [(row, body) for row, body in zip(rows, bodies) if not as_expected(row["expected"], body)]
    print(f"\nas expected.csv says: {len(rows) - len(misses)}/{len(rows)}")
    for row, body in misses:
        print(f"  differs: {row['file']}: expected {row['expected']}, got {outcome(body)}")


class Plain:
    """One plain warm LibreOffice (``plain_warm.py``, run by LibreOffice's Python) in a process of its own: the
    limit the engine and the service are measured against."""

    def __init__(self, work):
        self.work = Path(tempfile.mkdtemp(dir=work))
        self.process = subprocess.Popen([UNO_PYTHON, str(HERE / "plain_warm.py"), str(self.work / "profile")],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        if self.process.stdout.readline().strip() != "ready":
            raise SystemExit("the plain warm LibreOffice did not start")

    def convert(self, path, n=0):
        """Seconds it took to load ``path`` and store it as OOXML, or None when it made nothing of it."""
        kind = FORMATS[path.suffix.lower()[1:]]
        target = self.work / f"{n}.{kind.target}"
        self.process.stdin.write(f"{path}\t{target}\t{kind.export_filter}\n")
        seconds = float(self.process.stdout.readline())
        target.unlink(missing_ok=True)
        return seconds if seconds >= 0 else None

    def close(self):
        try:
            self.process.stdin.close()  # it stops its LibreOffice's process group and ends
            self.process.wait(30)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()


def charts_workbook(out, charts):
    """``out``/charts.xlsx: ``charts`` line charts over 2,000 rows. LibreOffice's time and memory on it grow with
    them: a plain one takes 5-6 s on 24, and 68 s and 3.4 GB on 220 (``fairness.py``; the tests' ``charts_xls``)."""
    import openpyxl
    from openpyxl.chart import LineChart, Reference

    book = openpyxl.Workbook()
    sheet = book.active
    for row in range(2000):
        sheet.append([row, row * 7 % 13, row * 3 % 17, row * 5 % 11])
    for n in range(charts):
        chart = LineChart()
        chart.add_data(Reference(sheet, min_col=2, min_row=1, max_col=4, max_row=2000))
        sheet.add_chart(chart, f"F{1 + n * 20}")
    book.save(out / "charts.xlsx")
    return out / "charts.xlsx"
