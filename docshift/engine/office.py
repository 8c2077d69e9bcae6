"""A warm LibreOffice per worker thread: started, self-tested, watched, recycled, killed.

Each ``Office`` owns one ``bridge.py`` process and its ``soffice``, with a
throwaway profile, one conversion at a time, shut in the bubblewrap sandbox of
``sandbox.py`` (or, with ``DOCSHIFT_SANDBOX=off``, only in a network namespace
where one can be made). It owns one job directory, bound into the sandbox as
``/job``, where each conversion gets a copy of its source and an empty target
(``jobfiles.py``); a task keeps its own files in ``office.tasks_dir``, which the
sandbox never sees. Every
start converts a tiny .doc, .xls and .ppt first (``selftest.py``); a
LibreOffice that fails is replaced, and after ``START_ATTEMPTS`` failures in a
row the Office reports itself broken. It is restarted after
``OFFICE_MAX_CONVERSIONS`` conversions, after a crash and after a timeout (a
timeout kills only this process group). The profile turns macros off, and an
address-space limit caps its memory. LibreOffice runs at nice 10, its session's
autogroup too (``bridge.yield_the_cpu``), so the API keeps the CPU it needs.

bubblewrap's ``--die-with-parent`` is tied to the thread that started it: an
Office must be started, and restarted, by a thread that lives as long as it
(the worker's consumer threads do), or LibreOffice dies when that thread ends.
"""

import contextlib
import glob
import itertools
import json
import logging
import os
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from docshift import formats
from docshift.engine import jobfiles, sandbox
from docshift.errors import EngineBroken, LoadFailed, OfficeCrashed, OfficeTimeout

log = logging.getLogger("docshift.office")

BRIDGE = Path(__file__).resolve().parent / "bridge.py"
# LibreOffice's Python: Debian's python3 with python3-uno
UNO_PYTHON = "/usr/bin/python3"
START_TIMEOUT = 60
SELF_TEST_TIMEOUT = 60
# a LibreOffice that fails its self-test this many times in a row is reported broken
START_ATTEMPTS = 3
# LibreOffice's standing with the kernel's OOM killer: above the worker's (0), so it goes first
OOM_SCORE_ADJ = 500
# the longest reply line the bridge may send (its facts: sheet names, characters counted)
MAX_REPLY_BYTES = 8 << 20
HOST = socket.gethostname()

# No DisableActiveContent: LibreOffice then drops every embedded object and chart on load. Linked
# content stays out without it: links are never updated (UpdateDocMode on load, the Link settings
# below), and what LibreOffice would still fetch to show a linked picture cannot be reached from the
# sandbox, which has no network and sees no host file but its job (tests/test_sandbox.py).
PROFILE_SETTINGS = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema"
           xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="MacroSecurityLevel" oor:op="fuse"><value>3</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="DisableMacrosExecution" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="BlockUntrustedRefererLinks" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="UseOpenCL" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="FirstRun" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Writer/Content/Update"><prop oor:name="Link" oor:op="fuse"><value>0</value></prop></item>
<item oor:path="/org.openoffice.Office.Calc/Content/Update"><prop oor:name="Link" oor:op="fuse"><value>1</value></prop></item>
</oor:items>
"""


# the fallback of DOCSHIFT_SANDBOX=off: as root; else through an unprivileged user namespace, where the kernel allows one (Debian does)
NAMESPACE_PREFIXES = (["unshare", "--net", "--"], ["unshare", "--user", "--map-root-user", "--net", "--"])
_netns = None


def network_namespace():
    """The command prefix that puts LibreOffice in a network namespace with no network, or []."""
    global _netns
    if _netns is None:
        _netns = []
        for prefix in NAMESPACE_PREFIXES:
            try:
                if subprocess.run(prefix + ["true"], capture_output=True, timeout=10).returncode == 0:
                    _netns = prefix
                    break
            except (OSError, subprocess.TimeoutExpired):
                continue
        if not _netns:
            log.warning("no network namespace can be made here: LibreOffice runs with the host's network")
    return _netns


class Office:
    def __init__(self, base_dir, max_conversions=200, memory_limit_mb=8192, name="office", sandboxed=True,
                 on_start=None, profile_settings=None, spare=False, limits=None):
        """An Office keeping its job dir in ``<base_dir>/work``, its tasks' files in ``<base_dir>/tasks`` and
        the seeds of its LibreOffices' profiles in ``<base_dir>/office``, all named ``<host>.<pid>.<name>`` so
        that ``clear_leftovers`` knows whose they are.
        ``on_start(office, state, detail)`` hears of every start: "ok", or "broken" and why.
        ``profile_settings`` replaces ``PROFILE_SETTINGS`` (the tests show what another profile would lose).
        ``spare``: keep a second LibreOffice started and self-tested in the background, so that a new tenant
        or a recycling takes over a fresh process at once instead of waiting for one to start.
        ``limits`` (``sandbox.Limits``) caps what the sandbox may use besides memory."""
        self.base_dir = Path(base_dir)
        self.max_conversions = max_conversions
        self.memory_limit = memory_limit_mb * 1024 * 1024
        self.name = name
        self.sandboxed = sandboxed
        self.on_start = on_start
        self.profile_settings = profile_settings or PROFILE_SETTINGS
        self.limits = limits or sandbox.Limits()
        own = f"{HOST}.{os.getpid()}.{re.sub(r'[^A-Za-z0-9_-]', '_', name)}"
        self.job_dir = self.base_dir / "work" / own
        self.profile = self.base_dir / "office" / own
        self.own_profile = self.profile  # the name every profile of this Office starts with
        self.tasks_dir = self.base_dir / "tasks" / own
        self.process = None
        self.conversions = 0
        self.starts = 0
        self._generations = itertools.count(1)  # numbers the profiles and pipes of its LibreOffices
        self.busy = False
        self.task_id = None  # the task being converted, for the tags of LibreOffice's messages
        self.tenant = None  # the account whose files the running LibreOffice has seen
        self.broken = None  # why the last start gave up, while it stands
        self.timings = {}  # seconds of the last start: "launch", "self_test"
        self.spare = spare
        self._spare = None  # a started, self-tested LibreOffice that has seen no document: _Started
        self._spare_lock = threading.Lock()
        self._spare_wanted = threading.Event()
        self._keeper = None
        self._closing = False

    # lifecycle

    def start(self):
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
        if self.spare and self._keeper is None:
            # bubblewrap's --die-with-parent follows the thread that starts it: spares come from one that
            # lives as long as this Office
            self._keeper = threading.Thread(target=self._keep_spare, daemon=True, name=f"{self.name}-spare")
            self._keeper.start()
            self._spare_wanted.set()

    def _adopt(self, started):
        """Make ``started`` this Office's LibreOffice: it has seen no document and belongs to no tenant yet."""
        self.process, self.profile, self.timings = started.process, started.profile, started.timings
        self.conversions = 0
        self.starts += 1
        self.tenant = None
        self.broken = None
        self._report("ok", None)

    def _launch(self):
        """A LibreOffice with a fresh profile of its own, started and self-tested: a :class:`_Started`."""
        began = time.monotonic()
        generation = next(self._generations)  # the spare keeper launches too
        profile = self.own_profile.with_name(f"{self.own_profile.name}.{generation}")
        self._prepare(profile)
        pipe = f"docshift-{os.getpid()}-{self.name}-{generation}"
        env = {"HOME": self.inside(profile / "home", profile), "TMPDIR": self.inside(profile / "tmp", profile)}
        if self.sandboxed:
            argv = sandbox.command(self.job_dir, profile, BRIDGE.parent,
                                   [UNO_PYTHON, f"{sandbox.CODE}/{BRIDGE.name}", Path(sandbox.PROFILE).as_uri(),
                                    pipe], env, self.limits)
            env = {}
        else:
            log.warning("%s: LibreOffice runs without its sandbox (DOCSHIFT_SANDBOX=off)", self.name)
            argv = network_namespace() + [UNO_PYTHON, str(BRIDGE), profile.as_uri(), pipe]
            env.update(PATH="/usr/bin:/bin", LANG="C.UTF-8")
        # the worker's environment (secret key, S3 and AWS credentials) stays out either way
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd="/",
            start_new_session=True, preexec_fn=self._limit_memory, text=True, bufsize=1)
        started = _Started(process, profile)
        threading.Thread(target=self._log_messages, args=(process.stderr,), daemon=True,
                         name=f"{self.name}-stderr").start()
        try:
            try:
                ready = self._read(START_TIMEOUT, process)
            except (OfficeTimeout, OfficeCrashed):
                raise OfficeCrashed("LibreOffice did not start")
            if not ready.get("ready"):
                raise OfficeCrashed(f"LibreOffice did not start: {ready.get('detail', ready)}")
            launched = time.monotonic()
            test_dir = profile / "tmp" / "selftest"  # the sandbox's own, in memory
            self._send({"selftest": self.inside(test_dir, profile), "kinds": formats.self_test_kinds()}, process)
            try:
                answer = self._read(SELF_TEST_TIMEOUT, process)
            except OfficeTimeout:
                raise OfficeCrashed("the self-test took too long")
            finally:
                shutil.rmtree(test_dir, ignore_errors=True)
            if not answer.get("ok"):
                raise OfficeCrashed(f"the self-test failed: {answer.get('detail', answer)}")
        except BaseException:
            started.kill()
            raise
        started.timings = {"launch": launched - began, "self_test": time.monotonic() - launched}
        log.info("%s started %s in %.2f s, self-test %.2f s (soffice pid %s)", self.name,
                 "in its sandbox" if self.sandboxed else "WITHOUT a sandbox", started.timings["launch"],
                 started.timings["self_test"], ready["pid"])
        return started

    def _prepare(self, profile):
        """A fresh profile seed (LibreOffice's home and temp dir, its settings; the sandbox gets an in-memory
        copy) and the job dir."""
        shutil.rmtree(profile, ignore_errors=True)
        for path in (profile / "user", profile / "home", profile / "tmp"):
            path.mkdir(parents=True, exist_ok=True)
        (profile / "user" / "registrymodifications.xcu").write_text(self.profile_settings)
        jobfiles.prepare(self.job_dir)

    def _keep_spare(self):
        """The spare keeper: whenever the spare was taken, start another (the lifetime of this thread is theirs)."""
        delay = 1.0
        while True:
            self._spare_wanted.wait()
            self._spare_wanted.clear()
            if self._closing:
                return
            try:
                started = self._launch()
                delay = 1.0
            except OfficeCrashed as error:
                log.warning("%s: no spare LibreOffice: %s", self.name, error)
                time.sleep(delay)
                delay = min(delay * 2, 60)
                self._spare_wanted.set()
                continue
            with self._spare_lock:
                if self._spare is None and not self._closing:
                    self._spare, started = started, None
            if started is not None:
                started.kill()

    def _take_spare(self):
        with self._spare_lock:
            spare, self._spare = self._spare, None
        if spare is not None and spare.process.poll() is None:
            self._spare_wanted.set()
            return spare
        if spare is not None:
            spare.kill()
        return None

    def _report(self, state, detail):
        if self.on_start is not None:
            try:
                self.on_start(self, state, detail)
            except Exception as error:  # a report that cannot be recorded must not stop the engine
                log.warning("%s: could not report its state %s: %r", self.name, state, error)

    def _log_messages(self, stream):
        """LibreOffice's and the bridge's own messages, to the log with the task they came from."""
        for line in stream:
            line = line.rstrip()
            if line:
                log.info("%s: %s", self.name, line, extra={"task_id": self.task_id})
        stream.close()

    def _limit_memory(self):
        resource.setrlimit(resource.RLIMIT_AS, (self.memory_limit, self.memory_limit))
        # out of memory in the worker's unit (MemoryMax), the kernel kills a LibreOffice, not the worker
        with open("/proc/self/oom_score_adj", "w") as score:
            score.write(str(OOM_SCORE_ADJ))
        # conversions yield the CPU to the API: polls stay fast while LibreOffice works
        os.nice(10)

    def stop(self):
        """Kill this Office's LibreOffice and remove its profile (the spare stays)."""
        if self.process is not None:
            _Started(self.process, self.profile).kill()
            self.process = None
        shutil.rmtree(self.profile, ignore_errors=True)

    def close(self):
        """Stop LibreOffice and its spare and remove this Office's job and tasks dirs: the worker is going away."""
        self._closing = True
        self._spare_wanted.set()
        with self._spare_lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            spare.kill()
        self.stop()
        shutil.rmtree(self.job_dir, ignore_errors=True)
        shutil.rmtree(self.tasks_dir, ignore_errors=True)

    def restart(self):
        """A fresh LibreOffice in place of this one: the spare when one is ready, else a new start."""
        self.stop()
        spare = self._take_spare() if self.spare else None
        if spare is not None:
            self._adopt(spare)
        else:
            self.start()

    def take(self, tenant):
        """Ready this Office for a task of ``tenant`` (an account id): a LibreOffice that has converted a file
        of another account never converts one of this account's, so it is replaced first. The job dir is
        emptied: nothing of an earlier task, or that LibreOffice left there, is seen by this one."""
        if self.tenant is not None and self.tenant != tenant and self.process is not None:
            log.info("%s: a new tenant, a fresh LibreOffice", self.name)
            self.restart()
        if self.job_dir.exists():
            for entry in list(self.job_dir.iterdir()):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
        self.tenant = tenant

    @property
    def restarts(self):
        """How often this Office replaced its LibreOffice (recycling, crashes, timeouts)."""
        return max(0, self.starts - 1)

    @property
    def running(self):
        return self.process is not None and self.process.poll() is None

    # work

    def inside(self, path, profile=None):
        """``path`` as LibreOffice sees it: under ``/job`` or ``/profile`` (``profile``, the running one's if
        None) in the sandbox."""
        path = Path(path)
        if self.sandboxed:
            for host, jailed in ((self.job_dir, sandbox.JOB), (profile or self.profile, sandbox.PROFILE)):
                if path.is_relative_to(host):
                    return str(Path(jailed) / path.relative_to(host))
        return str(path)

    def convert(self, source, target, export_filter, timeout, task_id=None):
        """Convert ``source`` into ``target``; returns what LibreOffice found in the document.

        Both are the worker's own paths: the sandbox gets copies staged in ``job_dir``."""
        self.task_id = task_id
        if not self.running:
            self.restart()  # after a crash, the remains of the old process go
        with self._visible(Path(source).resolve(), Path(target).resolve()) as (inner_source, inner_target):
            request = {"source": inner_source, "target": inner_target, "filter": export_filter}
            try:
                self._send(request)
            except OfficeCrashed:
                self.stop()
                raise
            self.busy = True
            try:
                answer = self._read(timeout)
            except (OfficeTimeout, OfficeCrashed):
                self.stop()
                raise
            finally:
                self.busy = False
        self.conversions += 1
        if answer.get("error") == "crashed":
            self.stop()
            raise OfficeCrashed(answer.get("detail", ""))
        if not answer["ok"]:
            # a file LibreOffice choked on may have left it in a state that fails the next one
            self.stop()
            raise LoadFailed(answer.get("detail", ""))
        if self.conversions >= self.max_conversions:
            self._recycle()
        return answer.get("facts", {})

    def _recycle(self):
        """A fresh LibreOffice (it never gives memory back). One that fails to start leaves the
        finished conversion be: the next conversion starts one again."""
        try:
            self.restart()
        except (EngineBroken, OSError) as error:
            log.error("%s: LibreOffice not replaced after %d conversions: %s", self.name, self.max_conversions, error)

    @contextlib.contextmanager
    def _visible(self, source, target):
        """Sandbox paths for ``source`` and ``target``: a staged copy of the source and an empty target,
        whose content is copied to ``target`` on the way out (``jobfiles.py``)."""
        if not self.sandboxed:
            yield str(source), str(target)
            return
        with jobfiles.Staging(self.job_dir, source, target.suffix) as staging:
            yield self.inside(staging.source), self.inside(staging.target)
            try:
                staging.take(target)
            except OfficeCrashed:
                self.stop()  # what left that behind will not convert the next file
                raise

    def _send(self, request, process=None):
        process = process or self.process
        try:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise OfficeCrashed(str(error)) from error

    def _read(self, timeout, process=None):
        """The bridge's next reply: one JSON object on one line, within ``timeout`` seconds and
        ``MAX_REPLY_BYTES``; raises OfficeTimeout, or OfficeCrashed for anything else it says."""
        deadline = time.monotonic() + timeout
        # the raw pipe, never its buffered reader: a reply is read only as far as it goes
        stdout = (process or self.process).stdout.fileno()
        line = bytearray()
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise OfficeTimeout()
            ready, _, _ = select.select([stdout], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(stdout, 65536)
            if not chunk:
                raise OfficeCrashed("the bridge exited")
            line += chunk
            if len(line) > MAX_REPLY_BYTES or b"\n" in line[:-1]:
                raise OfficeCrashed("the bridge's reply is too long, or more than one line")
        try:
            reply = json.loads(line)
        except (ValueError, RecursionError) as error:
            raise OfficeCrashed(f"the bridge's reply is no JSON: {error}") from None
        if not isinstance(reply, dict):
            raise OfficeCrashed("the bridge's reply is no JSON object")
        return reply

    def office_pid(self, process=None):
        """The pid of this Office's ``soffice.bin`` (the process that does the work), or of the one
        ``process`` (a bridge) started, or None."""
        process = process or self.process  # read once: a restart in another thread may set it to None meanwhile
        if process is None:
            return None
        children = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            command = stat[stat.index("(") + 1:stat.rindex(")")]
            parent = int(stat[stat.rindex(")") + 2:].split()[1])
            children.setdefault(parent, []).append((int(entry.name), command))
        # the sandbox puts soffice.bin a few generations below the process started here
        generation = [process.pid]
        while generation:
            below = [child for pid in generation for child in children.get(pid, [])]
            for pid, command in below:
                if command.startswith("soffice.bin"):
                    return pid
            generation = [pid for pid, _ in below]
        return None


class _Started:
    """One started LibreOffice (its bridge process) and the profile that is its alone."""

    def __init__(self, process, profile):
        self.process, self.profile, self.timings = process, profile, {}

    def kill(self):
        try:
            # the sandbox's own PID namespace dies with its outer bwrap (--die-with-parent)
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        self.process.stdin.close()
        self.process.stdout.close()
        shutil.rmtree(self.profile, ignore_errors=True)


def clear_leftovers(base_dir):
    """Remove the job, profile and tasks dirs that Offices of dead worker processes on this host left
    in ``base_dir`` (a SIGKILL gives them no chance); call it when a worker process starts."""
    for kind in ("work", "office", "tasks"):
        for path in Path(base_dir, kind).glob(f"{glob.escape(HOST)}.*"):
            pid = path.name[len(HOST) + 1:].split(".", 1)[0]
            # our own pid in a name is a former process's (a container's worker always has the same)
            if pid.isdigit() and (int(pid) == os.getpid() or not alive(int(pid))):
                log.info("removing %s, left by worker process %s", path, pid)
                shutil.rmtree(path, ignore_errors=True)


def alive(pid):
    """Whether process ``pid`` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
