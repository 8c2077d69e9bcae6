"""docshift: command-line client for the docshift API.

    export DOCSHIFT_URL=http://127.0.0.1:8000 DOCSHIFT_API_KEY=dsk_...
    docshift convert *.doc *.xls --out converted/
    docshift usage
    docshift task tsk_...

Exit codes: 0 everything succeeded, 1 a file or request failed, 2 configuration or
authentication problem (missing/invalid key, inactive subscription, wrong URL, bad arguments).
"""

import argparse
import hashlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit

import requests

from docshift.contract import FINAL, ProblemCode, Status, TaskErrorCode
from docshift.errors import ClientProblem as Problem
from docshift.formats import target_name
from docshift.settings import HOUR, MIN_IDEMPOTENCY_KEY_TTL

DEFAULT_URL = "http://127.0.0.1:8000"
ATTEMPTS = 5            # per request: 0.5 + 1 + 2 + 4 s of backoff covers a service restart
BACKOFF = 0.5
TIMEOUT = (10, 60)      # (connect, read) seconds for one HTTP request

# The client's own codes, beside the service's problem codes
UNREACHABLE, UNEXPECTED_RESPONSE, DOWNLOAD_FAILED = "unreachable", "unexpected_response", "download_failed"
# The client runs without the service's settings: a limit comes from the service's own answer (a 413's
# detail names it), and how long a key replays is what the contract promises at least.
REPLAY_TIME = f"at least {MIN_IDEMPOTENCY_KEY_TTL // HOUR} h"
_T = TypeVar("_T")

# One short hint per problem code: what the user can do about it.
HINTS = {
    ProblemCode.MISSING_API_KEY: "Set DOCSHIFT_API_KEY to your key (dsk_...).",
    ProblemCode.INVALID_API_KEY: "Check DOCSHIFT_API_KEY.",
    ProblemCode.SUBSCRIPTION_PENDING_OR_INACTIVE: "Check the subscription with the marketplace or operator.",
    ProblemCode.TASK_NOT_FOUND: "Check the task id; a task is only visible to the account that submitted it.",
    ProblemCode.NOT_FOUND: f"Check DOCSHIFT_URL: it should be the service's base URL, e.g. {DEFAULT_URL}.",
    ProblemCode.METHOD_NOT_ALLOWED: "Check DOCSHIFT_URL: it should be the service's base URL.",
    ProblemCode.FILE_TOO_LARGE: "Save the file smaller, or split it, to stay within the service's limit.",
    ProblemCode.UNSUPPORTED_FILE_TYPE: "Only .doc, .xls and .ppt files are accepted.",
    ProblemCode.INVALID_REQUEST: "The service refused the request as malformed.",
    ProblemCode.IDEMPOTENCY_CONFLICT: "This file's Idempotency-Key was used for other content; rename it.",
    ProblemCode.TOO_MANY_TASKS: "The account has too many tasks in progress; wait for some to finish.",
    ProblemCode.SERVICE_UNAVAILABLE: "The service is temporarily unavailable; try again shortly.",
    ProblemCode.INTERNAL_ERROR: "The service failed; try again later or tell its operator.",
    UNREACHABLE: "Check DOCSHIFT_URL and that the service is running.",
    UNEXPECTED_RESPONSE: "Check DOCSHIFT_URL: it should point at a docshift service.",
}
# One short hint per code of a FAILED task; a failure is never billed.
FAILURE_HINTS = {
    TaskErrorCode.UNSUPPORTED_CONTENT: "The file holds no document of its extension's type.",
    TaskErrorCode.ENCRYPTED_DOCUMENT: "Remove the password in Office and convert it again.",
    TaskErrorCode.CONVERSION_FAILED: "The file may be damaged; open and save it again in Office.",
    TaskErrorCode.CONVERSION_TIMEOUT: "The file takes too long to convert; try saving it smaller.",
    TaskErrorCode.OUTPUT_INVALID: "The result lost content; tell the service's operator.",
    TaskErrorCode.SUBSCRIPTION_INACTIVE: "Check the subscription with the marketplace or operator.",
    TaskErrorCode.INPUT_MISSING: "The upload was lost before it was converted; rename the file to convert it again "
                                 f"(its Idempotency-Key replays this task for {REPLAY_TIME}).",
}
# Codes no other file or retry can fix: stop the whole run and exit 2.
CONFIG_CODES = {ProblemCode.MISSING_API_KEY, ProblemCode.INVALID_API_KEY, ProblemCode.SUBSCRIPTION_PENDING_OR_INACTIVE,
                ProblemCode.NOT_FOUND, ProblemCode.METHOD_NOT_ALLOWED, UNEXPECTED_RESPONSE}
TRANSIENT_CODES = {ProblemCode.SERVICE_UNAVAILABLE, ProblemCode.INTERNAL_ERROR, UNREACHABLE}


def problem_from(response: requests.Response) -> Problem:
    """The Problem an error answer names (problem+json), or what it looks like when it names none."""
    try:
        body = response.json()
        code, detail = body["code"], body.get("detail") or body.get("title") or ""
    except (ValueError, KeyError, TypeError, AttributeError):
        # not problem+json: a proxy, another server, or a wrong DOCSHIFT_URL
        code = UNEXPECTED_RESPONSE if response.status_code < 500 else ProblemCode.SERVICE_UNAVAILABLE
        detail = f"HTTP {response.status_code} from {urlsplit(response.url).netloc}."
    return Problem(str(code), str(detail), _retry_after(response.headers))


def transient(problem: Problem) -> bool:
    return problem.code in TRANSIENT_CODES


def exit_code(problem: Problem) -> int:
    return 2 if problem.code in CONFIG_CODES else 1


def line(problem: Problem, context: object = None) -> str:
    """The problem as one line: its code, the service's detail, and a hint."""
    text = " ".join(part for part in (problem.detail.strip(), HINTS.get(problem.code, "")) if part)
    where = f"{context}: " if context else ""
    return " ".join(f"docshift: {where}{problem.code}: {text}".split())  # always a single line


def _retry_after(headers: Mapping[str, str], default: float | None = None) -> float | None:
    try:
        return max(0.0, min(float(headers["Retry-After"]), 60.0))
    except (KeyError, ValueError):
        return default


def with_retries(action: Callable[[], _T], stop: threading.Event | None = None) -> _T:
    """Run ``action`` again, with exponential backoff, on 5xx answers and connection errors.

    Safe for submissions too: they carry an Idempotency-Key, so a retry never makes a second task.
    """
    for attempt in range(ATTEMPTS):
        try:
            return action()
        except (requests.ConnectionError, requests.Timeout,
                requests.exceptions.ChunkedEncodingError) as error:
            request: Any = error.request  # a PreparedRequest, whose url is text
            host = urlsplit(request.url).netloc if request is not None else "the service"
            last = Problem(UNREACHABLE, f"Cannot reach {host} ({type(error).__name__}).")
        except Problem as problem:
            if not transient(problem):
                raise
            last = problem
        if stop is not None and stop.is_set():
            break  # the run is being cancelled: no more attempts
        if attempt + 1 < ATTEMPTS:
            time.sleep(last.retry_after if last.retry_after is not None else BACKOFF * 2 ** attempt)
    raise last


class Api:
    def __init__(self, url: str, key: str) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.auth = {"Authorization": f"Bearer {key}"}

    def call(self, method: str, url: str, stop: threading.Event | None = None, headers: dict[str, str] | None = None,
             **kwargs: Any) -> tuple[Any, Mapping[str, str]]:
        """JSON body and headers of an API call; a Problem for any error answer.

        ``url`` is a path under DOCSHIFT_URL, or a URL the service gave (a ``status_url``), of
        which only the path is used: the key goes to the configured scheme, host and port only,
        whatever host a status_url names (a service without DOCSHIFT_BASE_URL builds it from the
        request's Host header).
        """
        if url.startswith(("http://", "https://")):
            given = urlsplit(url)
            url = self.origin + given.path + (f"?{given.query}" if given.query else "")
        else:
            url = self.url + url
        headers = {**self.auth, **(headers or {})}

        def once() -> tuple[Any, Mapping[str, str]]:
            # module-level requests call: a fresh connection per call, no Session shared by threads
            with requests.request(method, url, headers=headers, timeout=TIMEOUT,
                                  **kwargs) as response:
                if response.status_code >= 400:
                    raise problem_from(response)
                try:
                    return response.json(), response.headers
                except ValueError:
                    raise Problem(UNEXPECTED_RESPONSE, f"HTTP {response.status_code} without "
                                  f"JSON from {urlsplit(url).netloc}.") from None

        return with_retries(once, stop)

    def usage(self) -> dict[str, Any]:
        return self.call("GET", "/v1/account/usage")[0]

    def task(self, task_id: str) -> dict[str, Any]:
        return self.call("GET", f"/v1/conversions/{quote(task_id, safe='')}")[0]


def idempotency_key(name: str, data: bytes) -> str:
    """Same file content and name -> same key, so a rerun replays the original task for free.

    The name is part of it because the service treats another name with the same key as a
    conflict; 7 + 64 + 1 + 16 = 88 printable ASCII characters, within the 8-128 rule.
    """
    return (f"sha256-{hashlib.sha256(data).hexdigest()}"
            f"-{hashlib.sha256(name.encode()).hexdigest()[:16]}")


def output_name(content_disposition: str | None, source: Path) -> str:
    """The service's filename (RFC 6266 ``filename*`` first), reduced to a bare name."""
    name = None
    match = re.search(r"filename\*\s*=\s*UTF-8''([^;]+)", content_disposition or "", re.IGNORECASE)
    if match:
        name = unquote(match.group(1).strip())
    else:
        match = re.search(r'filename\s*=\s*"([^"]*)"', content_disposition or "", re.IGNORECASE)
        if match:
            name = match.group(1)
    # never let the server choose a path outside --out
    name = Path((name or "").replace("\\", "/")).name
    if name in ("", ".", ".."):
        name = target_name(source.name) or f"{source.stem}.out"
    return name


def download(url: str, source: Path, out_dir: Path, stop: threading.Event) -> Path:
    """Stream the result into ``out_dir``; plain GET, the presigned link is the credential."""
    def once() -> Path:
        with requests.get(url, stream=True, timeout=TIMEOUT) as response:
            if response.status_code >= 400:
                kind = ProblemCode.SERVICE_UNAVAILABLE if response.status_code >= 500 else DOWNLOAD_FAILED
                raise Problem(kind, f"The object store answered HTTP {response.status_code}.",
                              _retry_after(response.headers))
            target = out_dir / output_name(response.headers.get("Content-Disposition"), source)
            partial = target.with_name(f".{target.name}.part")
            try:
                with open(partial, "wb") as f:
                    f.writelines(response.iter_content(1 << 16))
                os.replace(partial, target)  # a reader never sees half a file under the real name
            finally:
                partial.unlink(missing_ok=True)
            return target
    return with_retries(once, stop)


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
        time.sleep(_retry_after(headers, 2))  # type: ignore[arg-type]  # never None with a default
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
