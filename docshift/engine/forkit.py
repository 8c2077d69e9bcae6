"""A worker process's LibreOffice: one warm parent in its sandbox, and a fresh child of it for every file.

The parent (``uno/forkit.py``, Collabora Online's forkit model) starts LibreOffice once and warms it on its own
self-test files, never a customer's; each ``export`` has a child forked from it convert that one file and exit. No
LibreOffice process sees two customers' files, so nothing an earlier file did inside LibreOffice, whoever's it was,
reaches a later one, and no account bookkeeping is needed to keep accounts apart. A child costs a fork (waiting,
forked, before its file comes), not a LibreOffice start (0.3 s and a self-test).

The worker hands a child its source and its result as open descriptors, over the parent's control socket: the
sandbox is never given a path of the worker's, and what a child writes goes nowhere but the result file, within
the sandbox's file-size limit. Each child answers on a socket of its own (``Job``) and writes its messages on a
pipe of its own, logged with its task. The parent kills a child at its deadline; one whose parent died goes with
the sandbox. A parent that dies is started again (and self-tested) by the next conversion, under ``_lock``:
the worker threads of a process share one ``Forkit``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import queue
import resource
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from docshift import formats
from docshift.engine import memory, sandbox
from docshift.engine.job import Job, log_lines
from docshift.engine.places import owned
from docshift.engine.profile import PROFILE_SETTINGS, network_namespace, with_version
from docshift.errors import EngineBroken, LoadFailed, OfficeCrashed, OfficeTimeout, Preempted

log = logging.getLogger("docshift.office")

# what runs inside the sandbox, under LibreOffice's Python: the only code the sandbox sees
PARENT = Path(__file__).resolve().parent / "uno" / "forkit.py"
UNO_PYTHON = "/usr/bin/python3"  # LibreOffice's Python: Debian's python3 with python3-uno
START_TIMEOUT = SELF_TEST_TIMEOUT = 60
LEARNERS = 1  # the children of each self-test file the parent learns from (``uno/written.py``)
STATUS_WAIT = 2  # seconds a parent that ended before it was ready is given to be reaped, for its exit status
START_ATTEMPTS = 3  # a parent that fails its start or self-test this many times in a row is reported broken
# LibreOffice's standing with the kernel's OOM killer: above the worker's (0), so it goes first
OOM_SCORE_ADJ = 500
CONTROL_FD = 11  # the control socket's lowest number: above the 3 to 5 and 10 that ``sandbox.py``'s wrapper uses
GRACE_SECONDS = 2  # past a child's deadline, the parent has killed it: its socket says so by then


class Forkit:
    def __init__(self, base_dir: str | Path, name: str = "office", sandboxed: bool = True,
                 limits: sandbox.Limits | None = None, memory_limit_mb: int = 8192,
                 profile_settings: str = PROFILE_SETTINGS,
                 on_start: Callable[[str, str | None], object] | None = None, ready: int = 2,
                 learners: int = LEARNERS) -> None:
        """A parent keeping its profile's seed in ``<base_dir>/office/<own>`` and the tasks' files in
        ``<base_dir>/tasks/<own>``, ``own`` being ``<host>.<pid>.<name>``. It runs in the sandbox (or not), under
        ``limits`` and an address-space cap of ``memory_limit_mb``, each its children's too. ``on_start(state,
        detail)`` hears of every start: "ok", or "broken" and why. ``ready``: how many children wait, started,
        for a file (as many as the threads that share it: none of them waits for a fork). ``learners``: the children
        of each self-test file that show which pages of the parent a child writes, for the others to copy before
        their file comes (``uno/written.py``); none, and no child copies any."""
        self.base_dir, self.name, self.sandboxed = Path(base_dir), name, sandboxed
        self.profile_settings, self.on_start, self.ready = profile_settings, on_start, max(1, ready)
        self.learners = max(0, learners)
        self.limits, self.memory_limit = (limits or sandbox.Limits()).sharing(self.ready), memory_limit_mb << 20
        self.own = owned(name)
        self.profile = self.base_dir / "office" / self.own
        self.job_dir = self.base_dir / "work" / self.own  # the sandbox's /job: empty, files come as descriptors
        self.tasks_dir = self.base_dir / "tasks" / self.own
        self.process: subprocess.Popen[bytes] | None = None
        self.starts, self.children = 0, 0
        self.timings: dict[str, float] = {}  # seconds of its last start: "launch", "self_test"
        self.pages: dict[str, int] = {}  # of its last start: "learners", the pages a child "copied" and "grown"
        self.broken: str | None = None  # why the last start gave up, while it stands
        self.room = sandbox.Room()  # its children's memory: a retry after an OOM kill runs alone
        self.watch = memory.Watch(name)  # and the service's limit: a child grown into it is killed first
        self.jobs: dict[str, Job] = {}  # task id -> its child at work (``cancel``)
        self._control: socket.socket | None = None
        self._lock = threading.Lock()  # a start
        self._send = threading.Lock()  # the control socket
        # bubblewrap's --die-with-parent follows the thread that started it, not the process: a parent started by a
        # worker thread that ends (a node's, a test's) died with it. Every start runs on this thread of its own,
        # which lives until ``close``.
        self._launches: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = queue.SimpleQueue()
        self._launcher: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ended(self, within: float) -> bool:
        """Whether the parent has died, given ``within`` seconds to show it (its child at work dies in the sandbox's
        teardown, a moment before the parent's bubblewrap ends)."""
        try:
            return self.process is None or self.process.wait(within) is not None
        except subprocess.TimeoutExpired:
            return False

    @property
    def restarts(self) -> int:
        """How often the parent was started again (it died, or was killed)."""
        return max(0, self.starts - 1)

    def start(self) -> None:
        """Have a parent running and self-tested; raise EngineBroken after ``START_ATTEMPTS`` failures in a row."""
        with self._lock:
            if self.running:
                return
            self.stop()  # what is left of a parent that died: its control socket
            for attempt in range(1, START_ATTEMPTS + 1):
                try:
                    self._launch()
                    break
                except OfficeCrashed as error:
                    failure = error
                    self.stop()
                    log.warning("%s: LibreOffice failed to start (%d of %d): %s", self.name, attempt,
                                START_ATTEMPTS, error)
            else:
                self.broken = str(failure)
                self._report("broken", self.broken)
                raise EngineBroken(f"LibreOffice failed {START_ATTEMPTS} starts in a row: {failure}")
            self.broken = None
            self._report("ok", None)

    def _launch(self) -> None:
        began = time.monotonic()
        self._prepare()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._control = ours  # closed by ``stop`` whatever happens next
        # above the descriptors the sandbox's wrapper uses (3 to 5, 10): the number the parent is told
        passed = fcntl.fcntl(theirs.fileno(), fcntl.F_DUPFD_CLOEXEC, CONTROL_FD)
        theirs.close()
        env = {"HOME": "/profile/home" if self.sandboxed else str(self.profile / "home"),
               "TMPDIR": "/profile/tmp" if self.sandboxed else str(self.profile / "tmp"),
               "SAL_USE_VCLPLUGIN": "svp", "MAX_CONCURRENCY": str(sandbox.POOL_THREADS)}
        if self.sandboxed:
            argv = sandbox.command(self.job_dir, self.profile, PARENT.parent,
                                   [UNO_PYTHON, f"{sandbox.CODE}/{PARENT.name}", Path(sandbox.PROFILE).as_uri(),
                                    str(passed), str(self.ready), str(self.learners)], env, self.limits)
            env = {}
        else:
            log.warning("%s: LibreOffice runs without its sandbox (DOCSHIFT_SANDBOX=off)", self.name)
            argv = network_namespace() + [UNO_PYTHON, str(PARENT), self.profile.as_uri(), str(passed),
                                          str(self.ready), str(self.learners)]
            env.update(PATH="/usr/bin:/bin", LANG="C.UTF-8")
        # the worker's environment (secret key, S3 and AWS credentials) stays out either way
        try:
            self.process = self._on_launcher(lambda: subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                cwd="/", start_new_session=True, preexec_fn=self._limit, pass_fds=(passed,)))
        finally:
            # the sandbox's copy is the only one left: a parent that dies is an end of file at once, not a
            # wait of START_TIMEOUT for an answer that cannot come
            os.close(passed)
        self.starts += 1
        threading.Thread(target=log_lines, args=(self.process.stdout, self.name, None), daemon=True,
                         name=f"{self.name}-messages").start()
        ready = self._ready(ours)
        launched = time.monotonic()
        answer = self.job({"selftest": "selftest", "kinds": formats.self_test_kinds()}, [],
                          SELF_TEST_TIMEOUT).answer(SELF_TEST_TIMEOUT)
        if not answer.get("ok"):
            raise OfficeCrashed(f"the self-test failed: {answer.get('detail', answer)}")
        self.timings = {"launch": launched - began, "self_test": time.monotonic() - launched}
        self.pages = {what: int(answer.get("pages", {}).get(what, 0))
                      for what in ("learners", "copied", "grown")}
        log.info("%s started %s in %.2f s, self-test %.2f s (parent pid %s in the sandbox); from %d learners, each "
                 "child copies %d pages and grows its heap by %d before its file", self.name,
                 "in its sandbox" if self.sandboxed else "WITHOUT a sandbox", self.timings["launch"],
                 self.timings["self_test"], ready.get("pid"), *self.pages.values())

    def _ready(self, control: socket.socket) -> dict[str, Any]:
        if not select.select([control], [], [], START_TIMEOUT)[0]:
            raise OfficeCrashed("LibreOffice did not start")
        try:
            message = control.recv(4096)
            ready = json.loads(message) if message else None
        except (OSError, ValueError) as error:
            raise OfficeCrashed(f"LibreOffice did not start: {error}") from None
        if ready is None:  # the parent ended: its exit status says more than an empty answer
            try:
                status = self.process.wait(STATUS_WAIT) if self.process is not None else None
            except subprocess.TimeoutExpired:
                status = None
            raise OfficeCrashed(f"LibreOffice ended before it was ready (exit status {status}; its own messages "
                                "are in the log)")
        if not isinstance(ready, dict) or not ready.get("ready"):
            raise OfficeCrashed(f"LibreOffice did not start: {ready}")
        return ready

    def _prepare(self) -> None:
        """A fresh profile seed (LibreOffice's home and temp dir, its settings; the sandbox gets an in-memory
        copy), and an empty job dir."""
        for path in (self.profile, self.job_dir):
            shutil.rmtree(path, ignore_errors=True)
        for path in (self.profile / "user", self.profile / "home", self.profile / "tmp", self.job_dir):
            path.mkdir(parents=True, exist_ok=True)
        (self.profile / "user" / "registrymodifications.xcu").write_text(with_version(self.profile_settings))

    def _limit(self) -> None:
        """In the child process, before bubblewrap: the memory cap, the OOM killer's first choice, and nice 10
        (conversions yield the CPU to the API)."""
        resource.setrlimit(resource.RLIMIT_AS, (self.memory_limit, self.memory_limit))
        with open("/proc/self/oom_score_adj", "w") as score:
            score.write(str(OOM_SCORE_ADJ))
        os.nice(10)

    def _report(self, state: str, detail: str | None) -> None:
        if self.on_start is not None:
            self.on_start(state, detail)

    def job(self, request: dict[str, Any], files: list[int], timeout: float, task_id: str | None = None) -> Job:
        """A child forked for ``request``, given ``files`` (the source's and the result's descriptors); killed by
        the parent ``timeout`` seconds from now. Raises OfficeCrashed when the parent cannot be reached."""
        ours, theirs = socket.socketpair()
        messages, told = os.pipe()
        with self._send:
            self.children += 1
            tag = self.children % 10000  # the child's name ends with it (``cancel``)
        try:
            message = json.dumps({**request, "seconds": timeout, "tag": tag}).encode()
            with self._send:
                if self._control is None:
                    raise OfficeCrashed("LibreOffice is not running")
                socket.send_fds(self._control, [message], [theirs.fileno(), told, *files])
        except OSError as error:
            ours.close()
            os.close(messages)
            raise OfficeCrashed(f"LibreOffice's parent is gone: {error}") from error
        finally:
            theirs.close()
            os.close(told)
        self.watch.busy(self.process.pid if self.process is not None else None)
        job = Job(ours, messages, f"{self.name}-child", task_id, tag, on_close=lambda: self._ended(task_id))
        if task_id is not None:
            with self._send:
                self.jobs[task_id] = job
        return job

    def _ended(self, task_id: str | None) -> None:
        self.watch.idle()
        if task_id is not None:
            with self._send:
                self.jobs.pop(task_id, None)

    def cancel(self, task_id: str) -> bool:
        """Kill the child at work on ``task_id``'s file, if it runs here: its ``export`` raises Preempted."""
        with self._send:
            job = self.jobs.get(task_id)
        if job is None or self.process is None:
            return False
        named = f"{memory.AT_WORK}{job.tag}"[:15]
        for pid in memory.descendants(self.process.pid):
            if memory.name(pid) == named:
                job.cancelled = True
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                return True
        return False

    def oom_kills(self) -> int | None:
        """How many of its children were killed for the service's memory limit: by the kernel's OOM killer (in
        this process's memory cgroup) or by its own watch before that (``memory.py``); None where the cgroup's
        count cannot be read."""
        return self.watch.oom_kills()

    def export(self, source: str | Path, target: str | Path, export_filter: str, timeout: float,
               task_id: str | None = None, parts: bool | Callable[[], bool] = True,
               password: str | None = None, sent: Callable[[], object] | None = None,
               crashed: bool = False, shadows: bool | Callable[[], bool] = False) -> dict[str, Any]:
        """A fresh child of LibreOffice loads ``source`` and exports it into ``target``; returns what it found in the
        document (its embedded objects and charts only if ``parts``). ``parts`` may be a function, asked once
        LibreOffice has loaded the file: the worker decides from what it reads of the source meanwhile; so may
        ``shadows``, whether to read a presentation's shadowed text (``uno/shadows.py``).
        ``password``: the Password load property of a protected source. ``sent()`` is called once the child has
        the file. ``crashed``: a child crashed on this file before, and this one works around what is known to
        crash LibreOffice: it loads a text with no view, so no layout (``uno/bridge.py``), and gives each master of
        a presentation a theme of its own (``uno/masters.py``)."""
        if not self.running:
            self.start()
        request = {"name": Path(source).name, "target_name": Path(target).name, "filter": export_filter,
                   "password": password, "parts": parts if isinstance(parts, bool) else "ask", "crashed": crashed,
                   "shadows": shadows if isinstance(shadows, bool) else "ask"}
        began = time.monotonic()
        with open(source, "rb") as given, \
                open(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600), "wb") as result:
            job = self.job(request, [given.fileno(), result.fileno()], timeout, task_id)
        if sent is not None:
            sent()
        try:
            answer = job.read(timeout + GRACE_SECONDS)
            if "loaded" in answer:  # it waits to hear whether to walk
                job.send({"parts": _decided(parts), "shadows": _decided(shadows)})
                answer = job.read(began + timeout + GRACE_SECONDS - time.monotonic())
            if not answer.get("ok"):
                # a file that failed may have filled the sandbox's scratch space, which LibreOffice's files hold
                # until its child has ended: the retry, or the next file, gets the room
                job.wait_end(GRACE_SECONDS)
        except OfficeCrashed:
            if job.cancelled:
                raise Preempted() from None
            if time.monotonic() - began >= timeout:  # the parent killed it at its deadline
                raise OfficeTimeout() from None
            raise
        finally:
            job.close()
        if answer.get("error") == "crashed":
            raise OfficeCrashed(answer.get("detail", ""))
        if not answer.get("ok"):
            raise LoadFailed(answer.get("detail", ""), answer.get("error") == "store_failed", bool(answer.get("full")))
        return answer.get("facts", {})

    def stop(self) -> None:
        """Stop the parent and its children (the sandbox's PID namespace goes with its bubblewrap)."""
        process, self.process = self.process, None
        if self._control is not None:
            self._control.close()
            self._control = None
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def close(self) -> None:
        with self._lock:
            self.stop()
            if self._launcher is not None:
                self._launches.put(None)
                self._launcher.join()
                self._launcher = None
        for path in (self.profile, self.job_dir, self.tasks_dir):
            shutil.rmtree(path, ignore_errors=True)

    def _on_launcher(self, start: Callable[[], Any]) -> Any:
        """``start()`` run on the launcher thread (made the first time), and what it returned or raised."""
        if self._launcher is None:
            self._launcher = threading.Thread(target=self._launch_loop, daemon=True, name=f"{self.name}-launcher")
            self._launcher.start()
        done: Future[Any] = Future()
        self._launches.put((start, done))
        return done.result()

    def _launch_loop(self) -> None:
        while (asked := self._launches.get()) is not None:
            start, done = asked
            try:
                done.set_result(start())
            except BaseException as error:
                done.set_exception(error)


def _decided(walk: bool | Callable[[], bool]) -> bool:
    """What ``walk`` (or ``walk()``) says; True (walk) when it fails: whoever made it hears of that from its own
    reading."""
    try:
        return walk if isinstance(walk, bool) else bool(walk())
    except Exception:
        return True
