"""A warm LibreOffice per worker thread: started, watched, recycled, killed.

Each ``Office`` owns one ``bridge.py`` process and its ``soffice``, with a
throwaway profile, one conversion at a time. It is restarted after
``OFFICE_MAX_CONVERSIONS`` conversions, after a crash and after a timeout (a
timeout kills only this process group). Where the system allows it, the pair
runs in a network namespace of its own with no network at all, so a document
can fetch nothing; the profile also turns macros off, and an address-space
limit caps its memory.
"""

import json
import logging
import os
import resource
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from docshift.errors import LoadFailed, OfficeCrashed, OfficeTimeout

log = logging.getLogger("docshift.office")

BRIDGE = Path(__file__).resolve().parent / "bridge.py"
# LibreOffice's Python: Debian's python3 with python3-uno
UNO_PYTHON = "/usr/bin/python3"
START_TIMEOUT = 60

PROFILE_SETTINGS = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema"
           xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="MacroSecurityLevel" oor:op="fuse"><value>3</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="DisableMacrosExecution" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="BlockUntrustedRefererLinks" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="UseOpenCL" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="FirstRun" oor:op="fuse"><value>false</value></prop></item>
</oor:items>
"""


# as root; else through an unprivileged user namespace, where the kernel allows one (Debian does)
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
    def __init__(self, base_dir, max_conversions=200, memory_limit_mb=8192, name="office"):
        self.base_dir = Path(base_dir)
        self.max_conversions = max_conversions
        self.memory_limit = memory_limit_mb * 1024 * 1024
        self.name = name
        self.process = None
        self.profile = None
        self.conversions = 0
        self.starts = 0
        self.busy = False
        self.task_id = None  # the task being converted, for the tags of LibreOffice's messages

    # lifecycle

    def start(self):
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.profile = Path(tempfile.mkdtemp(prefix=f"{self.name}-", dir=self.base_dir))
        (self.profile / "user").mkdir()
        (self.profile / "user" / "registrymodifications.xcu").write_text(PROFILE_SETTINGS)
        pipe = f"docshift-{os.getpid()}-{self.profile.name}"
        argv = network_namespace() + [UNO_PYTHON, str(BRIDGE), self.profile.as_uri(), pipe]
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, preexec_fn=self._limit_memory, text=True, bufsize=1)
        threading.Thread(target=self._log_messages, args=(self.process.stderr,), daemon=True,
                         name=f"{self.name}-stderr").start()
        try:
            ready = self._read(START_TIMEOUT)
        except (OfficeTimeout, OfficeCrashed):
            self.stop()
            raise OfficeCrashed("LibreOffice did not start")
        self.conversions = 0
        self.starts += 1
        log.info("%s started (bridge pid %s, soffice pid %s)", self.name, self.process.pid, ready["pid"])

    def _log_messages(self, stream):
        """LibreOffice's and the bridge's own messages, to the log with the task they came from."""
        for line in stream:
            line = line.rstrip()
            if line:
                log.info("%s: %s", self.name, line, extra={"task_id": self.task_id})
        stream.close()

    def _limit_memory(self):
        resource.setrlimit(resource.RLIMIT_AS, (self.memory_limit, self.memory_limit))
        # conversions yield the CPU to the API: polls stay fast while LibreOffice works
        os.nice(10)

    def stop(self):
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.process.wait()
            self.process.stdin.close()
            self.process.stdout.close()
            self.process = None
        if self.profile is not None:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None

    def restart(self):
        self.stop()
        self.start()

    @property
    def restarts(self):
        """How often this Office replaced its LibreOffice (recycling, crashes, timeouts)."""
        return max(0, self.starts - 1)

    @property
    def running(self):
        return self.process is not None and self.process.poll() is None

    # work

    def convert(self, source, target, export_filter, timeout, task_id=None):
        """Convert ``source`` into ``target``; returns what LibreOffice found in the document."""
        self.task_id = task_id
        if not self.running:
            self.stop()  # after a crash, the remains of the old process
            self.start()
        request = {"source": str(source), "target": str(target), "filter": export_filter}
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            self.stop()
            raise OfficeCrashed(str(error)) from error
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
            self.restart()  # LibreOffice never gives memory back; a fresh one does
        return answer.get("facts", {})

    def _read(self, timeout):
        deadline = time.monotonic() + timeout
        stdout = self.process.stdout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise OfficeTimeout()
            ready, _, _ = select.select([stdout], [], [], remaining)
            if ready:
                line = stdout.readline()
                if not line:
                    raise OfficeCrashed("the bridge exited")
                return json.loads(line)

    def office_pid(self):
        """The pid of this Office's ``soffice.bin`` (the process that does the work), or None."""
        if self.process is None:
            return None
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            command = stat[stat.index("(") + 1:stat.rindex(")")]
            pgrp = int(stat[stat.rindex(")") + 2:].split()[2])
            if pgrp == self.process.pid and command.startswith("soffice.bin"):
                return int(entry.name)
        return None
