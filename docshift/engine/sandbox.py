"""The bubblewrap sandbox LibreOffice runs in: every document is hostile.

Inside, the bridge and ``soffice`` have new user, mount, PID, IPC, UTS and
network namespaces (only a loopback with nothing on it), a clean environment,
no capabilities, and a read-only view of ``/usr``, the few pieces of ``/etc``
LibreOffice needs, and the engine's code. The one host path it sees is an empty
job directory (``/job``), read-only: a file to convert comes as an open descriptor,
and so does the file its result goes to (``forkit.py``), the one thing the sandbox
writes on the host's disks, within the file-size limit. Its profile (``/profile``,
with its home and ``TMPDIR``, where each child's temp dir is), ``/tmp`` and
``/dev/shm`` hold the rest, all private in-memory file systems of a fixed size that
go with the sandbox; ``/dev`` takes no new files. The data dir with ``secret_key``,
the object store and ``/etc/passwd`` are not there at all.

What it may use is capped (``Limits``): processes (a fork bomb stops there; the
count is this sandbox's own, its user namespace's), the size of any file it writes,
CPU seconds per process. The Office caps its address space.

A worker running as root starts bubblewrap as uid/gid 65534 (nobody), so
LibreOffice is not root even in the host's eyes. bubblewrap resolves bind
sources with the caller's rights, and the data dir may sit under a directory
nobody cannot enter, so a root worker first binds the job directory and the
code onto a tmpfs in a private mount namespace (``unshare``, ``mount``,
``setpriv``: util-linux) and bubblewrap binds them from there.
"""

import contextlib
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from docshift.errors import SandboxUnavailable

JOB = "/job"
PROFILE = "/profile"
CODE = "/opt/docshift"
UID = GID = 65534
# the profile's settings, copied into the in-memory profile (the rest of the profile starts empty)
SETTINGS = "user/registrymodifications.xcu"
# a sandbox runs the forkit parent and two children per conversion at once (one at work, one waiting), a few
# threads each (60 conversions at once peaked at 229 tasks in all; 72 hit a flat 256, and LibreOffice crashed): a
# fork bomb stops at so many per conversion
PROCESSES = 64
PROCESSES_PER_CONVERSION = 16
# LibreOffice's thread pool (parallel deflate, threaded formulas) has as many threads as cores; a child's are
# capped, so that a conversion's share holds them on a machine of many cores (on 2, a child peaked at 4 threads)
POOL_THREADS = 8
# /tmp holds LibreOffice's UNO pipe and /dev/shm nothing we know of: their temp files go to TMPDIR
SMALL_TMPFS_MB = 16


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use besides memory (``forkit.py`` caps its address space)."""
    cpu_seconds: int = 600  # CPU time of each of its processes; past it the kernel kills it
    scratch_mb: int = 512   # a conversion's share of its in-memory profile and temp files; any one file it writes
    conversions: int = 1    # at once: the scratch space and the processes are that many shares

    @property
    def space_mb(self) -> int:
        """The in-memory profile's and temp files' size: what a conversion alone may use."""
        return self.scratch_mb * self.conversions

    @property
    def processes(self) -> int:
        return PROCESSES + PROCESSES_PER_CONVERSION * self.conversions

    def sharing(self, conversions: int) -> "Limits":
        return replace(self, conversions=conversions)


# Only what LibreOffice and python need from /etc, never /etc itself: a document that
# links file:///etc/passwd finds nothing. Debian links parts of LibreOffice into /etc and /var.
SYSTEM_FILES = (
    "/etc/ld.so.cache",
    "/etc/fonts",
    "/etc/libreoffice",
    "/etc/localtime",
    "/var/lib/libreoffice",
    # the system font cache: without it fontconfig builds one per start (about 1 s more)
    "/var/cache/fontconfig",
)

# fd 5: the profile's settings, for bwrap's --file (the profile itself is the sandbox's own tmpfs)
OPEN_SETTINGS = 'exec 5<"$1" && shift && exec "$@"'
# run by a root worker in its own mount namespace: the two directories onto a private tmpfs
# (opened first: the tmpfs may hide them), then bubblewrap as nobody
STAGE = ('exec 3<"$1" 4<"$2" 5<"$3" && mount -t tmpfs -o mode=0755,size=64k docshift /tmp'
         ' && mkdir /tmp/job /tmp/code'
         ' && mount --no-canonicalize --bind /proc/self/fd/3 /tmp/job'
         ' && mount --no-canonicalize --bind /proc/self/fd/4 /tmp/code'
         ' && exec 3<&- 4<&- && shift 3'
         f' && exec setpriv --reuid={UID} --regid={GID} --clear-groups -- "$@"')


def as_root() -> bool:
    return os.geteuid() == 0


def give(path: str | Path) -> None:
    """Let the sandbox's user write ``path`` (a root worker hands it to nobody); a link is not followed."""
    if as_root():
        os.chown(path, UID, GID, follow_symlinks=False)


def command(job_dir: str | Path, profile_dir: str | Path, code_dir: str | Path, program: list[str],
            env: dict[str, str] | None = None, limits: Limits = Limits()) -> list[str]:
    """The argv that runs ``program`` (sandbox paths) in the sandbox, with ``env`` only.

    The sandbox's ``/profile`` is an in-memory copy of ``profile_dir``'s directories and settings
    file; ``/job`` is ``job_dir`` itself, read-only."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("bwrap (Debian package bubblewrap) is not on PATH")
    job, code = (str(Path(p).resolve()) for p in (job_dir, code_dir))
    profile_dir = Path(profile_dir).resolve()
    settings = profile_dir / SETTINGS
    seed = str(settings) if settings.is_file() else os.devnull
    if as_root():
        binds = ["/tmp/job", "/tmp/code"]
        prefix = [_tool("unshare"), "--mount", "--propagation", "private", "--", "/bin/sh", "-c", STAGE,
                  "docshift-sandbox", job, code, seed]
    else:
        binds, prefix = [job, code], ["/bin/sh", "-c", OPEN_SETTINGS, "docshift-sandbox", seed]
    environment = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **(env or {})}
    argv = [bwrap, "--unshare-all", "--unshare-user", "--uid", str(UID), "--gid", str(GID),
            "--disable-userns", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--hostname", "docshift", "--clearenv"]
    for name, value in environment.items():
        argv += ["--setenv", name, value]
    argv += ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    for file in SYSTEM_FILES:
        if os.path.exists(file):
            argv += ["--ro-bind", file, file]
    small, scratch = str(SMALL_TMPFS_MB << 20), str(limits.space_mb << 20)
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", small, "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
             "--size", small, "--tmpfs", "/tmp", "--size", scratch, "--tmpfs", PROFILE]
    directories = sorted(p.name for p in profile_dir.iterdir() if p.is_dir()) if profile_dir.is_dir() else []
    for directory in directories:
        argv += ["--dir", f"{PROFILE}/{directory}"]
    if settings.is_file():
        argv += ["--perms", "0600", "--file", "5", f"{PROFILE}/{SETTINGS}"]
    # read-only: a sandbox whose user is the worker's own (a worker that is not root) could fill the disk
    argv += ["--ro-bind", binds[0], JOB, "--ro-bind", binds[1], CODE, "--remount-ro", "/", "--chdir", JOB, "--",
             # set inside: the count of processes is then this sandbox's (its user namespace's) alone
             "/usr/bin/prlimit", f"--nproc={limits.processes}", f"--fsize={limits.scratch_mb << 20}",
             f"--cpu={limits.cpu_seconds}", "--", *program]
    return prefix + argv


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SandboxUnavailable(f"{name} (util-linux) is not on PATH")
    return path


def problem(scratch: str | Path, timeout: float = 30) -> str | None:
    """Why no sandbox can be made here (bubblewrap's own words), or None when it can.

    Builds the real sandbox around a shell in ``scratch`` (which it removes).
    """
    scratch = Path(scratch)
    probe = None
    try:
        for name in ("job", "profile"):
            (scratch / name).mkdir(parents=True, exist_ok=True)
            give(scratch / name)
        argv = command(scratch / "job", scratch / "profile", Path(__file__).parent,
                       ["/bin/sh", "-c", "echo up && exec sleep 60"])
        probe = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env={}, cwd="/", start_new_session=True)
        assert probe.stdout is not None and probe.stderr is not None
        if not select.select([probe.stdout], [], [], timeout)[0]:
            return f"the sandbox did not start within {timeout:g} s"
        if probe.stdout.readline() != b"up\n":  # it ended: bubblewrap says why
            probe.wait(timeout)
            return probe.stderr.read().decode(errors="replace").strip() or f"bwrap exited with {probe.returncode}"
    except (SandboxUnavailable, OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    finally:
        if probe is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(probe.pid, signal.SIGKILL)
            probe.wait()
            for stream in (probe.stdout, probe.stderr):
                if stream is not None:
                    stream.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return None


# a run past this share of the conversion timeout is long (10 s of 120): the fair claim keeps the last free slot
# from an account whose runs are long (storage/tasks.py), and no file waits longer for one run alone (Room)
LONG_RUN_SHARE = 1 / 12


class Room:
    """The memory the LibreOffice children of one worker process share. Any number convert at once (``shared``), but a
    file whose child was killed for the memory limit (``memory.py``) is tried again ``alone``: once the conversions
    running have ended, and with none beginning until it has. Tried again beside the same neighbours, under a memory
    limit that two large files overrun together, it was killed again. Each wait is bounded: the retry's by a
    conversion's deadline, the others' by a long run's (``LONG_RUN_SHARE``), counted once from when the retry began
    to wait: past it, every conversion goes ahead beside the retry at once. Else a file made to run out of memory,
    and then to run until the timeout, would hold every other account's files back for the whole timeout, at no cost
    to its sender; and a wait of its own for each file that came (as it was before) let one through a long run's
    time: a second account's files, sent every half second, waited a minute under that attack."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._sharing = 0   # conversions running beside others
        self._waiting = 0   # conversions waiting to run alone, or running so
        self._alone = False
        self._since = 0.0   # when the first of the retries waiting or running alone began to wait

    @contextlib.contextmanager
    def shared(self, within: float) -> Iterator[bool]:
        """Yields False: others may convert beside it. Waits while a retry waits or runs alone, until ``within``
        seconds after it began to wait."""
        with self._changed:
            while self._waiting and (left := self._since + within - time.monotonic()) > 0:
                self._changed.wait(left)
            self._sharing += 1
        try:
            yield False
        finally:
            with self._changed:
                self._sharing -= 1
                self._changed.notify_all()

    @contextlib.contextmanager
    def alone(self, within: float) -> Iterator[bool]:
        """Yields whether it runs alone (False: it waited ``within`` seconds, and goes ahead beside others)."""
        with self._changed:
            if not self._waiting:
                self._since = time.monotonic()
            self._waiting += 1
            alone = self._changed.wait_for(lambda: self._sharing == 0 and not self._alone, within)
            self._alone = True
        try:
            yield alone
        finally:
            with self._changed:
                self._waiting -= 1
                self._alone = False
                self._changed.notify_all()
