"""A worker thread's LibreOffice: the one converting, and a spare.

Each ``Office`` runs one conversion at a time on a LibreOffice of its own (``soffice.py``: the bridge
and ``soffice`` in the bubblewrap sandbox of ``sandbox.py``, or, with ``DOCSHIFT_SANDBOX=off``, only
in a network namespace where one can be made). A LibreOffice that has converted a file of one account
never converts a file of another: a new account's task takes over the spare, started and self-tested in
the background, and the LibreOffice of the account before waits in the worker process's ``Pool``
(``pool.py``) for that account's next task, on whichever Office it comes. Each LibreOffice has its own
profile and its own job dir, where each conversion gets a copy of its source, and its own ``/out`` for the
result (``jobfiles.py``): no LibreOffice sees another's files. A task keeps its own files in ``office.tasks_dir``,
which no sandbox sees.

A LibreOffice that fails its self-test is replaced, and after ``START_ATTEMPTS`` failures in a row the
Office reports itself broken. It is replaced after ``max_conversions`` conversions, after a crash and
after a timeout (a timeout kills only that process group). Every LibreOffice is started by the pool's own
launcher threads, which live as long as the pool (``pool.py`` says why).
"""

import contextlib
import glob
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from docshift.engine import jobfiles, sandbox
from docshift.engine.pool import HOST, Pool, owned
from docshift.engine.soffice import PROFILE_SETTINGS, START_TIMEOUT, UNO_PYTHON, Launcher, Soffice  # noqa: F401
from docshift.errors import EngineBroken, LoadFailed, OfficeCrashed, OfficeTimeout

log = logging.getLogger("docshift.office")

# a LibreOffice that fails its self-test this many times in a row is reported broken
START_ATTEMPTS = 3
CLOSE_SECONDS = 20  # a LibreOffice slower to close a document it answered for is replaced (``_settled``)


class Office:
    def __init__(self, base_dir: str | Path, max_conversions: int = 200, memory_limit_mb: int = 8192,
                 name: str = "office", sandboxed: bool = True,
                 on_start: Callable[["Office", str, str | None], object] | None = None,
                 profile_settings: str | None = None, spare: bool = False, limits: sandbox.Limits | None = None,
                 accounts: int = 1, idle_seconds: float = 600, pool: Pool | None = None) -> None:
        """An Office keeping its tasks' files in ``<base_dir>/tasks/<host>.<pid>.<name>`` (``clear_leftovers``
        knows whose they are), its LibreOffices from ``pool``, which it shares with the other Offices of the
        worker process. Without one it has a pool of its own, made of the rest: its LibreOffices' memory cap,
        ``limits`` (``sandbox.Limits``: what the sandbox may use besides memory), ``sandboxed``,
        ``profile_settings`` (replacing ``PROFILE_SETTINGS``: the tests show what another profile would lose),
        ``accounts`` (how many accounts' LibreOffices to keep, the converting one included; with 1, a
        LibreOffice is stopped as soon as another account's task comes) and ``idle_seconds`` (an account's
        idle LibreOffice is stopped after that long).
        ``on_start(office, state, detail)`` hears of every start: "ok", or "broken" and why.
        ``spare``: keep a LibreOffice started and self-tested in the background, so that a new account or a
        recycling takes over a fresh process at once instead of waiting for one to start."""
        self.base_dir = Path(base_dir)
        self.max_conversions, self.name, self.on_start, self.spare = max_conversions, name, on_start, spare
        if pool is None:
            launcher = Launcher(name, sandboxed, limits or sandbox.Limits(), memory_limit_mb * 1024 * 1024,
                                profile_settings or PROFILE_SETTINGS)
            pool = Pool(base_dir, launcher, name, idle_per_office=accounts - 1, idle_seconds=idle_seconds)
        self.pool = pool
        self.pool.join()
        self.sandboxed = pool.launcher.sandboxed
        self.own = owned(name)
        self.tasks_dir = self.base_dir / "tasks" / self.own
        # the LibreOffice of the task at hand, a Soffice (Any: None until a start, and used only after one)
        self.current: Any = None
        self.starts, self.busy = 0, False
        self.broken: str | None = None  # why the last start gave up, while it stands
        self._spare: Soffice | None = None  # a started, self-tested LibreOffice that has seen no document
        self._lock = threading.Lock()  # the spare, shared with the keeper
        self._wake = threading.Event()
        self._keeper: threading.Thread | None = None
        self._launching: set[Soffice] = set()  # LibreOffices being started for it: one that close() must kill
        self._closing = False

    # what the LibreOffice at hand is

    @property
    def process(self) -> Any:
        return self.current.process if self.current else None

    @property
    def profile(self) -> Path:
        return self.current.profile if self.current else self.base_dir / "office" / self.pool.own

    @property
    def job_dir(self) -> Path:
        """The job dir of the LibreOffice at hand (the only host directory its sandbox sees)."""
        return self.current.job_dir if self.current else self.pool.work_dir

    @property
    def tenant(self) -> str | None:
        return self.current.tenant if self.current else None

    @property
    def conversions(self) -> int:
        return self.current.conversions if self.current else 0

    @property
    def timings(self) -> dict[str, float]:
        return self.current.timings if self.current else {}

    @property
    def restarts(self) -> int:
        """How often this Office replaced its LibreOffice (recycling, crashes, timeouts, new accounts)."""
        return max(0, self.starts - 1)

    @property
    def running(self) -> bool:
        return self.current is not None and self.current.running

    def office_pid(self, soffice: Soffice | None = None) -> int | None:
        """The pid of the ``soffice.bin`` of ``soffice`` (the LibreOffice at hand if None), or None."""
        soffice = soffice or self.current
        return soffice.pid() if soffice else None

    def inside(self, path: str | Path) -> str:
        """``path`` as the LibreOffice at hand sees it: under ``/job`` or ``/profile`` in the sandbox."""
        return self.current.inside(path) if self.current else str(path)

    # lifecycle

    def start(self) -> None:
        """Start LibreOffice and have it pass its self-test; raise EngineBroken after
        ``START_ATTEMPTS`` failures in a row."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                started = self._launch()
                break
            except OfficeCrashed as error:
                failure = error
                log.warning("%s: LibreOffice failed to start (%d of %d): %s", self.name, attempt, START_ATTEMPTS,
                            error)
        else:
            self.broken = str(failure)
            self._report("broken", self.broken)
            raise EngineBroken(f"LibreOffice failed {START_ATTEMPTS} starts in a row: {failure}")
        self._adopt(started)
        if (self.spare or self.pool.idle_per_office) and self._keeper is None:
            self._keeper = threading.Thread(target=self._keep, daemon=True, name=f"{self.name}-spare")
            self._keeper.start()
            self._wake.set()

    def _launch(self, background: bool = False) -> Soffice:
        started = None
        try:
            started = self.pool.launch(self._starting, background)
            return started
        finally:
            with self._lock:  # started, it is no longer close()'s to kill: it may move to another Office
                self._launching = {soffice for soffice in self._launching if soffice.running and soffice is not started}

    def _starting(self, soffice: Soffice) -> None:
        with self._lock:
            self._launching.add(soffice)
        if self._closing:
            soffice.signal()

    def _adopt(self, started: Soffice) -> None:
        """Make ``started`` (a fresh LibreOffice: it has seen no document, it belongs to no account) the one
        at hand."""
        self.current = started
        self.starts += 1
        self.broken = None
        self._report("ok", None)

    def _keep(self) -> None:
        """The keeper: whenever the spare was taken, start another; stop the pool's idle LibreOffices that
        waited too long for their account."""
        delay = 1.0
        while not self._closing:
            self._wake.wait(timeout=min(60.0, self.pool.idle_seconds / 2))
            self._wake.clear()
            if self._closing:
                return
            self.pool.expire()
            with self._lock:
                wanted = self.spare and self._spare is None
            if not wanted:
                continue
            try:
                started: Soffice | None = self._launch(background=True)
                delay = 1.0
            except OfficeCrashed as error:
                if self._closing:  # close() ended the start: nothing went wrong
                    return
                log.warning("%s: no spare LibreOffice: %s", self.name, error)
                time.sleep(delay)
                delay = min(delay * 2, 60)
                self._wake.set()
                continue
            with self._lock:
                if self._spare is None and not self._closing:
                    self._spare, started = started, None
            if started is not None:
                started.kill()

    def _take_spare(self) -> Soffice | None:
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None and spare.running:
            self._wake.set()
            return spare
        if spare is not None:
            spare.kill()
        return None

    def _report(self, state: str, detail: str | None) -> None:
        if self.on_start is not None:
            try:
                self.on_start(self, state, detail)
            except Exception as error:  # a report that cannot be recorded must not stop the engine
                log.warning("%s: could not report its state %s: %r", self.name, state, error)

    def stop(self) -> None:
        """Kill the LibreOffice at hand and remove its profile and job dir (the spare and the idle ones stay)."""
        current, self.current = self.current, None
        if current is not None:
            current.kill()

    def close(self) -> None:
        """Stop the LibreOffice at hand and the spare, and leave the pool (the last to leave closes it):
        this worker thread is going away."""
        self._closing = True
        self._wake.set()
        with self._lock:
            spare, self._spare = self._spare, None
            for soffice in self._launching:
                soffice.signal()  # its start fails at once, and the keeper tidies up after it
        if spare is not None:
            spare.kill()
        self.stop()
        if self._keeper is not None and self._keeper is not threading.current_thread():
            self._keeper.join(timeout=30)
        self.pool.leave()
        shutil.rmtree(self.tasks_dir, ignore_errors=True)

    def restart(self) -> None:
        """A fresh LibreOffice in place of the one at hand: the spare when one is ready, else a new start."""
        self.stop()
        spare = self._take_spare() if self.spare else None
        if spare is not None:
            self._adopt(spare)
        else:
            self.start()

    def take(self, tenant: str | None) -> None:
        """Ready this Office for a task of ``tenant`` (an account id): a LibreOffice that has converted a file
        of another account never converts one of this account's. The account's idle LibreOffice comes back
        from the pool (a fresh one at hand then becomes the spare), or a fresh one takes over; the one of the
        account before waits in the pool for its next task (or is stopped). Its job dir is emptied: nothing of
        an earlier task, or that LibreOffice left there, is seen by this one."""
        current = self.current
        if current is None or not current.running or current.tenant != tenant:
            waiting = self.pool.take(tenant) if tenant is not None else None
            if current is not None and current.tenant not in (None, tenant):
                self.current = None
                self.pool.put(current)
            if waiting is not None:
                if self.current is not None:  # fresh, or no longer running
                    self._spare_or_stop(self.current)
                self.current = waiting
            elif self.current is None or not self.current.running:
                log.info("%s: a new account, a fresh LibreOffice", self.name)
                self.restart()
        if not self._settled():  # its job dir is emptied once it is done with the last document
            self.restart()
        self.current.empty_job_dir()
        self.current.tenant = tenant

    def _settled(self) -> bool:
        """Whether a LibreOffice is at hand once it has closed the document it last answered for. One that does
        not within ``CLOSE_SECONDS``, or dies meanwhile, is stopped: the file it converted keeps its result, and
        the next goes to a fresh LibreOffice, never charged for the wait."""
        if self.running and not self.current.settle(CLOSE_SECONDS):
            log.warning("%s: LibreOffice did not close the last document within %d s; a fresh one takes over",
                        self.name, CLOSE_SECONDS)
            self.stop()
        return self.current is not None

    def _spare_or_stop(self, soffice: Soffice) -> None:
        """``soffice`` becomes the spare if it is fresh (it has seen no document) and there is none; else it
        is stopped."""
        fresh = soffice.running and soffice.tenant is None and not soffice.conversions
        with self._lock:
            kept = fresh and self.spare and self._spare is None and not self._closing
            if kept:
                self._spare = soffice
        if not kept:
            soffice.kill()

    # work

    def export(self, source: str | Path, target: str | Path, export_filter: str, timeout: float,
               task_id: str | None = None, parts: bool | Callable[[], bool] = True,
               password: str | None = None) -> dict[str, Any]:
        """Have LibreOffice load ``source`` and export it into ``target``; returns what it found in the document
        (its embedded objects and charts only if ``parts``: the sheets' or slides' shapes are walked for them).
        ``parts`` may be a function, asked once LibreOffice has loaded the file: the worker decides from what it
        reads of the source meanwhile. ``password``: the Password load property of a protected source. Both
        are the worker's own paths: the sandbox gets copies staged in the job dir."""
        tenant = self.tenant
        self._settled()
        if not self.running:
            self.restart()  # after a crash, the remains of the old process go
            self.current.tenant = tenant
        current = self.current
        current.task_id = task_id
        with self._visible(Path(source).resolve(), Path(target).resolve()) as (inner_source, inner_target):
            request = {"source": inner_source, "target": inner_target, "filter": export_filter, "password": password,
                       "parts": parts if isinstance(parts, bool) else "ask"}
            try:
                current.send(request)
            except OfficeCrashed:
                self.stop()
                raise
            self.busy = True
            deadline = time.monotonic() + timeout
            try:
                answer = current.read(timeout)
                if "loaded" in answer and not isinstance(parts, bool):  # it waits to hear whether to walk
                    current.send({"parts": _decided(parts)})
                    answer = current.read(deadline - time.monotonic())
            except (OfficeTimeout, OfficeCrashed):
                self.stop()
                raise
            finally:
                self.busy = False
        current.conversions += 1
        current.closing = True  # the bridge closes the document after its answer, and says so
        if answer.get("error") == "crashed":
            self.stop()
            raise OfficeCrashed(answer.get("detail", ""))
        if not answer["ok"]:
            # a file LibreOffice choked on may have left it in a state that fails the next one
            self.stop()
            raise LoadFailed(answer.get("detail", ""))
        if current.conversions >= self.max_conversions:
            self._recycle(tenant)
        return answer.get("facts", {})

    def _recycle(self, tenant: str | None) -> None:
        """A fresh LibreOffice (it never gives memory back). One that fails to start leaves the
        finished conversion be: the next conversion starts one again."""
        try:
            self.restart()
            self.current.tenant = tenant
        except (EngineBroken, OSError) as error:
            log.error("%s: LibreOffice not replaced after %d conversions: %s", self.name, self.max_conversions, error)

    @contextlib.contextmanager
    def _visible(self, source: Path, target: Path) -> Iterator[tuple[str, str]]:
        """Sandbox paths for ``source`` and ``target``: a staged copy of the source, and where LibreOffice
        stores the result in the sandbox, copied to ``target`` on the way out (``jobfiles.py``)."""
        if not self.sandboxed:
            yield str(source), str(target)
            return
        with jobfiles.Staging(self.job_dir, self.current.out, source, target.suffix) as staging:
            yield self.inside(staging.source), staging.target
            try:
                staging.take(target)
            except OfficeCrashed:
                self.stop()  # what left that behind will not convert the next file
                raise


def _decided(parts: Callable[[], bool]) -> bool:
    """What ``parts()`` says; True (walk) when it fails: whoever made it hears of that from its own reading."""
    try:
        return bool(parts())
    except Exception:
        return True


def clear_leftovers(base_dir: str | Path) -> None:
    """Remove the job, profile and tasks dirs that Offices of dead worker processes on this host left
    in ``base_dir`` (a SIGKILL gives them no chance); call it when a worker process starts."""
    for kind in ("work", "office", "tasks"):
        for path in Path(base_dir, kind).glob(f"{glob.escape(HOST)}.*"):
            pid = path.name[len(HOST) + 1:].split(".", 1)[0]
            # our own pid in a name is a former process's (a container's worker always has the same)
            if pid.isdigit() and (int(pid) == os.getpid() or not alive(int(pid))):
                log.info("removing %s, left by worker process %s", path, pid)
                shutil.rmtree(path, ignore_errors=True)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
