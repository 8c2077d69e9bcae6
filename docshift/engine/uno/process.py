"""How the bridge's LibreOffice lives and dies; run by ``bridge.py`` under LibreOffice's Python.

It starts ``soffice.bin`` on a fresh profile marked with its build, and waits until it listens; it gives the
sandbox's session the nice value the worker gave the bridge; it kills the whole process group when the bridge
ends, when LibreOffice ends, or when the worker that started it goes.
"""

import functools
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import uno
from com.sun.star.connection import NoConnectException

RESTART = 81  # LibreOffice's exit code that asks its launcher to start it again (a profile it has just set up)


def start(profile, pipe):
    """``soffice.bin`` started on ``profile`` (a URL), listening on ``pipe``, and the component context it
    answers with. Not the ``soffice`` script: its launcher (oosplash) adds nothing here but a Java lookup
    (javaldx) on every start. The one thing that launcher does that matters, starting LibreOffice again when it
    exits asking for that (``RESTART``), is done here."""
    program = os.path.join(os.path.dirname(os.path.realpath(shutil.which("soffice"))), "soffice.bin")
    mark_build(uno.fileUrlToSystemPath(profile), os.path.dirname(program))
    argv = [program, "--headless", "--invisible", "--nologo", "--norestore", "--nodefault", "--nolockcheck",
            "--nofirststartwizard", f"-env:UserInstallation={profile}",
            f"--accept=pipe,name={pipe};urp;StarOffice.ComponentContext"]
    launch = functools.partial(subprocess.Popen, argv, stdin=subprocess.DEVNULL, stdout=sys.stderr, stderr=sys.stderr)
    soffice = launch()
    local = uno.getComponentContext()
    resolver = local.ServiceManager.createInstanceWithContext("com.sun.star.bridge.UnoUrlResolver", local)
    deadline, restarts = time.monotonic() + 60, 0
    while True:
        try:
            context = resolver.resolve(f"uno:pipe,name={pipe};urp;StarOffice.ComponentContext")
            break
        except NoConnectException:
            if soffice.poll() == RESTART and restarts < 3:
                restarts += 1
                soffice = launch()
            elif soffice.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.02)  # LibreOffice listens 0.3 s after it starts: a finer poll answers sooner
    return soffice, context


def mark_build(profile, program_dir):
    """Write the build id of this LibreOffice into the fresh ``profile``, as LibreOffice's first run in a profile
    does before it exits to be started again (``RESTART``): that second start cost every start 0.1 s of CPU."""
    try:
        with open(os.path.join(program_dir, "versionrc"), encoding="utf-8") as versionrc:
            build = next(line.split("=", 1)[1].strip() for line in versionrc if line.startswith("buildid="))
        os.makedirs(os.path.join(profile, "user", "extensions"), exist_ok=True)
        with open(os.path.join(profile, "user", "extensions", "buildid"), "w", encoding="utf-8") as marked:
            marked.write(build)
    except (OSError, StopIteration):  # LibreOffice then marks it itself, and asks to be started again
        pass


def end_group():
    """Kill this process group: soffice.bin and whatever it started. This process goes with it."""
    # kill(0): the caller's own group. In the sandbox the group's leader lies outside this PID namespace, and
    # killpg(getpgrp()) finds no such group (ESRCH): the bridge lived on, and so did LibreOffice
    os.kill(0, signal.SIGKILL)


def watch_soffice(soffice):
    """LibreOffice ended (crashed, killed) while the bridge lives: the bridge ends too, so that the worker sees
    it gone before it hands it work. An idle one (a spare, an account's) would otherwise wait as if running."""
    soffice.wait()
    end_group()


def watch_parent(parent):
    # the worker that started us died (even mid-conversion): nothing may outlive it
    while os.getppid() == parent:
        time.sleep(1)
    end_group()


def yield_the_cpu(nice=None):
    """Give this session's autogroup the nice value the supervisor gave us (10), or ``nice``.

    With the kernel's autogroup scheduling (Debian's default), CPU time is shared first between
    sessions and only then by nice value inside each; the sandbox starts a session of its own, so
    LibreOffice's nice 10 alone would still weigh as much as the whole API. Raising the group's
    nice needs no privilege, nor does lowering it back to any value from 0 up, but the kernel takes
    one such change per 0.1 s from the unprivileged (EAGAIN): the other Offices start at the same
    moment. Without autogroups the file is missing and nice already works (a spare then starts at
    the same priority as the converting LibreOffices)."""
    for _ in range(50):
        try:
            with open("/proc/self/autogroup", "w") as autogroup:
                autogroup.write(str(os.nice(0) if nice is None else nice))
            return
        except BlockingIOError:
            time.sleep(0.05 + random.random() * 0.1)
        except OSError:
            return
