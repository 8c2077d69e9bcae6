"""One child of the engine's parent at work on a file, as the worker sees it: its answers on a socket of its own, one
JSON line each, and its messages (its stderr) on a pipe of its own, logged with its task (``forkit.py``)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from docshift.errors import OfficeCrashed, OfficeTimeout

log = logging.getLogger("docshift.office")

MAX_REPLY_BYTES = 8 << 20  # the longest answer a child may give (its facts: sheet names, characters counted)
MAX_LOG_LINE = 8192  # the longest line of LibreOffice's messages logged: the rest of a longer one is dropped


class Job:
    """One child at work: its answers on ``sock``, one JSON line each; its messages on ``messages``, logged."""

    def __init__(self, sock: socket.socket, messages: int, name: str, task_id: str | None, tag: int = 0,
                 on_close: Callable[[], object] | None = None) -> None:
        self.sock, self._unread, self._on_close = sock, b"", on_close
        self.tag, self.cancelled = tag, False  # the end of its child's name; whether the worker stopped it
        threading.Thread(target=log_lines, args=(os.fdopen(messages, "rb"), name, task_id), daemon=True,
                         name=f"{name}-messages").start()

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.sock.sendall(json.dumps(message).encode() + b"\n")
        except OSError as error:
            raise OfficeCrashed(str(error)) from error

    def read(self, timeout: float) -> dict[str, Any]:
        """The child's next answer within ``timeout`` seconds and ``MAX_REPLY_BYTES``; raises OfficeTimeout, or
        OfficeCrashed when the child ended without one, or said something else."""
        deadline = time.monotonic() + timeout
        line = self._unread
        while b"\n" not in line:
            if len(line) > MAX_REPLY_BYTES:
                raise OfficeCrashed("the child's answer is too long")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise OfficeTimeout()
            if not select.select([self.sock], [], [], remaining)[0]:
                continue
            try:
                chunk = self.sock.recv(65536)
            except OSError as error:  # ECONNRESET: it died with what it was sent (``parts``) unread
                raise OfficeCrashed(f"LibreOffice ended without an answer: {error}") from None
            if not chunk:
                raise OfficeCrashed("LibreOffice ended without an answer")
            line += chunk
        end = line.index(b"\n") + 1
        line, self._unread = line[:end], line[end:]
        if len(line) > MAX_REPLY_BYTES:
            raise OfficeCrashed("the child's answer is too long")
        try:
            reply = json.loads(line)
        except (ValueError, RecursionError) as error:
            raise OfficeCrashed(f"the child's answer is no JSON: {error}") from None
        if not isinstance(reply, dict):
            raise OfficeCrashed("the child's answer is no JSON object")
        return reply

    def wait_end(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the child to end (its end of the socket closes with it)."""
        deadline = time.monotonic() + timeout
        with contextlib.suppress(OSError):
            while (remaining := deadline - time.monotonic()) > 0:
                if select.select([self.sock], [], [], remaining)[0] and not self.sock.recv(65536):
                    return

    def answer(self, timeout: float) -> dict[str, Any]:
        """Its one answer (a self-test's), then it is closed."""
        try:
            return self.read(timeout)
        except OfficeTimeout as error:
            raise OfficeCrashed("the self-test took too long") from error
        finally:
            self.close()

    def close(self) -> None:
        self.sock.close()
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()


def log_lines(stream: Any, name: str, task_id: str | None) -> None:
    """LibreOffice's own messages, to the log with the task they came from. A line is read only as far as
    ``MAX_LOG_LINE``: the rest of a longer one is dropped, never held."""
    cut = False  # in the rest of a line too long to log
    with stream:
        while chunk := stream.readline(MAX_LOG_LINE):
            if not cut:
                line = chunk.decode("utf-8", "replace").rstrip()
                if line:
                    log.info("%s: %s%s", name, line, "" if chunk.endswith(b"\n") else " [cut]",
                             extra={"task_id": task_id})
            cut = not chunk.endswith(b"\n")
