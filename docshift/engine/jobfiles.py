"""A conversion's files in an Office's job dir and its sandbox's ``/out``, where a hostile LibreOffice must not
steer the worker.

The job dir is the one host directory the sandbox sees (``/job``), and it sees it read-only: the worker stages
a copy of each source there, in a staging dir of its own. LibreOffice writes its result into the sandbox's
``/out``, an in-memory file system of a fixed size (``sandbox.Limits.scratch_mb``), which the worker reaches
through a descriptor (``sandbox.open_out``): nothing the sandbox writes lands on the host's disks, whoever
the worker runs as. ``/out`` is the sandbox's own to write, so the worker never follows a path there: it opens
from directory descriptors without following a link (``O_NOFOLLOW``), takes only a regular file, and copies the
result out to its own file before anything reads it. The job dir and its staging dirs are the worker's, closed
to the sandbox's user (``DIR_MODE``); with a worker that is not root, the sandbox's user is the worker's own
uid on the host (a user namespace maps one to the other), so modes keep nothing out, but the read-only view does.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
from pathlib import Path
from typing import IO

from docshift.engine import sandbox
from docshift.errors import OfficeCrashed

DIR_MODE = 0o711  # the sandbox's user may pass through: not list, not write
SOURCE_MODE = 0o644
NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
COPY_CHUNK = 1 << 20


def prepare(job_dir: str | Path) -> None:
    """Make ``job_dir`` (its parents are the worker's own) the worker's, closed to the sandbox's user."""
    job_dir = Path(job_dir)
    job_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(job_dir, os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW)
    try:
        if sandbox.as_root():  # a job dir an earlier version handed to nobody comes back
            os.fchown(fd, os.geteuid(), os.getegid())
        os.fchmod(fd, DIR_MODE)
    finally:
        os.close(fd)


class Staging:
    """A fresh staging dir in the job dir for one conversion: ``source``, a copy of the worker's source (a host
    path; ``Office.inside`` gives the sandbox's), and ``target``, where LibreOffice stores its result in the
    sandbox (``/out/target<suffix>``). Use it in a ``with``; ``take`` collects the result."""

    def __init__(self, job_dir: str | Path, out: int, source: str | Path, target_suffix: str) -> None:
        name = f"staged-{secrets.token_hex(8)}"
        self._result = f"target{target_suffix}"
        self.target = f"{sandbox.OUT}/{self._result}"
        # the source's own name (the customer's, made safe): what LibreOffice derives from it shows theirs
        own = Path(source).name
        self.source = Path(job_dir) / name / (own if own != self._result else f"source{Path(source).suffix}")
        # its own: a LibreOffice stopped meanwhile closes the one it was given
        self._out: int | None = os.dup(out)
        self._job: int | None = None
        self._name = name
        self._dir: int | None = None
        try:
            self._job = os.open(job_dir, os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW)
            _remove(self._out, self._result)  # what an earlier conversion left is not this one's result
            os.mkdir(name, DIR_MODE, dir_fd=self._job)
            self._dir = os.open(name, os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW, dir_fd=self._job)
            os.fchmod(self._dir, DIR_MODE)  # whatever the umask
            with open(source, "rb") as original:
                _write_new(self._dir, self.source.name, SOURCE_MODE, original)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def take(self, target: str | Path) -> bool:
        """Copy what LibreOffice wrote into ``target`` (the worker's own path); False when it wrote
        nothing. Raises OfficeCrashed when what is there is no regular file (a link, a FIFO):
        only a compromised sandbox makes one."""
        if self._out is None:  # closed
            return False
        try:
            # O_NONBLOCK: a FIFO put in its place must not keep the worker waiting for a writer
            fd = os.open(self._result, os.O_RDONLY | os.O_NONBLOCK | NOFOLLOW, dir_fd=self._out)
        except FileNotFoundError:
            return False
        except OSError as error:  # ELOOP: a link
            raise OfficeCrashed(f"the result is no regular file: {error.strerror}") from error
        with open(fd, "rb") as result:
            found = os.fstat(fd)
            if not stat.S_ISREG(found.st_mode):
                raise OfficeCrashed("the result is no regular file")
            if found.st_size == 0:
                return False
            with open(target, "wb") as copy:
                shutil.copyfileobj(result, copy, COPY_CHUNK)
        return True

    def close(self) -> None:
        if self._dir is not None:
            os.close(self._dir)
            self._dir = None
        if self._job is not None:
            shutil.rmtree(self._name, dir_fd=self._job, ignore_errors=True)
            os.close(self._job)
            self._job = None
        if self._out is not None:
            _remove(self._out, self._result)
            os.close(self._out)
            self._out = None


def empty(directory: int) -> None:
    """Remove everything in the directory open as ``directory`` (no link is followed)."""
    for name in os.listdir(directory):
        try:
            if stat.S_ISDIR(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode):
                shutil.rmtree(name, dir_fd=directory, ignore_errors=True)
            else:
                os.unlink(name, dir_fd=directory)
        except FileNotFoundError:
            pass


def _remove(directory: int, name: str) -> None:
    """Remove ``name`` from ``directory``, whatever it is (the sandbox may have made it a directory)."""
    try:
        os.unlink(name, dir_fd=directory)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        shutil.rmtree(name, dir_fd=directory, ignore_errors=True)


def _write_new(directory: int, name: str, mode: int, content: IO[bytes]) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, mode, dir_fd=directory)
    with open(fd, "wb") as new:
        os.fchmod(fd, mode)
        shutil.copyfileobj(content, new, COPY_CHUNK)
