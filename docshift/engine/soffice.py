"""One LibreOffice: its bridge process in the sandbox, the profile and job dir that are its alone.

``Launcher.launch`` starts one and has it pass its self-test (``uno/selftest.py``: a tiny .doc, .xls
and .ppt); a :class:`Soffice` is then one conversion at a time, over one line of JSON each way
(``uno/bridge.py``). Its profile turns macros off, an address-space limit caps its memory, and it runs
at nice 10, its session's autogroup too (``process.yield_the_cpu``), so the API keeps the CPU it needs.
Its job dir is the one host directory its sandbox sees (``/job``): no other LibreOffice sees it.
"""

import contextlib
import functools
import json
import logging
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from docshift import formats
from docshift.engine import jobfiles, sandbox
from docshift.errors import OfficeCrashed, OfficeTimeout

log = logging.getLogger("docshift.office")

# what runs inside the sandbox, under LibreOffice's Python: the only code the sandbox sees
BRIDGE = Path(__file__).resolve().parent / "uno" / "bridge.py"
# LibreOffice's Python: Debian's python3 with python3-uno
UNO_PYTHON = "/usr/bin/python3"
START_TIMEOUT = 60
SELF_TEST_TIMEOUT = 60
# LibreOffice's standing with the kernel's OOM killer: above the worker's (0), so it goes first
OOM_SCORE_ADJ = 500
# the longest reply line the bridge may send (its facts: sheet names, characters counted)
MAX_REPLY_BYTES = 8 << 20
# the longest line of LibreOffice's messages logged (stderr): the rest of a longer one is dropped
MAX_LOG_LINE = 8192

# No DisableActiveContent: LibreOffice then drops every embedded object and chart on load. Linked
# content stays out without it: links are never updated (UpdateDocMode on load, the Link settings
# below), and what LibreOffice would still fetch to show a linked picture cannot be reached from the
# sandbox, which has no network and sees no host file but its job (tests/engine/test_sandbox.py).
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

# A profile that names no earlier version is a first start: LibreOffice then runs its graphics render tests
# and its first-start setup, about 0.7 s of CPU on every start of a fresh profile (launch 1.08 s -> 0.38 s
# with the item, on this machine). Its own registry says which version is installed.
VERSION_ITEM = ('<item oor:path="/org.openoffice.Setup/Product"><prop oor:name="ooSetupLastVersion" oor:op="fuse">'
                '<value>{}</value></prop></item>\n')
REGISTRY_VERSION = re.compile(rb'oor:name="ooSetupVersion"[^<]*<value>([0-9][0-9.]*)</value>')


@functools.cache
def installed_version() -> str | None:
    """The version of the LibreOffice that ``soffice`` on PATH starts, as its registry names it ("25.2"),
    or None when it cannot be read (every start is then a first start: slower, nothing else)."""
    soffice = shutil.which("soffice")
    if soffice is None:
        return None
    registry = Path(os.path.realpath(soffice)).parent.parent / "share" / "registry"
    for xcd in sorted(registry.glob("*.xcd")):
        try:
            found = REGISTRY_VERSION.search(xcd.read_bytes())
        except OSError:
            continue
        if found:
            return found.group(1).decode()
    return None


def with_version(settings: str) -> str:
    """``settings`` (a registrymodifications.xcu) naming the installed LibreOffice as the last one started."""
    version = installed_version()
    if version is None or "ooSetupLastVersion" in settings:
        return settings
    return settings.replace("</oor:items>", VERSION_ITEM.format(version) + "</oor:items>")


# the fallback of DOCSHIFT_SANDBOX=off: as root; else through an unprivileged user namespace, where the kernel allows one (Debian does)
NAMESPACE_PREFIXES = (["unshare", "--net", "--"], ["unshare", "--user", "--map-root-user", "--net", "--"])
_netns: list[str] | None = None


def network_namespace() -> list[str]:
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


class Launcher:
    """How a worker starts its LibreOffices: in the sandbox (or not), with its limits and profile settings.
    The log names the task each LibreOffice message came from (``Soffice.task_id``)."""

    def __init__(self, name: str, sandboxed: bool, limits: sandbox.Limits, memory_limit: int,
                 profile_settings: str) -> None:
        self.name, self.sandboxed, self.limits = name, sandboxed, limits
        self.memory_limit, self.profile_settings = memory_limit, profile_settings
        # {file name: base64} of the legacy files the first self-test made, before that LibreOffice saw any
        # document: the later self-tests load them instead of making them again (``selftest.py`` says why)
        self.samples: dict[str, str] = {}

    def launch(self, profile: Path, job_dir: Path, pipe: str,
               starting: Callable[["Soffice"], object] = lambda soffice: None,
               background: bool = False) -> "Soffice":
        """A LibreOffice with ``profile`` and ``job_dir`` its own (made afresh), started and self-tested:
        a :class:`Soffice`. Raises OfficeCrashed when it does not start or fails its self-test.
        ``starting(soffice)`` hears of it as soon as its process runs (whoever closes may kill it).
        ``background``: no task waits for this one (a spare). It starts at the lowest priority, nice 19 for
        its session, and takes the CPU only where the converting LibreOffices leave it idle; it rises to
        their nice 10 with its first conversion (``process.yield_the_cpu``)."""
        began = time.monotonic()
        self._prepare(profile, job_dir)
        started = Soffice(None, profile, job_dir, self.sandboxed)
        env = {"HOME": started.inside(profile / "home"), "TMPDIR": started.inside(profile / "tmp")}
        priority = ["background"] if background else []
        info = told = None  # bubblewrap's account of the sandbox: which process it is (``sandbox.open_out``)
        try:
            if self.sandboxed:
                info, told = sandbox.info_pipe()
                argv = sandbox.command(job_dir, profile, BRIDGE.parent,
                                       [UNO_PYTHON, f"{sandbox.CODE}/{BRIDGE.name}", Path(sandbox.PROFILE).as_uri(),
                                        pipe, *priority], env, self.limits, info_fd=told)
                env = {}
            else:
                log.warning("%s: LibreOffice runs without its sandbox (DOCSHIFT_SANDBOX=off)", self.name)
                argv = network_namespace() + [UNO_PYTHON, str(BRIDGE), profile.as_uri(), pipe, *priority]
                env.update(PATH="/usr/bin:/bin", LANG="C.UTF-8")
            # the worker's environment (secret key, S3 and AWS credentials) stays out either way
            started.process = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd="/",
                start_new_session=True, preexec_fn=self._limit_memory, text=True, bufsize=1,
                pass_fds=() if told is None else (told,))
            if told is not None:  # bubblewrap's copy is the only one left: its end is the account's
                os.close(told)
                told = None
            starting(started)
            threading.Thread(target=self._log_messages, args=(started,), daemon=True,
                             name=f"{self.name}-stderr").start()
            try:
                ready = started.read(START_TIMEOUT)
            except (OfficeTimeout, OfficeCrashed) as error:
                raise OfficeCrashed("LibreOffice did not start") from error
            if not ready.get("ready"):
                raise OfficeCrashed(f"LibreOffice did not start: {ready.get('detail', ready)}")
            if info is not None:
                try:
                    started.out = sandbox.open_out(info, started.process.pid)
                except OSError as error:
                    raise OfficeCrashed(f"the sandbox's /out cannot be reached: {error}") from error
            launched = time.monotonic()
            test_dir = profile / "tmp" / "selftest"  # the sandbox's own, in memory
            kinds = formats.self_test_kinds()
            samples = self.samples
            started.send({"selftest": started.inside(test_dir), "kinds": kinds, "samples": samples})
            try:
                answer = started.read(SELF_TEST_TIMEOUT)
            except OfficeTimeout as error:
                raise OfficeCrashed("the self-test took too long") from error
            finally:
                shutil.rmtree(test_dir, ignore_errors=True)
            if not answer.get("ok"):
                raise OfficeCrashed(f"the self-test failed: {answer.get('detail', answer)}")
            made = answer.get("samples")
            if not samples and isinstance(made, dict) and sorted(made) == sorted(name for _, _, name, _ in kinds) \
                    and all(isinstance(value, str) for value in made.values()):
                self.samples = made
        except BaseException:
            started.kill()
            raise
        finally:
            for fd in (info, told):
                if fd is not None:
                    os.close(fd)
        started.timings = {"launch": launched - began, "self_test": time.monotonic() - launched}
        log.info("%s started %s in %.2f s, self-test %.2f s (soffice pid %s)", self.name,
                 "in its sandbox" if self.sandboxed else "WITHOUT a sandbox", started.timings["launch"],
                 started.timings["self_test"], ready["pid"])
        return started

    def _prepare(self, profile: Path, job_dir: Path) -> None:
        """A fresh profile seed (LibreOffice's home and temp dir, its settings; the sandbox gets an in-memory
        copy) and a fresh job dir."""
        for path in (profile, job_dir):
            shutil.rmtree(path, ignore_errors=True)
        for path in (profile / "user", profile / "home", profile / "tmp"):
            path.mkdir(parents=True, exist_ok=True)
        (profile / "user" / "registrymodifications.xcu").write_text(with_version(self.profile_settings))
        jobfiles.prepare(job_dir)

    def _log_messages(self, soffice: "Soffice") -> None:
        """LibreOffice's and the bridge's own messages, to the log with the task they came from. A line is read
        only as far as ``MAX_LOG_LINE``: the rest of a longer one is dropped, never held."""
        stream: TextIO = soffice.process.stderr
        raw = stream.buffer  # the text pipe's bytes: the limit is in bytes
        cut = False  # in the rest of a line too long to log
        while chunk := raw.readline(MAX_LOG_LINE):
            if not cut:
                line = chunk.decode("utf-8", "replace").rstrip()
                if line:
                    log.info("%s: %s%s", self.name, line, "" if chunk.endswith(b"\n") else " [cut]",
                             extra={"task_id": soffice.task_id})
            cut = not chunk.endswith(b"\n")
        stream.close()

    def _limit_memory(self) -> None:
        resource.setrlimit(resource.RLIMIT_AS, (self.memory_limit, self.memory_limit))
        # out of memory in the worker's unit (MemoryMax), the kernel kills a LibreOffice, not the worker
        with open("/proc/self/oom_score_adj", "w") as score:
            score.write(str(OOM_SCORE_ADJ))
        # conversions yield the CPU to the API: polls stay fast while LibreOffice works
        os.nice(10)


class Soffice:
    """One started LibreOffice (its bridge process), the profile and job dir that are its alone, and the
    account whose files it has seen (``tenant``: None until its first task)."""

    def __init__(self, process: Any, profile: Path, job_dir: Path, sandboxed: bool = True) -> None:
        # its bridge's subprocess.Popen (text, with pipes) once launched: only a Soffice being made has None
        self.process = process
        self.profile, self.job_dir, self.sandboxed = profile, job_dir, sandboxed
        self.timings: dict[str, float] = {}  # seconds of its start: "launch", "self_test"
        self.tenant: str | None = None
        self.task_id: str | None = None  # the task it converts, for the log
        self.conversions = 0
        self.closing = False  # its bridge answered a conversion and has yet to say it closed the document
        self.idle_since = time.monotonic()
        self._pid: int | None = None  # its soffice.bin's, once found
        self.out: int | None = None  # a descriptor of its sandbox's /out, where LibreOffice stores the results
        self._unread = bytearray()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def inside(self, path: str | Path) -> str:
        """``path`` as this LibreOffice sees it: under ``/job`` or ``/profile`` in the sandbox."""
        path = Path(path)
        if self.sandboxed:
            for host, jailed in ((self.job_dir, sandbox.JOB), (self.profile, sandbox.PROFILE)):
                if path.is_relative_to(host):
                    return str(Path(jailed) / path.relative_to(host))
        return str(path)

    def empty_job_dir(self) -> None:
        """Remove whatever an earlier task left in its job dir, or this LibreOffice in its /out (links are not
        followed)."""
        if self.job_dir.exists():
            for entry in list(self.job_dir.iterdir()):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
        if self.out is not None:
            jobfiles.empty(self.out)

    def send(self, request: dict[str, Any]) -> None:
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise OfficeCrashed(str(error)) from error

    def read(self, timeout: float) -> dict[str, Any]:
        """The bridge's next reply: one JSON object on one line, within ``timeout`` seconds and
        ``MAX_REPLY_BYTES``; raises OfficeTimeout, or OfficeCrashed for anything else it says."""
        deadline = time.monotonic() + timeout
        # the raw pipe, never its buffered reader: a reply is read only as far as it goes
        stdout = self.process.stdout.fileno()
        line = self._unread
        while b"\n" not in line:
            if len(line) > MAX_REPLY_BYTES:
                raise OfficeCrashed("the bridge's reply is too long")
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
        end = line.index(b"\n") + 1
        line, self._unread = line[:end], line[end:]  # the start of its next reply, read along with this one
        if len(line) > MAX_REPLY_BYTES:
            raise OfficeCrashed("the bridge's reply is too long")
        try:
            reply = json.loads(line)
        except (ValueError, RecursionError) as error:
            raise OfficeCrashed(f"the bridge's reply is no JSON: {error}") from None
        if not isinstance(reply, dict):
            raise OfficeCrashed("the bridge's reply is no JSON object")
        return reply

    def settle(self, timeout: float) -> bool:
        """Whether it closed the document of its last conversion (within ``timeout`` seconds if it is
        still at it): only then is it ready for another request."""
        if not self.closing:
            return True
        try:
            said = self.read(timeout)
        except (OfficeTimeout, OfficeCrashed):
            return False
        self.closing = False
        return said.get("closed") is True

    def kill(self) -> None:
        """Kill it (the sandbox's own PID namespace dies with its outer bwrap: --die-with-parent) and remove
        its profile and job dir."""
        if self.process is not None:
            self.signal()
            self.process.wait()
            # a request that a dead bridge did not take is still in the pipe's buffer: closing tries it again
            with contextlib.suppress(OSError):
                self.process.stdin.close()
            self.process.stdout.close()
        shutil.rmtree(self.profile, ignore_errors=True)
        shutil.rmtree(self.job_dir, ignore_errors=True)
        if self.out is not None:  # the last hold on its /out: that memory goes too
            os.close(self.out)
            self.out = None

    def signal(self) -> None:
        """Kill its process group, and nothing else: whoever waits for it tidies up."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def pid(self) -> int | None:
        """The pid of its ``soffice.bin`` (the process that does the work), or None. Found once by a walk of
        ``/proc`` (slow on a busy host), then remembered while that process lives."""
        known = self._pid
        if known is not None and self.running:
            try:
                stat = Path(f"/proc/{known}/stat").read_text()
                if stat[stat.index("(") + 1:].startswith("soffice.bin"):
                    return known
            except (OSError, ValueError):
                pass
        self._pid = self._find_pid()
        return self._pid

    def _find_pid(self) -> int | None:
        process = self.process
        if process is None:
            return None
        children: dict[int, list[tuple[int, str]]] = {}
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
