"""The bubblewrap sandbox LibreOffice runs in: every document is hostile.

Inside, the bridge and ``soffice`` have new user, mount, PID, IPC, UTS and
network namespaces (only a loopback with nothing on it), a clean environment,
no capabilities, and a read-only view of ``/usr``, the few pieces of ``/etc``
LibreOffice needs, and the engine's code. The one host path it sees is this
Office's job directory (``/job``), read-only: the worker stages each source there.
It writes nothing on the host's disks: LibreOffice's results go to ``/out``, and its
profile (``/profile``, with its home and ``TMPDIR``), ``/tmp`` (where LibreOffice
puts its UNO pipe whatever ``TMPDIR`` says) and ``/dev/shm`` hold the rest, all
private in-memory file systems of a fixed size that go with the sandbox; ``/dev``
takes no new files. The worker reads the results through a descriptor of ``/out``
(``open_out``; ``jobfiles.py``). The data dir with ``secret_key``, the object
store and ``/etc/passwd`` are not there at all.

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
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from docshift.errors import SandboxUnavailable

JOB = "/job"
OUT = "/out"
PROFILE = "/profile"
CODE = "/opt/docshift"
UID = GID = 65534
# the profile's settings, copied into the in-memory profile (the rest of the profile starts empty)
SETTINGS = "user/registrymodifications.xcu"
# a sandbox runs about 30 processes and threads (Calc adds a thread per core): a fork bomb stops here
MAX_PROCESSES = 256
# /tmp holds LibreOffice's UNO pipe and /dev/shm nothing we know of: their temp files go to TMPDIR
SMALL_TMPFS_MB = 16


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use besides memory (the Office caps its address space)."""
    cpu_seconds: int = 600  # CPU time of each of its processes; past it the kernel kills it
    scratch_mb: int = 512   # its in-memory profile and temp files, its results (``/out``), any one file it writes


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
# the descriptor bubblewrap tells the worker its sandbox's process on (``info_pipe``): above the 3 to 5 of STAGE
INFO_FD = 10
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
            env: dict[str, str] | None = None, limits: Limits = Limits(), info_fd: int | None = None) -> list[str]:
    """The argv that runs ``program`` (sandbox paths) in the sandbox, with ``env`` only.

    The sandbox's ``/profile`` is an in-memory copy of ``profile_dir``'s directories and settings
    file; ``/job`` is ``job_dir`` itself, read-only; ``/out`` is empty. ``info_fd`` (above 5, inherited):
    where bubblewrap names the sandbox's first process, for ``open_out``."""
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
    small, scratch = str(SMALL_TMPFS_MB << 20), str(limits.scratch_mb << 20)
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", small, "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
             "--size", small, "--tmpfs", "/tmp", "--size", scratch, "--tmpfs", PROFILE,
             "--size", scratch, "--tmpfs", OUT]
    directories = sorted(p.name for p in profile_dir.iterdir() if p.is_dir()) if profile_dir.is_dir() else []
    for directory in directories:
        argv += ["--dir", f"{PROFILE}/{directory}"]
    if settings.is_file():
        argv += ["--perms", "0600", "--file", "5", f"{PROFILE}/{SETTINGS}"]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    # read-only: a sandbox whose user is the worker's own (a worker that is not root) could fill the disk
    argv += ["--ro-bind", binds[0], JOB, "--ro-bind", binds[1], CODE, "--remount-ro", "/", "--chdir", JOB, "--",
             # set inside: the count of processes is then this sandbox's (its user namespace's) alone
             "/usr/bin/prlimit", f"--nproc={MAX_PROCESSES}", f"--fsize={limits.scratch_mb << 20}",
             f"--cpu={limits.cpu_seconds}", "--", *program]
    return prefix + argv


def open_out(info: int, bwrap_pid: int, timeout: float = 10) -> int:
    """A descriptor of the sandbox's ``/out`` as the worker reaches it (``/proc/<pid>/root``): the sandbox
    whose bubblewrap is ``bwrap_pid`` and wrote on ``info`` (``command``'s ``info_fd``; read to its end here).
    Call it once the sandbox runs. Raises OSError when that cannot be done."""
    found = b""
    deadline = time.monotonic() + timeout
    while True:
        if not select.select([info], [], [], max(0.0, deadline - time.monotonic()))[0]:
            raise OSError("bubblewrap did not say which process the sandbox is")
        chunk = os.read(info, 4096)
        if not chunk:
            break
        found += chunk
    try:
        child = int(json.loads(found)["child-pid"])
    except (ValueError, KeyError, TypeError) as error:
        raise OSError(f"bubblewrap's account of the sandbox does not read: {error}") from None
    # the pidfd holds on to that process: while it lives, its pid names no other
    pidfd = os.pidfd_open(child)
    try:
        status = Path(f"/proc/{child}/status").read_text()
        if f"\nPPid:\t{bwrap_pid}\n" not in status:
            raise OSError(f"process {child} is not the sandbox of bubblewrap {bwrap_pid}")
        out = os.open(f"/proc/{child}/root{OUT}", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        if select.select([pidfd], [], [], 0)[0]:  # it ended: what was opened may be another process's
            os.close(out)
            raise OSError("the sandbox ended")
        return out
    finally:
        os.close(pidfd)


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SandboxUnavailable(f"{name} (util-linux) is not on PATH")
    return path


def info_pipe() -> tuple[int, int]:
    """(read end, write end) of a pipe for ``command``'s ``info_fd``: the write end above the descriptors
    ``STAGE`` uses, for the child to inherit (``pass_fds``)."""
    read, write = os.pipe()
    try:
        return read, fcntl.fcntl(write, fcntl.F_DUPFD_CLOEXEC, INFO_FD)
    finally:
        os.close(write)


def problem(scratch: str | Path, timeout: float = 30) -> str | None:
    """Why no sandbox can be made here (bubblewrap's own words), or None when it can.

    Builds the real sandbox around a shell in ``scratch`` (which it removes), and reaches its ``/out`` as the
    worker does (``open_out``).
    """
    scratch = Path(scratch)
    probe = None
    info, told = -1, -1
    try:
        for name in ("job", "profile"):
            (scratch / name).mkdir(parents=True, exist_ok=True)
            give(scratch / name)
        info, told = info_pipe()
        argv = command(scratch / "job", scratch / "profile", Path(__file__).parent,
                       ["/bin/sh", "-c", "echo up && exec sleep 60"], info_fd=told)
        probe = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env={}, cwd="/", start_new_session=True, pass_fds=(told,))
        os.close(told)
        told = -1
        assert probe.stdout is not None and probe.stderr is not None
        if not select.select([probe.stdout], [], [], timeout)[0]:
            return f"the sandbox did not start within {timeout:g} s"
        if probe.stdout.readline() != b"up\n":  # it ended: bubblewrap says why
            probe.wait(timeout)
            return probe.stderr.read().decode(errors="replace").strip() or f"bwrap exited with {probe.returncode}"
        os.close(open_out(info, probe.pid, timeout))
    except (SandboxUnavailable, OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    finally:
        for fd in (info, told):
            if fd >= 0:
                os.close(fd)
        if probe is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(probe.pid, signal.SIGKILL)
            probe.wait()
            for stream in (probe.stdout, probe.stderr):
                if stream is not None:
                    stream.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return None
