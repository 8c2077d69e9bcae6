"""The preinitialised LibreOffice that forks a child for every file; run in the sandbox under LibreOffice's Python.

Collabora Online's forkit, here: ``lok_preinit`` loads LibreOffice's libraries, its registry, fonts and filters once,
into this process (about 0.5 s of CPU); every file is then converted by a child forked from it, which starts
LibreOfficeKit (``libreofficekit_hook_2``: 0.01 s, the preloaded state is there already), drives it through pyuno
in its own process (``bridge.py``: no pipe, no URP), answers, and exits with its file. No LibreOffice process ever
sees a second file, whoever's it is: what one document did to LibreOffice's state dies with its child. As many
children as the worker has threads wait, started, for a file (``Forkit.fill``), so that a file never waits for a
fork, LibreOfficeKit's start or pyuno's; each is handed its file over a socket of its own.

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
A fork copies the forking thread only: this process starts none of its own, and ``lok_preinit`` leaves one
(LibreOffice's configuration writer, idle here: nothing changes the configuration), as Collabora's forkit has it.
"""

import collections
import contextlib
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
PR_SET_NAME = 15
MAX_REQUEST = 1 << 16


def main():
    profile, control = sys.argv[1], socket.socket(fileno=int(sys.argv[2]))
    ready = max(1, int(sys.argv[3])) if len(sys.argv) > 3 else 1
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
    # a child's end makes select() return at once (SIGCHLD on a pipe): it is reaped, its temp dir removed, now
    woken, wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, lambda number, frame: None)
    forkit = Forkit(office, profile, control, woken)
    forkit.fill(ready)
    control.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    try:
        forkit.serve(ready)
    finally:
        for pid in forkit.children:
            kill(pid)
    return 0


class Forkit:
    """The children: those that wait for a file (``waiting``, started and ready, so that a file never waits for a
    fork and LibreOfficeKit's start) and those at work, each with its deadline and temp dir (``children``)."""

    def __init__(self, office, profile, control, woken):
        self.office, self.profile, self.control, self.woken = office, profile, control, woken
        self.children = {}  # pid -> [its deadline (None while it waits), its temp dir]
        self.waiting = collections.deque()  # (pid, the socket its file comes on)

    def fill(self, ready):
        """Fork children until ``ready`` wait for a file."""
        while len(self.waiting) < ready:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            pid = os.fork()
            # named after the child (its pid in the sandbox), which makes it
            scratch = os.path.join(tempfile.gettempdir(), f"child-{pid or os.getpid()}")
            if pid == 0:
                # nothing of its siblings' or of the worker's: only its own socket stays open
                for _, other in self.waiting:
                    other.close()
                self.control.close()
                ours.close()
                child(self.office, self.profile, theirs, scratch)  # never returns
            theirs.close()
            self.children[pid] = [None, scratch]
            self.waiting.append((pid, ours))

    def serve(self, ready):
        while True:
            now = time.monotonic()
            for pid, (deadline, _) in self.children.items():
                if deadline is not None and deadline <= now:
                    kill(pid)
            wait = min((deadline for deadline, _ in self.children.values() if deadline is not None),
                       default=now + 1) - now
            readable = select.select([self.control, self.woken], [], [], max(0.01, min(wait, 1)))[0]
            if self.woken in readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(self.woken, 4096)
            self.reap()  # the temp dirs of the children that ended go before another child takes a file
            if self.control in readable:
                message, fds, _, _ = socket.recv_fds(self.control, MAX_REQUEST, 4)
                if not message:  # the worker is gone
                    return
                try:
                    self.hand(message, fds)
                finally:
                    for fd in fds:  # the child holds its own copies: the job's end is the child's alone now
                        os.close(fd)
                self.fill(ready)

    def hand(self, message, fds):
        """Give a waiting child the file ``message`` and ``fds`` name; it is killed ``seconds`` from now."""
        try:
            request = json.loads(message)
            seconds = float(request.get("seconds", 60))
        except (ValueError, AttributeError, TypeError):
            return  # the job's socket closes with no answer: the worker sees a crash
        while True:
            if not self.waiting:
                self.fill(1)
            pid, sock = self.waiting.popleft()
            try:
                socket.send_fds(sock, [message], fds)
                break
            except OSError:  # it died waiting: the next one
                continue
            finally:
                sock.close()
        if pid in self.children:
            self.children[pid][0] = time.monotonic() + seconds

    def reap(self):
        """Forget the children that ended, and their temp dirs."""
        while self.children:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            _, scratch = self.children.pop(pid, (None, None))
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)
            for index, (waiting, sock) in enumerate(self.waiting):
                if waiting == pid:  # died before it got a file
                    sock.close()
                    del self.waiting[index]
                    break


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


def kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def child(office, profile, sock, scratch):
    """Start LibreOfficeKit in this fresh process, wait on ``sock`` for one file, convert it, answer on the job
    socket that came with it, and exit."""
    status = 70
    try:
        name(b"forkit-ready")
        os.umask(0o077)
        os.mkdir(scratch, 0o700)
        os.environ["TMPDIR"] = tempfile.tempdir = scratch
        os.chdir(scratch)
        office.libreofficekit_hook_2.restype = ctypes.c_void_p
        office.libreofficekit_hook_2.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        if not office.libreofficekit_hook_2(PROGRAM.encode(), profile.encode()):
            raise RuntimeError("LibreOfficeKit did not start")
        import bridge  # imports uno, which reaches this process's office only once LibreOfficeKit runs
        bridge.prepare()
        message, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST, 4)
        sock.close()
        name(b"forkit-file")  # at work: what ``ps`` and the tests tell it apart by
        if not message or len(fds) < 2:
            os._exit(0)
        request = json.loads(message)
        # the source and the result keep the numbers they came with: those are free of LibreOffice's own (a
        # number it opened before, taken over here, had it read the source's first 8 bytes as an event)
        job, messages, *files = fds
        for fd, wanted in ((job, 0), (job, 1), (messages, 2)):
            os.dup2(fd, wanted)
        os.close(job)
        os.close(messages)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115  (for the rest of this process)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False, buffering=1)  # noqa: SIM115
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


def name(title):
    """This process's name (``/proc/<pid>/comm``): a child waiting for a file, or at work on one."""
    ctypes.CDLL(None).prctl(PR_SET_NAME, title, 0, 0, 0)


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
