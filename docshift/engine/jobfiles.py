"""A conversion's files in an Office's job dir, where a hostile LibreOffice must not steer the worker.

The job dir is the one host directory the sandbox sees (``/job``). The job dir and each
conversion's staging dir in it are the worker's, and the sandbox's user may only pass
through them (``DIR_MODE``): the one thing it may write is the empty target file made for
it (the bridge copies LibreOffice's result into it). The worker never follows a path in
the job dir: it walks from directory descriptors, opens without following a link
(``O_NOFOLLOW``), creates its files exclusively, and copies the result out to its own
file before anything reads it. With a worker that is not root, the sandbox's user is the
worker's own uid on the host (a user namespace maps one to the other), so modes keep
nothing out; the descriptors still keep the worker from reaching anything outside the
job dir through it.
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
    """A fresh staging dir in the job dir for one conversion: ``source``, a copy of the worker's
    source, and ``target``, the empty file LibreOffice may write (host paths; ``Office.inside``
    gives the sandbox's). Use it in a ``with``; ``take`` collects the result."""

    def __init__(self, job_dir: str | Path, source: str | Path, target_suffix: str) -> None:
        name = f"staged-{secrets.token_hex(8)}"
        self.target = Path(job_dir) / name / f"target{target_suffix}"
        # the source's own name (the customer's, made safe): what LibreOffice derives from it shows theirs
        own = Path(source).name
        self.source = Path(job_dir) / name / (own if own != self.target.name else f"source{Path(source).suffix}")
        self._job: int | None = os.open(job_dir, os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW)
        self._name = name
        self._dir: int | None = None
        try:
            os.mkdir(name, DIR_MODE, dir_fd=self._job)
            self._dir = os.open(name, os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW, dir_fd=self._job)
            os.fchmod(self._dir, DIR_MODE)  # whatever the umask
            with open(source, "rb") as original:
                _write_new(self._dir, self.source.name, SOURCE_MODE, original)
            _write_new(self._dir, self.target.name, 0o600, None, owner=(sandbox.UID, sandbox.GID))
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
        try:
            # O_NONBLOCK: a FIFO put in its place must not keep the worker waiting for a writer
            fd = os.open(self.target.name, os.O_RDONLY | os.O_NONBLOCK | NOFOLLOW, dir_fd=self._dir)
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


def _write_new(directory: int, name: str, mode: int, content: IO[bytes] | None,
               owner: tuple[int, int] | None = None) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, mode, dir_fd=directory)
    with open(fd, "wb") as new:
        os.fchmod(fd, mode)
        if owner is not None and sandbox.as_root():
            os.fchown(fd, *owner)
        if content is not None:
            shutil.copyfileobj(content, new, COPY_CHUNK)
