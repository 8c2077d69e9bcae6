"""The engine's one face to the task layer: nothing else of ``engine/`` is used outside it.

An :class:`Engine` is one worker thread's LibreOffice and its spare (``office.py``), taken from the worker
process's :class:`Pool` (``pool.py``: where LibreOffices start, and wait for their account's next task; made
by ``Engine.pool``). ``Engine.convert`` takes a legacy file through everything the engine does with it: the
encryption pre-check, LibreOffice's detection, load and export in its sandbox, the output checks, the VBA
project, stored formula results and the fidelity report. A worker process calls ``clear_leftovers`` once at
start, and ``sandbox_problem`` to know whether LibreOffice's sandbox can be made here.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from docshift.engine import convert as _convert
from docshift.engine import office as _office
from docshift.engine import precheck, protection, sandbox
from docshift.engine.convert import Converted
from docshift.engine.office import alive, clear_leftovers
from docshift.engine.pool import Pool
from docshift.engine.soffice import PROFILE_SETTINGS, SELF_TEST_TIMEOUT, START_TIMEOUT, Launcher

__all__ = ["LONGEST_START_SECONDS", "Converted", "Engine", "Pool", "alive", "clear_leftovers", "sandbox_problem"]

# the longest a LibreOffice may take to start and pass its self-test before it counts as failed
LONGEST_START_SECONDS = START_TIMEOUT + SELF_TEST_TIMEOUT


class Engine:
    """One worker thread's LibreOffices, and the conversion of a file on them. Must be made, and used, by a
    thread that lives as long as it (``office.py`` says why)."""

    def __init__(self, office: _office.Office) -> None:
        self.office = office

    @staticmethod
    def pool(data_dir: str | Path, *, memory_limit_mb: int = 8192, cpu_seconds: int = 600, scratch_mb: int = 512,
             sandboxed: bool = True, accounts: int = 1, idle_seconds: float = 600) -> Pool:
        """The LibreOffices of one worker process, kept under ``data_dir``, for its Engines to share: how they
        start (sandbox, limits), and how many of them wait idle for their account (``accounts - 1`` per
        Engine) and how long."""
        launcher = Launcher("office", sandboxed, sandbox.Limits(cpu_seconds=cpu_seconds, scratch_mb=scratch_mb),
                            memory_limit_mb * 1024 * 1024, PROFILE_SETTINGS)
        return Pool(data_dir, launcher, "office", idle_per_office=accounts - 1, idle_seconds=idle_seconds)

    @classmethod
    def build(cls, pool: Pool, name: str, *, max_conversions: int = 200, spare: bool = False,
              on_start: Callable[[Engine, str, str | None], object] | None = None) -> Engine:
        """An Engine taking its LibreOffices from ``pool``; ``on_start(engine, state, detail)`` hears of every
        start of one ("ok", or "broken" and why)."""
        engine = cls(None)  # type: ignore[arg-type]  # its Office is made next: it tells the Engine of a start
        engine.office = _office.Office(
            pool.base_dir, max_conversions=max_conversions, name=name, spare=spare, pool=pool,
            on_start=on_start and (lambda office, state, detail: on_start(engine, state, detail)))
        return engine

    def start(self) -> None:
        """Start a LibreOffice now (it passes its self-test), so that the first task finds one warm."""
        self.office.start()

    @property
    def name(self) -> str:
        return self.office.name

    @property
    def restarts(self) -> int:
        """How often a LibreOffice was replaced (recycling, crashes, timeouts, new accounts)."""
        return self.office.restarts

    @contextmanager
    def workspace(self, task_id: str) -> Iterator[Path]:
        """A directory of the worker's own for one task's files, which no sandbox sees; removed afterwards."""
        self.office.tasks_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"{task_id}-", dir=self.office.tasks_dir) as directory:
            yield Path(directory)

    def convert(self, source: Path, kind: str, workdir: str | Path, timeout: float, task_id: str | None = None,
                macros: str = "keep", tenant: str | None = None, password: str | None = None,
                protect: bool = True) -> Converted:
        """Convert the legacy file ``source`` of ``kind`` for the account ``tenant`` (a LibreOffice that has
        converted another account's file never sees it); returns the checked result, :class:`Converted`.
        A protected source opens with ``password`` (``protection.py``), and its result is protected by the same
        password unless ``protect`` is false; the checks and the fidelity report read it before.
        Raises ConversionFailed with the task's error code, or a ServiceFault (EngineBroken)."""
        self.office.take(tenant)
        opened = None
        if password:
            opened = protection.open_source(source, kind, password, Path(workdir),
                                            self.office.pool.launcher.limits.scratch_mb << 20)
        if opened is None:
            precheck.check(source)
        converted = _convert.convert(self.office, source, kind, workdir, timeout, task_id, macros, opened)
        if opened is not None and password and protect:
            protection.protect(converted.path, password)  # the whole of it, as the customer sent it
            converted = dataclasses.replace(converted, protected=True)
        return converted

    def places(self) -> dict[str, Path]:
        """The directories whose disk a conversion writes to, by name: a full one is a fault of the service."""
        return {"work": self.office.job_dir, "LibreOffice profile": self.office.profile}

    def close(self) -> None:
        self.office.close()


def sandbox_problem(data_dir: str | Path) -> str | None:
    """Why LibreOffice's sandbox cannot be made here, in words, or None."""
    return sandbox.problem(Path(data_dir) / "work" / f"{_office.HOST}.{os.getpid()}.probe")
