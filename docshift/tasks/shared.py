"""What the worker's roles (``worker.py``: one box, coordinator, node) are made of: a thread's own connection and
store client (``PerThread``), and the process's conversions (``Conversions``: one engine shared by its threads, its
start's state and the service's faults)."""

import logging
import threading
from collections.abc import Callable

from sqlite_utils import Database

from docshift.engine import Engine
from docshift.settings import Settings
from docshift.storage import ObjectStore, connection
from docshift.storage.spool import short_of_room
from docshift.tasks.faults import Faults

log = logging.getLogger("docshift.worker")


class PerThread:
    """A SQLite connection and an object store client for each thread that asks, made on first use."""

    def __init__(self, config: Settings) -> None:
        self.config = config
        self._local = threading.local()

    def connection(self) -> Database:
        if not hasattr(self._local, "db"):
            self._local.db = connection.connect(self.config.database)
        return self._local.db

    def store(self) -> ObjectStore:
        if not hasattr(self._local, "store"):
            self._local.store = ObjectStore(self.config)
        return self._local.store


class Conversions:
    """The process's engine (one LibreOffice parent that forks a child for every file), shared by the threads that
    convert: the first to start starts it, the last to stop closes it. ``on_change()`` hears of every start and of
    every change of the service's faults (a full disk, an engine that cannot start)."""

    def __init__(self, config: Settings, on_change: Callable[[], object]) -> None:
        self.config, self.on_change = config, on_change
        self.faults = Faults(on_change=on_change, standing=self._short_of_room)
        self._engine: Engine | None = None
        self._state: tuple[str, str | None] | None = None  # (state, detail) of its last start
        self._users = 0  # threads that started it
        self._lock = threading.Lock()

    def engine(self) -> Engine:
        with self._lock:
            if self._engine is None:
                config = self.config
                self._engine = Engine.made(
                    config.data_dir, memory_limit_mb=config.office_memory_limit_mb,
                    cpu_seconds=config.office_cpu_limit_seconds, scratch_mb=config.office_scratch_limit_mb,
                    sandboxed=config.sandbox, threads=config.workers, on_start=self._started)
            return self._engine

    def _short_of_room(self) -> str | None:
        engine = self._engine
        return None if engine is None else short_of_room(engine.places())

    def _started(self, state: str, detail: str | None) -> None:
        with self._lock:
            self._state = (state, detail)
        self.on_change()

    def health(self) -> tuple[str, str | None]:
        """("ok" | "starting" | "broken", why) for /healthz: a standing fault says more than the starts that failed
        with it."""
        with self._lock:
            started = self._state
        broken = started[1] if started and started[0] == "broken" else None
        detail = self.faults.describe() or (f"LibreOffice fails its self-test at every start ({broken})"
                                            if broken else None)
        return ("broken" if detail else "ok" if started else "starting"), detail

    def thread_started(self) -> None:
        """A converting thread begins: LibreOffice warm before its first file."""
        engine = self.engine()
        with self._lock:
            self._users += 1
        try:
            engine.start()
        except Exception as error:
            log.warning("LibreOffice did not start yet, the first task will retry: %r", error)

    def thread_stopping(self) -> None:
        with self._lock:
            self._users -= 1
            last = self._users <= 0
        if last and self._engine is not None:  # the others' conversions are done
            self._engine.close()
