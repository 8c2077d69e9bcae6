"""A worker process's LibreOffices: where they start, and where they wait between an account's tasks.

The Offices of one worker process (``office.py``, one per worker thread) share one ``Pool``. An account's
LibreOffice that one Office sets aside when another account's task comes is taken back by whichever Office
gets that account's next task: an account costs one start per worker process, not one per thread. The pool
keeps each idle LibreOffice under the account whose files it has seen, and hands it to that account only: a
LibreOffice never converts a second account's file. At most ``idle_per_office`` idle ones are kept for each
Office that shares it, the least recently used stopped first, and none longer than ``idle_seconds``.

bubblewrap's ``--die-with-parent`` follows the thread that started it, not the process: a LibreOffice started
by a thread that ends dies with it. Since a LibreOffice moves between the Offices (their threads), every one is
started on a launcher thread of the pool's own, which lives as long as the pool.
"""

import functools
import itertools
import logging
import os
import queue
import re
import shutil
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from docshift.engine.soffice import Launcher, Soffice
from docshift.errors import OfficeCrashed

log = logging.getLogger("docshift.office")

HOST = socket.gethostname()
# launcher threads per Office sharing the pool: one for its own starts, one for its spare's
LAUNCHERS_PER_OFFICE = 2


def owned(name: str) -> str:
    """``<host>.<pid>.<name>``, ``name`` made safe for a path: what this worker process's dirs are named, so that
    ``clear_leftovers`` knows whose they are."""
    return f"{HOST}.{os.getpid()}.{re.sub(r'[^A-Za-z0-9_-]', '_', name)}"


class Pool:
    def __init__(self, base_dir: str | Path, launcher: Launcher, name: str = "office", idle_per_office: int = 0,
                 idle_seconds: float = 600) -> None:
        """A pool keeping its LibreOffices' job dirs in ``<base_dir>/work/<own>/<n>`` and their profiles' seeds
        in ``<base_dir>/office/<own>.<n>``, ``own`` being ``<host>.<pid>.<name>`` (``clear_leftovers`` knows
        whose they are). ``launcher`` says how a LibreOffice starts (sandbox, limits, profile)."""
        self.base_dir, self.launcher = Path(base_dir), launcher
        self.idle_per_office, self.idle_seconds = max(0, idle_per_office), idle_seconds
        self.own = owned(name)
        self.work_dir = self.base_dir / "work" / self.own
        self._generations = itertools.count(1)  # numbers the profiles, job dirs and pipes of its LibreOffices
        self._idle: list[Soffice] = []  # least recently set aside first
        self._lock = threading.Lock()
        # each start asked of the launcher threads: who hears of its process, and where its Soffice (or what its
        # start raised) goes
        self._requests: queue.SimpleQueue[tuple[Callable[[Soffice], object], bool, Future[Soffice]] | None] = \
            queue.SimpleQueue()
        self._launchers: list[threading.Thread] = []
        self._launching: set[Soffice] = set()  # being started: one that close() must kill
        self._offices = 0
        self.closing = False

    def join(self) -> None:
        """An Office shares this pool from now on (it leaves with ``leave``); it gets launcher threads."""
        with self._lock:
            self._offices += 1
            for _ in range(LAUNCHERS_PER_OFFICE):
                thread = threading.Thread(target=self._launcher, daemon=True,
                                          name=f"{self.launcher.name}-launcher-{len(self._launchers) + 1}")
                self._launchers.append(thread)
                thread.start()

    def leave(self) -> None:
        """An Office is closed: the last to leave closes the pool."""
        with self._lock:
            self._offices -= 1
            last = self._offices <= 0
        if last:
            self.close()

    # starting one

    def launch(self, starting: Callable[[Soffice], object] = lambda soffice: None, background: bool = False) -> Soffice:
        """A fresh LibreOffice, started and self-tested on one of the pool's launcher threads (the caller
        waits). ``starting(soffice)`` hears of it as soon as its process runs; ``background``: nobody waits
        for it (``Launcher.launch``). Raises what the start raised (OfficeCrashed)."""
        answer: Future[Soffice] = Future()
        with self._lock:  # close() ends the launchers under the same lock: no request is left unanswered
            if self.closing:
                raise OfficeCrashed("the worker is closing its LibreOffices")
            self._requests.put((starting, background, answer))
        return answer.result()

    def _launcher(self) -> None:
        while (request := self._requests.get()) is not None:
            starting, background, answer = request
            generation = next(self._generations)
            started = None
            try:
                started = self.launcher.launch(
                    self.base_dir / "office" / f"{self.own}.{generation}", self.work_dir / str(generation),
                    f"docshift-{os.getpid()}-{self.launcher.name}-{generation}",
                    functools.partial(self._starting, starting=starting), background)
                answer.set_result(started)
            except BaseException as error:
                answer.set_exception(error)
            finally:
                with self._lock:
                    self._launching = {soffice for soffice in self._launching
                                       if soffice.running and soffice is not started}

    def _starting(self, soffice: Soffice, starting: Callable[[Soffice], object]) -> None:
        with self._lock:
            self._launching.add(soffice)
        if self.closing:
            soffice.signal()
        starting(soffice)

    # the idle ones

    def take(self, tenant: str | None) -> Soffice | None:
        """The idle LibreOffice of ``tenant``'s that waited the least, taken out of the pool; or None."""
        with self._lock:
            found = next((soffice for soffice in reversed(self._idle) if soffice.tenant == tenant), None)
            if found is not None:
                self._idle.remove(found)
        if found is not None and not found.running:
            found.kill()
            return None
        return found

    def put(self, soffice: Soffice) -> None:
        """Keep ``soffice`` (it has converted a file of ``soffice.tenant``) for that account's next task,
        stopping the least recently used beyond what the pool keeps; or stop it."""
        soffice.idle_since = time.monotonic()
        gone = []
        with self._lock:
            if soffice.running and not self.closing:
                self._idle.append(soffice)
            else:
                gone.append(soffice)
            while len(self._idle) > self.idle_per_office * max(1, self._offices):
                gone.append(self._idle.pop(0))
        for each in gone:
            each.kill()

    def expire(self) -> None:
        """Stop the idle LibreOffices that waited longer than ``idle_seconds``."""
        limit = time.monotonic() - self.idle_seconds
        with self._lock:
            gone = [soffice for soffice in self._idle if soffice.idle_since < limit]
            self._idle = [soffice for soffice in self._idle if soffice not in gone]
        for soffice in gone:
            log.info("%s: an account's LibreOffice idle for %d s is stopped", self.launcher.name, self.idle_seconds)
            soffice.kill()

    @property
    def idle(self) -> list[Soffice]:
        with self._lock:
            return list(self._idle)

    def close(self) -> None:
        """Stop every idle LibreOffice and those being started, end the launcher threads, remove the job dirs."""
        with self._lock:
            self.closing = True
            idle, self._idle = self._idle, []
            for soffice in self._launching:
                soffice.signal()  # its start fails at once
            launchers = list(self._launchers)
            for _ in launchers:
                self._requests.put(None)
        for soffice in idle:
            soffice.kill()
        for thread in launchers:
            if thread is not threading.current_thread():
                thread.join(timeout=30)
        shutil.rmtree(self.work_dir, ignore_errors=True)
