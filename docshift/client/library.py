"""The docshift API as a small library: the calls the ``docshift`` command itself makes.

    from docshift.client import Client

    client = Client("http://127.0.0.1:8000", "dsk_...")
    done = client.convert("report.doc", "converted/")     # submit, wait, download
    print(done.path, done.task["fidelity"]["complete"])   # converted/report.docx True
    print(client.usage()["remaining"])

Or step by step: ``submitted = client.submit("report.doc")``, ``task = client.wait(submitted)``,
``client.download(task, "converted/")``. Every call is the HTTP request the README's curl lines
show, through ``requests``; an error answer raises ``docshift.errors.ClientProblem`` with the
service's problem ``code`` (``invalid_api_key``, ``file_too_large``, ...), its detail, and the
wait it asked for. 5xx answers and connection errors are retried with backoff, a 429 waits as its
``Retry-After`` says.
"""

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from docshift.client.http import (
    INTERRUPTED,
    NO_RESULT,
    TIMED_OUT,
    Api,
    bare_name,
    fetch,
    idempotency_key,
    pause,
    retry_after,
    upload_limit,
    utf8_name,
)
from docshift.contract import FINAL, ProblemCode, Status
from docshift.errors import ClientProblem as Problem

WAIT = 900.0  # seconds one file may take, from its submission to its final state, by default


@dataclass
class Conversion:
    """What ``Client.convert`` did with one file."""

    task: dict[str, Any]      # the final task, as GET /v1/conversions/{task_id} answered it
    path: Path | None         # where the result was written: None unless the task SUCCEEDED
    replayed: bool            # the Idempotency-Key answered with an earlier task: not charged again


class Client:
    """A docshift service at ``url`` (its base URL), used with the API key ``key``.

    The key goes only to ``url``'s scheme, host and port, whatever host a status URL names, and
    never into a message. ``stop``, when set (from another thread), ends any wait at once with a
    ClientProblem ``interrupted``. Safe to share between threads.
    """

    def __init__(self, url: str, key: str, *, stop: threading.Event | None = None) -> None:
        self.api = Api(url, key)
        self.stop = stop or threading.Event()
        self._limit: tuple[int, str] | bool | None = False  # False: not asked yet

    def __repr__(self) -> str:
        return f"Client({self.api.url!r})"  # never the key

    def usage(self) -> dict[str, Any]:
        """GET /v1/account/usage: plan, subscription status, included used/quota, overage, period."""
        return self.api.call("GET", "/v1/account/usage", self.stop)[0]

    def task(self, task_id: str) -> dict[str, Any]:
        """GET /v1/conversions/{task_id}: the task as it is now."""
        return self.api.call("GET", f"/v1/conversions/{quote(task_id, safe='')}", self.stop)[0]

    def upload_limit(self) -> tuple[int, str] | None:
        """``(bytes, as the service states it)``: the largest file the service takes, from its OpenAPI
        document, asked once; None when the document does not say."""
        if self._limit is False:
            self._limit = upload_limit(self.api)
        return self._limit  # type: ignore[return-value]  # never False once asked

    def submit(self, source: str | Path, *, data: bytes | None = None, name: str | None = None,
               key: str | None = None, busy_wait: float = WAIT, password: str | None = None,
               protection: str | None = None) -> dict[str, Any]:
        """POST /v1/conversions: ``{task_id, status, status_url, idempotent_replay}``.

        ``data`` defaults to the file's bytes, ``name`` (what the service is told) to its bare name, and
        ``key`` (the Idempotency-Key) to one made from the content, ``name`` and a keyed hash of ``password`` and
        ``protection``, so that submitting the same file again replays its task for a day instead of converting
        and charging it again. ``password`` opens a protected file (the Document-Password header);
        ``protection`` is "keep" (the service's default: the result has the same password) or "remove". A file
        over the service's limit raises ``file_too_large`` without being sent. While the account has too
        many unfinished tasks (429), it waits as ``Retry-After`` says, for at most ``busy_wait`` seconds.
        """
        name = name or Path(source).name
        if data is None:
            data = Path(source).read_bytes()  # bytes, not a file object: a retried POST resends the whole file
        limit = self.upload_limit()
        if limit and len(data) > limit[0]:
            raise Problem(ProblemCode.FILE_TOO_LARGE, f"{len(data):,} bytes, over the service's limit of "
                                                      f"{limit[1]}; not sent.")
        headers: dict[str, str | bytes] = {
            "Idempotency-Key": key or idempotency_key(name, data, options=self.api.options_tag(password, protection))}
        if password is not None:
            headers["Document-Password"] = password.encode()  # UTF-8, as the service reads it
        params = {"protection": protection} if protection is not None else None
        deadline = time.monotonic() + busy_wait
        while True:
            if self.stop.is_set():
                raise Problem(INTERRUPTED, "Stopped before the file was sent.")
            try:
                return self.api.call("POST", "/v1/conversions", self.stop, headers=headers, params=params,
                                     files={"file": (utf8_name(name), data)})[0]
            except Problem as problem:
                # the account's cap on unfinished tasks: wait as told, then go on with this file
                if problem.code != ProblemCode.TOO_MANY_TASKS or time.monotonic() > deadline:
                    raise
                self._pause(problem.retry_after if problem.retry_after is not None else 2, deadline)

    def wait(self, task: dict[str, Any] | str, timeout: float = WAIT) -> dict[str, Any]:
        """Poll a task (a submission, a task, or its id) as ``Retry-After`` says until it is SUCCEEDED,
        FAILED or EXPIRED; returns it then. Raises ``timed_out`` after ``timeout`` seconds (the task goes on)."""
        url = task if isinstance(task, str) else task.get("status_url") or task["task_id"]
        if not url.startswith(("http://", "https://")):
            url = f"/v1/conversions/{url}"
        deadline = time.monotonic() + timeout
        while True:  # at least one query: only the task view carries download_url and error
            body, headers = self.api.call("GET", url, self.stop)
            if body["status"] in FINAL:
                return body
            if time.monotonic() > deadline:
                raise Problem(TIMED_OUT, f"Task {body['task_id']} is still {body['status']} after {timeout:g} s.")
            self._pause(retry_after(headers, 2), deadline)  # type: ignore[arg-type]  # never None with a default

    def download(self, task: dict[str, Any], target: str | Path) -> Path:
        """GET a SUCCEEDED task's ``download_url`` (no Authorization) into ``target``: a folder, where the file
        gets the task's ``result_filename``, or a file path. Returns the path written."""
        if task.get("status") != Status.SUCCEEDED or not task.get("download_url"):
            raise Problem(NO_RESULT, f"Task {task.get('task_id')} is {task.get('status')}: it has no result "
                                     "to download.")
        folder = str(target).endswith(("/", os.sep))
        target = Path(target)
        if folder or target.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            target = target / bare_name(task.get("result_filename"), task.get("source_filename") or "result")
        return fetch(task["download_url"], target, self.stop)

    def convert(self, source: str | Path, out_dir: str | Path, timeout: float = WAIT, *, password: str | None = None,
                protection: str | None = None) -> Conversion:
        """Submit one file, wait for it, and download its result into ``out_dir`` when it SUCCEEDED. ``password``
        and ``protection``: as ``submit``'s."""
        submitted = self.submit(source, busy_wait=timeout, password=password, protection=protection)
        task = self.wait(submitted, timeout)
        path = None
        if task["status"] == Status.SUCCEEDED:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            path = self.download(task, Path(out_dir))
        return Conversion(task, path, bool(submitted.get("idempotent_replay")))

    def _pause(self, seconds: float, deadline: float) -> None:
        """Wait as the service advised, but not past the caller's deadline: a timeout shorter than its
        ``Retry-After`` still ends on time, after one more look."""
        pause(max(0.0, min(seconds, deadline - time.monotonic())), self.stop)
        if self.stop.is_set():
            raise Problem(INTERRUPTED, "Stopped.")
