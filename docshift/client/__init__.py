"""docshift: command-line client for the docshift API.

    export DOCSHIFT_URL=http://127.0.0.1:8000 DOCSHIFT_API_KEY=dsk_...
    docshift convert *.doc *.xls --out converted/
    docshift usage
    docshift task tsk_...

Exit codes: 0 everything succeeded, 1 a file or request failed, 2 configuration or
authentication problem (missing/invalid key, inactive subscription, wrong URL, bad arguments).
"""

import argparse
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from docshift.client.http import (  # noqa: F401 - HINTS, FAILURE_HINTS: the hints the command gives
    DEFAULT_URL,
    FAILURE_HINTS,
    HINTS,
    REPLAY_TIME,
    Api,
    download,
    exit_code,
    idempotency_key,
    line,
    retry_after,
)
from docshift.contract import FINAL, ProblemCode, Status
from docshift.errors import ClientProblem as Problem
from docshift.formats import target_name


def convert_one(api: Api, path: Path, out_dir: Path, timeout: float, stop: threading.Event) -> tuple[bool, str]:
    """Submit, poll and download one file: ``(ok, message)``; Problems propagate."""
    data = path.read_bytes()  # bytes, not a file object: a retried POST must resend the whole file
    deadline = time.monotonic() + timeout
    while True:
        try:
            body, _ = api.call("POST", "/v1/conversions", stop,
                               headers={"Idempotency-Key": idempotency_key(path.name, data)},
                               files={"file": (path.name, data)})
            break
        except Problem as problem:
            # the account's cap on unfinished tasks: wait as told, then go on with this file
            if problem.code != ProblemCode.TOO_MANY_TASKS or stop.is_set() or time.monotonic() > deadline:
                raise
            time.sleep(problem.retry_after if problem.retry_after is not None else 2)
    replay = body.get("idempotent_replay", False)
    # always query at least once: only the task view carries download_url and error
    while True:
        task, headers = api.call("GET", body["status_url"], stop)
        if task["status"] in FINAL:
            break
        if stop.is_set():
            return False, f"{path.name}: cancelled"
        if time.monotonic() > deadline:
            return False, (f"{path.name}: still {task['status']} after {timeout:g} s "
                           f"(task {body['task_id']})")
        time.sleep(retry_after(headers, 2))  # type: ignore[arg-type]  # never None with a default
    where = f"task {task['task_id']}"
    if task["status"] == Status.FAILED:
        error = task.get("error") or {}
        code = error.get("code", "unknown")
        hint = f" {FAILURE_HINTS[code]}" if code in FAILURE_HINTS else ""
        return False, f"{path.name}: FAILED {code}: {error.get('message', '')} ({where}){hint}"
    if task["status"] == Status.EXPIRED:
        return False, (f"{path.name}: EXPIRED: the result was deleted after its retention time, "
                       f"and this file's Idempotency-Key replays that task for {REPLAY_TIME}; rename the "
                       f"file to convert it again ({where})")
    target = download(task["download_url"], path, out_dir, stop)
    note = ", replayed: not charged again" if replay else ""
    return True, f"{path} -> {target} ({where}, {task.get('billing_class')}{note})"


class Progress:
    """A one-line bar on stderr, drawn only on a terminal; messages are printed above it."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.failed = total, 0, 0
        self.stream = sys.stderr
        self.live = self.stream.isatty()
        self.lock = threading.Lock()
        self._draw()

    def _draw(self) -> None:
        if self.live:
            width = 30
            filled = width * self.done // max(self.total, 1)
            failed = f", {self.failed} failed" if self.failed else ""
            bar = "#" * filled + "." * (width - filled)
            self.stream.write(f"\r[{bar}] {self.done}/{self.total}{failed}")
            self.stream.flush()

    def message(self, text: str, stream: Any, ok: bool | None = None) -> None:
        with self.lock:
            if ok is not None:
                self.done += 1
                self.failed += not ok
            if self.live:
                self.stream.write("\r\033[K")
            print(text, file=stream, flush=True)
            self._draw()

    def close(self) -> None:
        if self.live:
            self.stream.write("\n")
            self.stream.flush()


def run_convert(api: Api, args: argparse.Namespace) -> int:
    out_dir = Path(args.out)
    files = list(dict.fromkeys(Path(p) for p in args.files))  # the same path twice is one file
    # two inputs that would write the same output name would overwrite each other: refuse up front
    seen: dict[str, Path] = {}
    for path in files:
        name = (target_name(path.name) or path.stem).lower()
        if name in seen:
            print(f"docshift: {seen[name]} and {path} would both become {name} in {out_dir}; "
                  "convert them into different --out folders.", file=sys.stderr)
            return 2
        seen[name] = path
    api.usage()  # fail once, before any upload, on a bad key, an inactive plan or a wrong URL
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        print(f"docshift: cannot create {out_dir}: {error.strerror or error}", file=sys.stderr)
        return 2

    progress = Progress(len(files))
    stop = threading.Event()
    results: list[bool] = []
    fatal: Problem | None = None
    pool = ThreadPoolExecutor(max_workers=max(1, args.parallel))
    try:
        futures = {pool.submit(convert_one, api, path, out_dir, args.timeout, stop): path
                   for path in files}
        for future in as_completed(futures):
            path = futures[future]
            try:
                ok, text = future.result()
            except Problem as problem:
                if exit_code(problem) == 2:
                    # the key was revoked or the plan stopped mid-run: every file would fail alike
                    fatal = fatal or problem
                    stop.set()
                    continue
                ok, text = False, line(problem, path)
            except OSError as error:
                ok, text = False, f"docshift: {path}: {error.strerror or error}"
            if not ok and not text.startswith("docshift:"):
                text = f"docshift: {text}"
            results.append(ok)
            if not stop.is_set():
                progress.message(text, sys.stdout if ok else sys.stderr, ok)
    finally:
        stop.set()  # on Ctrl-C or a fatal problem, running tasks stop at their next poll
        pool.shutdown(wait=True, cancel_futures=True)
        progress.close()
    if fatal:
        print(line(fatal), file=sys.stderr)
        return 2
    return 0 if len(results) == len(files) and all(results) else 1


def run_usage(api: Api, args: argparse.Namespace) -> int:
    usage = api.usage()
    if args.json:
        print(json.dumps(usage, indent=2))
        return 0
    width = max(map(len, usage), default=0)
    for field, value in usage.items():
        print(f"{field.replace('_', ' '):<{width}}  {value}")
    return 0


def run_task(api: Api, args: argparse.Namespace) -> int:
    print(json.dumps(api.task(args.task_id), indent=2))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="docshift",
        description="Convert .doc/.xls/.ppt to .docx/.xlsx/.pptx with a docshift service.",
        epilog=f"Environment: DOCSHIFT_URL (default {DEFAULT_URL}), DOCSHIFT_API_KEY (required).")
    commands = p.add_subparsers(dest="command", required=True)
    convert = commands.add_parser("convert", help="convert files into a folder")
    convert.add_argument("files", nargs="+", metavar="FILE")
    convert.add_argument("--out", required=True, metavar="DIR", help="folder for the results")
    convert.add_argument("--parallel", type=int, default=4, metavar="N", help="files at a time (4)")
    convert.add_argument("--timeout", type=float, default=900, metavar="S",
                         help="give up waiting for one task after S seconds (900)")
    convert.set_defaults(run=run_convert)
    usage = commands.add_parser("usage", help="show the plan's usage this period")
    usage.add_argument("--json", action="store_true", help="print the raw JSON")
    usage.set_defaults(run=run_usage)
    task = commands.add_parser("task", help="show one task as JSON")
    task.add_argument("task_id", metavar="ID")
    task.set_defaults(run=run_task)
    return p


def main(argv: list[str] | None = None) -> int | str | None:
    try:
        args = parser().parse_args(argv)
    except SystemExit as error:  # argparse exits on --help and usage errors; return the code instead
        return error.code
    key = os.environ.get("DOCSHIFT_API_KEY", "").strip()
    if not key:
        print("docshift: DOCSHIFT_API_KEY is not set; export your key (dsk_...).", file=sys.stderr)
        return 2
    if not all("\x21" <= c <= "\x7e" for c in key):
        print("docshift: DOCSHIFT_API_KEY holds characters no key has; check it.", file=sys.stderr)
        return 2
    url = os.environ.get("DOCSHIFT_URL", "").strip() or DEFAULT_URL
    if not url.startswith(("http://", "https://")):
        print(f"docshift: DOCSHIFT_URL must start with http:// or https:// (got {url!r}).",
              file=sys.stderr)
        return 2
    try:
        return args.run(Api(url, key), args)
    except Problem as problem:
        print(line(problem), file=sys.stderr)
        return exit_code(problem)
    except KeyboardInterrupt:
        print("docshift: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
