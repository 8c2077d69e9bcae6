"""The warm LibreOffice that forks a child for every file; run in the sandbox under LibreOffice's Python.

Collabora Online's forkit, taken one step further: ``lok_preinit`` loads LibreOffice's libraries, registry, fonts
and filters into this process, ``libreofficekit_hook_2`` starts LibreOfficeKit, and the self-test makes, loads and
exports a file of each type, so that what LibreOffice builds on its first document of a kind (filters' tables,
type detection, font metrics) is built once, here. Each customer's file is converted by a child forked from this
warm process, through pyuno in its own process (``bridge.py``: no pipe, no URP), which exits with its file: 100
ms of CPU per small corpus file (170 forked cold), as a warm LibreOffice converting one file after another spends.
No LibreOffice process sees a second customer's file: what one document did to LibreOffice's state dies with its
child. LibreOfficeKit, once started, is switched off (``SET_ACTIVE``): active, it makes imports leave out what
Collabora Online cannot show, as slide transitions its slideshow does not play (random, cover: three corpus decks
lost them on 93 slides), which a plain soffice keeps.

A fork copies the forking thread only, and this process has three: this file's, LibreOfficeKit's main loop
(``lo_startmain``) and the configuration writer (idle). Forked from this file's thread, a child has no main loop:
the first import that yields to it (a workbook's sheets, read on threads) waits for ever, on a condition variable
whose state names a waiter that is not in the child. So the main loop forks children itself, in a callback it runs
(``com.sun.star.awt.AsyncCallback``): it lets go of LibreOffice's lock (the SolarMutex), forks, and each side takes
the lock back. The child is then LibreOffice's main thread, holding its lock, with the main loop's state as it is
between two events. Forked so, the 253 corpus files converted as they did in cold children, none waiting.

The worker (``docshift/engine/forkit.py``) talks to this process over one ``AF_UNIX`` ``SOCK_SEQPACKET`` socket,
inherited as the descriptor named on the command line. It first says ``{"ready": true, "pid": ...}`` there. Each
message it gets is one job: a JSON request with three descriptors, ``SCM_RIGHTS``:

    the job's own socket (the answer comes there, one JSON line each, as ``bridge.py`` says),
    the source, open for reading, and the result, open for writing (``{"selftest": ...}`` has neither),
    the write end of a pipe for the child's own messages (its stderr), which the worker logs with the task.

The first job is the self-test, which this process runs itself (it is what warms it); children are forked only
once it passed, and as many as the worker has threads wait, forked, for a file. A child is never given a path of
the worker's: it reads its source and writes its result through those descriptors. It is not dumpable (its
siblings share its uid; none may read its memory or descriptors through ``/proc``), it copies its source into a
temp dir of its own, removed when it ends, and it is killed at the request's ``seconds``. LibreOffice's own temp
files go where this process's LibreOffice made its temp dir: a child removes those it still holds open when it
exits, and this process removes whatever else children left there each time none is at work. The sandbox's limits
(address space, CPU seconds, file size, processes) hold for each child as for this process.

After the self-test, and before the first child, learners convert the self-test's files once more and show which of
this process's pages a child writes and how far its heap grows; every child copies those pages and grows its heap so
far while it waits for its file (``written.py``).
"""

import collections
import contextlib
import ctypes
import functools
import json
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time

import process
import written
from mainloop import MainLoopFork

PROGRAM = os.path.dirname(os.path.realpath(shutil.which("soffice") or "/usr/lib/libreoffice/program/soffice"))
PR_SET_NAME = 15
MAX_REQUEST = 1 << 16
SET_ACTIVE = "_ZN10comphelper14LibreOfficeKit9setActiveEb"  # comphelper::LibreOfficeKit::setActive(bool)


def main():
    profile, control = sys.argv[1], socket.socket(fileno=int(sys.argv[2]))
    ready = max(1, int(sys.argv[3])) if len(sys.argv) > 3 else 1
    learners = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    process.yield_the_cpu()  # first: a process that is not dumpable may no longer write its /proc/self/autogroup
    # not dumpable, and its children after it: a child taken over by a document can neither read nor write the
    # memory of this process (``/proc/<pid>/mem``), which every later child is forked from
    ctypes.CDLL(None).prctl(process.PR_SET_DUMPABLE, 0, 0, 0, 0)
    # lok_preinit loads the configuration of the profile this names, not of its own argument (without it the
    # settings of $HOME's default profile were in force: macros and links as LibreOffice's defaults have them)
    os.environ["UserInstallation"] = profile  # noqa: SIM112  (LibreOffice's bootstrap name, as it spells it)
    # LibreOffice makes its temp dir (lu*.tmp) once, in here: the one its children's temp files go to
    office_tmp = os.path.join(tempfile.gettempdir(), "office")
    os.makedirs(office_tmp, 0o700, exist_ok=True)
    os.environ["TMPDIR"] = office_tmp
    os.chdir(office_tmp)
    office = ctypes.CDLL(os.path.join(PROGRAM, "libmergedlo.so"), mode=ctypes.RTLD_GLOBAL)
    office.lok_preinit.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    office.libreofficekit_hook_2.restype = ctypes.c_void_p
    office.libreofficekit_hook_2.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    if office.lok_preinit(PROGRAM.encode(), profile.encode()) != 0 or \
            not office.libreofficekit_hook_2(PROGRAM.encode(), profile.encode()):
        control.send(json.dumps({"ready": False, "detail": "LibreOfficeKit did not start"}).encode())
        return 1
    getattr(office, SET_ACTIVE)(ctypes.c_bool(False))
    own_fonts(profile)
    sys.path.append(PROGRAM)
    os.environ["URE_BOOTSTRAP"] = f"vnd.sun.star.pathname:{PROGRAM}/fundamentalrc"
    import bridge  # imports uno, which reaches this process's LibreOffice, running now

    bridge.prepare()
    # a child's end makes select() return at once (SIGCHLD on a pipe): it is reaped, its temp dir removed, now
    woken, wake = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, lambda number, frame: None)
    forkit = Forkit(office, bridge, control, woken, office_tmp, ready, learners)
    control.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    try:
        forkit.serve()
    finally:
        for pid in forkit.children:
            kill(pid)
    return 0


class Forkit:
    """The children: those that wait for a file (``waiting``: a file never waits for a fork), and every one with
    its deadline (None while it waits) and temp dir (``children``)."""

    def __init__(self, office, bridge, control, woken, office_tmp, ready, learners):
        self.bridge, self.control, self.woken, self.ready, self.learners = bridge, control, woken, ready, learners
        self.office_tmp, self.warm = office_tmp, False
        self.children = {}  # pid -> [its deadline (None while it waits), its temp dir]
        self.waiting = collections.deque()  # (pid, the socket its file comes on)
        self.kept = set()  # what is in LibreOffice's temp dir once this process is warm: its own
        self.main_loop = MainLoopFork(office)
        self.written = written.Written(os.path.dirname(office_tmp))  # what children copy before their file comes

    def fill(self, ready):
        """Fork children until ``ready`` wait for a file."""
        while self.warm and len(self.waiting) < ready:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            inherited = [self.control, ours, *(sock for _, sock in self.waiting)]
            pid = self.main_loop.fork(functools.partial(self.become_child, inherited, theirs))
            theirs.close()
            if pid is None:  # LibreOffice's main loop did not run the fork: the next file's fill tries again
                ours.close()
                return
            self.children[pid] = [None, self.scratch(pid)]
            self.waiting.append((pid, ours))

    def become_child(self, inherited, sock, pid):
        """In the child: nothing of its siblings' or of the worker's stays open, only its own socket."""
        for other in inherited:
            other.close()
        child(self.bridge, sock, self.scratch(pid), self.office_tmp, self.written.copy)  # never returns

    def scratch(self, pid):
        """A child's own temp dir, named after it (its pid in the sandbox)."""
        return os.path.join(os.path.dirname(self.office_tmp), f"child-{pid}")

    def serve(self):
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
                    self.take(message, fds)
                finally:
                    for fd in fds:  # the child holds its own copies: the job's end is the child's alone now
                        os.close(fd)
                self.fill(self.ready)

    def take(self, message, fds):
        """A job: the self-test (this process runs it), or a file for a waiting child, which is killed ``seconds``
        from now."""
        try:
            request = json.loads(message)
            seconds = float(request.get("seconds", 60))
        except (ValueError, AttributeError, TypeError):
            return  # the job's socket closes with no answer: the worker sees a crash
        if isinstance(request, dict) and "selftest" in request and fds:
            self.self_test(request, fds[0])
            self.fill(self.ready)
            return
        while self.warm:
            if not self.waiting:
                self.fill(1)
                if not self.waiting:
                    return
            pid, sock = self.waiting.popleft()
            try:
                socket.send_fds(sock, [message], fds)
            except OSError:  # it died waiting: the next one
                continue
            finally:
                sock.close()
            if pid in self.children:
                self.children[pid][0] = time.monotonic() + seconds
            return

    def self_test(self, request, job):
        """The self-test, run here: it makes a file of each type, loads it and exports it, and each is converted
        once more as a customer's file is (detection, facts): what every child then inherits warm. Its answer
        goes on the job's socket; children are forked once it passed."""
        directory = os.path.join(self.office_tmp, "selftest")
        try:
            answer = self.bridge.self_test(directory, request["kinds"])
            self.warm = bool(answer.get("ok"))
            if self.warm:  # before the first fork: large pages for the heaps that forks copy and children grow
                process.prepare_for_forks()
                self.learn([(os.path.join(directory, name), ooxml) for _, _, name, ooxml in request["kinds"]])
                answer["pages"] = self.written.summary()
        except Exception as error:
            answer = {"ok": False, "detail": f"{type(error).__name__}: {error}"}
            self.warm = False
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        self.kept = set(self.left())
        with contextlib.suppress(OSError):
            os.write(job, (json.dumps(answer) + "\n").encode())

    def learn(self, files):
        """Children that convert the self-test's own ``files`` [(path, OOXML filter)], ``learners`` times each, and
        show which pages of this process a child writes (``written.py``). What it saves is time: where learning
        fails, children convert as they would without it."""
        try:
            self.written.learn(self.main_loop.fork, functools.partial(learner, self.bridge), files * self.learners,
                               self.scratch)
        except Exception as error:
            self.written.runs = []
            print(f"learning which pages children write failed: {type(error).__name__}: {error}", file=sys.stderr)

    def reap(self):
        """Forget the children that ended, and their temp dirs; once none is at work, what they left in
        LibreOffice's temp dir goes too."""
        ended = False
        while self.children:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            ended = True
            _, scratch = self.children.pop(pid, (None, None))
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)
            for index, (waiting, sock) in enumerate(self.waiting):
                if waiting == pid:  # died before it got a file
                    sock.close()
                    del self.waiting[index]
                    break
        if ended and all(deadline is None for deadline, _ in self.children.values()):
            self.sweep()

    def left(self):
        """What is in LibreOffice's temp dirs (``lu*.tmp``), as paths in this process's temp dir."""
        for top in os.listdir(self.office_tmp):
            inner = os.path.join(self.office_tmp, top)
            if top.startswith("lu") and os.path.isdir(inner) and not os.path.islink(inner):
                yield from (os.path.join(inner, name) for name in os.listdir(inner))

    def sweep(self):
        """Remove what ended children left in LibreOffice's temp dir: none is at work now."""
        for path in list(self.left()):
            if path not in self.kept:
                remove(path)


def remove(path):
    with contextlib.suppress(OSError):
        shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)


def kill(pid):
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def own_fonts(profile):
    """LibreOffice keeps the fonts a document embeds, and its copies of the fonts a result embeds, in the profile's
    ``user/temp/embeddedfonts``, which every child shares: one account's font went into the result of another's
    document that named it. That directory becomes a link to ``embeddedfonts`` in the working directory of the
    process that follows it: each child's own scratch dir, which goes with the child."""
    fonts = os.path.join(profile.removeprefix("file://"), "user", "temp", "embeddedfonts")
    shutil.rmtree(fonts, ignore_errors=True)
    os.makedirs(os.path.dirname(fonts), exist_ok=True)
    os.symlink("/proc/self/cwd/embeddedfonts", fonts)
    for kind in ("fromdocs", "fromsystem"):  # LibreOffice makes these with the link's own path, which it follows
        os.makedirs(os.path.join("embeddedfonts", kind), 0o700, exist_ok=True)


def own_scratch(scratch):
    """A child's temp dir, its working directory, with its own embedded fonts (``own_fonts``)."""
    os.umask(0o077)
    os.mkdir(scratch, 0o700)
    os.environ["TMPDIR"] = tempfile.tempdir = scratch
    os.chdir(scratch)
    for kind in ("fromdocs", "fromsystem"):
        os.makedirs(os.path.join("embeddedfonts", kind), 0o700)


def learner(bridge, path, ooxml, scratch):
    """A learner's conversion (``written.py``): the self-test's file at ``path``, its result thrown away."""
    own_scratch(scratch)
    with open(path, "rb") as given, open(os.devnull, "wb") as stored:
        bridge.convert({"name": os.path.basename(path), "filter": ooxml, "parts": True,
                        "target_name": os.path.basename(path) + "x"}, given.fileno(), stored.fileno())


def child(bridge, sock, scratch, office_tmp, copy):
    """In a child just forked, holding LibreOffice's lock on its main thread: copy the pages children write
    (``written.py``), wait on ``sock`` for one file, convert it, answer on the job socket that came with it,
    and exit."""
    status = 70
    try:
        name(b"forkit-ready")
        own_scratch(scratch)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        copy()
        message, fds, _, _ = socket.recv_fds(sock, MAX_REQUEST, 4)
        sock.close()
        if not message or len(fds) < 2:
            os._exit(0)
        request = json.loads(message)
        name(f"forkit-file{request.get('tag', '')}"[:15].encode())  # at work, and on which job (``ps``, the worker)
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
        leave(office_tmp)
        os._exit(status)


def leave(office_tmp):
    """Remove the files of LibreOffice's temp dir this child still holds open (its document's: it exits with them)."""
    inside = os.path.realpath(office_tmp) + os.sep
    with contextlib.suppress(OSError):
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                path = os.readlink(f"/proc/self/fd/{fd}")
                if path.startswith(inside):
                    os.unlink(path)


def name(title):
    """This process's name (``/proc/<pid>/comm``): a child waiting for a file, or at work on one."""
    ctypes.CDLL(None).prctl(PR_SET_NAME, title, 0, 0, 0)


if __name__ == "__main__":
    sys.exit(main())
