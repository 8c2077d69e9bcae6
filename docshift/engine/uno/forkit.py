"""The preinitialised LibreOffice that forks a child for every file; run in the sandbox under LibreOffice's Python.

Collabora Online's forkit, here: ``lok_preinit`` loads LibreOffice's libraries, its registry, fonts and filters once,
into this process (about 0.5 s of CPU); every file is then converted by a child forked from it, which starts
LibreOfficeKit (``libreofficekit_hook_2``: 0.01 s, the preloaded state is there already), drives it through pyuno
in its own process (``bridge.py``: no pipe, no URP), answers, and exits with its file. No LibreOffice process ever
sees a second file, whoever's it is: what one document did to LibreOffice's state dies with its child.

The worker (``docshift/engine/forkit.py``) talks to this process over one ``AF_UNIX`` ``SOCK_SEQPACKET`` socket,
inherited as the descriptor named on the command line. It first says ``{"ready": true, "pid": ...}`` there. Each
message it gets is one job: a JSON request with three descriptors, ``SCM_RIGHTS``:

    the job's own socket (the child answers there, one JSON line each, as ``bridge.py`` says),
    the source, open for reading, and the result, open for writing (``{"selftest": ...}`` has neither),
    the write end of a pipe for the child's own messages (its stderr), which the worker logs with the task.

The child is never given a path of the worker's: it reads its source and writes its result through those
descriptors. It is not dumpable (its siblings share its uid; none may read its memory or descriptors through
``/proc``), it has a temp dir of its own, removed when it ends, and it is killed at the request's ``seconds``.
The sandbox's limits (address space, CPU seconds, file size, processes) hold for each child as for this process.
This process never runs a thread of its own: a fork copies the forking thread only.
"""

import ctypes
import json
import os
import random
import select
import shutil
import signal
import socket
import sys
import tempfile
import time

PROGRAM = os.path.dirname(os.path.realpath(shutil.which("soffice") or "/usr/lib/libreoffice/program/soffice"))
PR_SET_DUMPABLE = 4
MAX_REQUEST = 1 << 16


def main():
    profile, control = sys.argv[1], socket.socket(fileno=int(sys.argv[2]))
    yield_the_cpu()  # first: a process that is not dumpable may no longer write its /proc/self/autogroup
    # not dumpable, and its children after it: a child taken over by a document can neither read nor write the
    # memory of this process (``/proc/<pid>/mem``), which every later child is forked from
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    # lok_preinit loads the configuration of the profile this names, not of its own argument (without it the
    # settings of $HOME's default profile were in force: macros and links as LibreOffice's defaults have them)
    os.environ["UserInstallation"] = profile  # noqa: SIM112  (LibreOffice's bootstrap name, as it spells it)
    office = ctypes.CDLL(os.path.join(PROGRAM, "libmergedlo.so"), mode=ctypes.RTLD_GLOBAL)
    office.lok_preinit.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    if office.lok_preinit(PROGRAM.encode(), profile.encode()) != 0:
        control.send(json.dumps({"ready": False, "detail": "lok_preinit failed"}).encode())
        return 1
    preload()
    control.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    children = {}  # pid -> (its deadline, its temp dir)
    try:
        while True:
            now = time.monotonic()
            for pid, (deadline, _) in children.items():
                if deadline <= now:
                    kill(pid)
            wait = min((deadline for deadline, _ in children.values()), default=now + 1) - now
            if select.select([control], [], [], max(0.01, min(wait, 1)))[0]:
                reap(children)  # the temp dirs of the children that ended go before another child starts
                message, fds, _, _ = socket.recv_fds(control, MAX_REQUEST, 4)
                if not message:  # the worker is gone
                    return 0
                try:
                    request = json.loads(message)
                    scratch = tempfile.mkdtemp(prefix="child-")
                except ValueError:
                    request = None
                if request is not None and len(fds) >= 2:
                    pid = os.fork()
                    if pid == 0:
                        control.close()
                        child(office, profile, fds, request, scratch)  # never returns
                    children[pid] = (time.monotonic() + float(request.get("seconds", 60)), scratch)
                for fd in fds:  # the child holds its own copies: the job's end is the child's alone now
                    os.close(fd)
            reap(children)
    finally:
        for pid in children:
            kill(pid)


def preload():
    """What every child's ``import bridge`` would load again, loaded once here: pyuno's library (as ``uno.py`` loads
    it) and the modules ``uno.py`` and ``bridge.py`` import; 10-13 ms of each child's time. pyuno's component
    context is made only in a child, once LibreOfficeKit runs there: made here, it would be a context of its own."""
    sys.path.append(PROGRAM)
    os.environ["URE_BOOTSTRAP"] = f"vnd.sun.star.pathname:{PROGRAM}/fundamentalrc"
    import base64  # noqa: F401
    import collections  # noqa: F401
    import functools  # noqa: F401
    import re  # noqa: F401
    import traceback  # noqa: F401
    import warnings  # noqa: F401

    import pyuno  # noqa: F401


def reap(children):
    """Forget the children that ended, and their temp dirs."""
    while children:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _, scratch = children.pop(pid, (None, None))
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def child(office, profile, fds, request, scratch):
    """Convert what ``request`` says in this fresh process, answer on the job socket, and exit."""
    status = 70
    try:
        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # inherited already; said again where it matters
        os.umask(0o077)
        # the source and the result keep the numbers they came with: those are free of LibreOffice's own (a
        # number it opened before the fork, taken over here, had it read the source's first 8 bytes as an event)
        job, messages, *files = fds
        for fd, wanted in ((job, 0), (job, 1), (messages, 2)):
            os.dup2(fd, wanted)
        os.close(job)
        os.close(messages)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115  (for the rest of this process)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False, buffering=1)  # noqa: SIM115
        os.environ["TMPDIR"] = tempfile.tempdir = scratch
        os.chdir(scratch)
        office.libreofficekit_hook_2.restype = ctypes.c_void_p
        office.libreofficekit_hook_2.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        if not office.libreofficekit_hook_2(PROGRAM.encode(), profile.encode()):
            raise RuntimeError("LibreOfficeKit did not start")
        import bridge  # imports uno, which reaches this process's office only once LibreOfficeKit runs
        status = bridge.serve(request, *(files or (None, None)))
        shutil.rmtree(scratch, ignore_errors=True)  # at once: the parent removes it again when it reaps this child
    except BaseException as error:  # the child answers whatever happened, and goes
        try:
            sys.stdout.write(json.dumps({"ok": False, "error": "crashed",
                                         "detail": f"{type(error).__name__}: {error}"}) + "\n")
            sys.stdout.flush()
        except Exception:
            pass
    finally:
        os._exit(status)


def yield_the_cpu(nice=None):
    """Give this session's autogroup the nice value the worker gave this process (10), or ``nice``.

    With the kernel's autogroup scheduling (Debian's default), CPU time is shared first between
    sessions and only then by nice value inside each; the sandbox starts a session of its own, so
    LibreOffice's nice 10 alone would still weigh as much as the whole API. Raising the group's
    nice needs no privilege, but the kernel takes one such change per 0.1 s from the unprivileged
    (EAGAIN). Without autogroups the file is missing and nice already works."""
    for _ in range(50):
        try:
            with open("/proc/self/autogroup", "w") as autogroup:
                autogroup.write(str(os.nice(0) if nice is None else nice))
            return
        except BlockingIOError:
            time.sleep(0.05 + random.random() * 0.1)
        except OSError:
            return


if __name__ == "__main__":
    sys.exit(main())
