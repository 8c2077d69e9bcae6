"""The docshift API as the command-line client speaks it: requests with retries, problems and their hints,
idempotency keys, downloads. The command itself is ``docshift/client/__init__.py``."""


import hashlib
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit

import requests

from docshift.contract import ProblemCode, TaskErrorCode
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
    return Problem(str(code), str(detail), retry_after(response.headers))


def transient(problem: Problem) -> bool:
    return problem.code in TRANSIENT_CODES


def exit_code(problem: Problem) -> int:
    return 2 if problem.code in CONFIG_CODES else 1


def line(problem: Problem, context: object = None) -> str:
    """The problem as one line: its code, the service's detail, and a hint."""
    text = " ".join(part for part in (problem.detail.strip(), HINTS.get(problem.code, "")) if part)
    where = f"{context}: " if context else ""
    return " ".join(f"docshift: {where}{problem.code}: {text}".split())  # always a single line


def retry_after(headers: Mapping[str, str], default: float | None = None) -> float | None:
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
                              retry_after(response.headers))
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
