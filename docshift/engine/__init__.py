"""The engine's one face to the task layer: nothing else of ``engine/`` is used outside it.

An :class:`Engine` is a worker process's LibreOffice (``forkit.py``: one warm parent in its sandbox, and a
fresh child of it for every file), shared by the process's worker threads. ``Engine.convert`` takes a
legacy file through everything the engine does with it: the encryption pre-check, LibreOffice's detection, load
and export in a child of its own, the output checks, the VBA project, stored formula results and the fidelity
report. A worker process calls ``clear_leftovers`` once at start, and ``sandbox_problem`` to know whether
LibreOffice's sandbox can be made here.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from docshift.contract import Macros
from docshift.engine import convert as _convert
from docshift.engine import precheck, protection, sandbox
from docshift.engine.convert import Converted
from docshift.engine.forkit import SELF_TEST_TIMEOUT, START_TIMEOUT, Forkit
from docshift.engine.places import HOST, alive, clear_leftovers
from docshift.engine.sandbox import LONG_RUN_SHARE

__all__ = ["LONGEST_START_SECONDS", "LONG_RUN_SHARE", "Converted", "Engine", "Forkit", "alive", "clear_leftovers",
           "sandbox_problem"]

# the longest a LibreOffice may take to start and pass its self-test before it counts as failed
LONGEST_START_SECONDS = START_TIMEOUT + SELF_TEST_TIMEOUT


class Engine:
    """A worker process's LibreOffice, and the conversion of a file on it; its threads share one."""

    def __init__(self, office: Forkit) -> None:
        self.office = office

    @classmethod
    def made(cls, data_dir: str | Path, *, memory_limit_mb: int = 8192, cpu_seconds: int = 600,
             scratch_mb: int = 512, sandboxed: bool = True, threads: int = 2,
             on_start: Callable[[str, str | None], object] | None = None) -> Engine:
        """The engine of one worker process, kept under ``data_dir``: how its LibreOffice runs (sandbox,
        limits), for ``threads`` worker threads; ``on_start(state, detail)`` hears of every start of its parent ("ok",
        or "broken" and why)."""
        return cls(Forkit(data_dir, "office", sandboxed, sandbox.Limits(cpu_seconds=cpu_seconds, scratch_mb=scratch_mb),
                          memory_limit_mb, on_start=on_start, ready=threads))

    def start(self) -> None:
        """Start LibreOffice's parent now (it passes its self-test), so that the first task finds it warm."""
        self.office.start()

    @property
    def name(self) -> str:
        return self.office.name

    @property
    def restarts(self) -> int:
        """How often LibreOffice's parent was started again (it died, or was killed)."""
        return self.office.restarts

    def cancel(self, task_id: str) -> bool:
        """Stop the conversion of ``task_id`` running here (its ``convert`` raises Preempted); whether one was."""
        return self.office.cancel(task_id)

    @contextmanager
    def workspace(self, task_id: str) -> Iterator[Path]:
        """A directory of the worker's own for one task's files, which no sandbox sees; removed afterwards. A run
        whose outcome is recorded never fails for what stays behind: the parent's close removes the folder."""
        self.office.tasks_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"{task_id}-", dir=self.office.tasks_dir,
                                         ignore_cleanup_errors=True) as directory:
            yield Path(directory)

    def convert(self, source: Path, kind: str, workdir: str | Path, timeout: float, task_id: str | None = None,
                macros: Macros = Macros.KEEP, password: str | None = None, protect: bool = True,
                ready: Callable[[Path, str], object] | None = None) -> Converted:
        """Convert the legacy file ``source`` of ``kind`` in a LibreOffice process of its own; returns the checked
        result, :class:`Converted`. A protected source opens with ``password`` (``protection.py``), and its result
        is protected by the same password unless ``protect`` is false; the checks and the fidelity report read it
        before. ``ready(path, extension)`` hears when the result file is written whole, and again if it is written
        again, before its checks end (never for a result protected after them). Raises ConversionFailed with the
        task's error code, or a ServiceFault (EngineBroken)."""
        file_limit = self.office.limits.scratch_mb << 20
        if kind == "xls" and precheck.workbook_default_password(source):
            # Excel opens it without asking: a password sent with it is not its own, and the result is not protected
            opened, protected_by = protection.open_default(source, kind, Path(workdir), file_limit), None
        else:
            opened = protection.open_source(source, kind, password, Path(workdir), file_limit) if password else None
            protected_by = password if opened is not None else None
            if opened is None:
                precheck.check(source)
        protects = protected_by if protect else None  # protected after the checks: not final before they end
        converted = _convert.convert(self.office, source, kind, workdir, timeout, task_id, macros, opened,
                                     ready=None if protects else ready)
        if protects:
            protection.protect(converted.path, protects)  # the whole of it, as the customer sent it
            converted = dataclasses.replace(converted, protected=True)
        return converted

    def places(self) -> dict[str, Path]:
        """The directories whose disk a conversion writes to, by name: a full one is a fault of the service."""
        return {"work": self.office.tasks_dir, "LibreOffice profile": self.office.profile}

    def close(self) -> None:
        self.office.close()


def sandbox_problem(data_dir: str | Path) -> str | None:
    """Why LibreOffice's sandbox cannot be made here, in words, or None."""
    return sandbox.problem(Path(data_dir) / "work" / f"{HOST}.{os.getpid()}.probe")
