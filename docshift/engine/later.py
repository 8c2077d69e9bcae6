"""Work on a thread of its own whose result a caller takes when it needs it: the conversion reads the legacy file
while LibreOffice converts it."""

import contextlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class Later(Future[T]):
    """``function(*args)`` run on a thread of its own from the first ``start()`` on; its result, or what it
    raised, in this Future. ``result()`` starts it if nothing did. ``after()`` runs next on the same thread, once
    the result is set: work whose result is kept elsewhere (a cache), which may fail unheard."""

    def __init__(self, function: Callable[..., T], *args: Any, after: Callable[[], object] | None = None) -> None:
        super().__init__()
        self._run: Callable[[], T] | None = lambda: function(*args)
        self._after = after
        self._began: float | None = None
        self.abandoned = False  # a caller stopped waiting for it

    def elapsed(self) -> float:
        """Seconds since it started (0 before)."""
        return 0.0 if self._began is None else time.monotonic() - self._began

    def start(self) -> None:
        run, self._run = self._run, None
        if run is None:
            return
        self._began = time.monotonic()

        def body() -> None:
            try:
                self.set_result(run())
            except BaseException as error:
                self.set_exception(error)
            if self._after is not None and not self.abandoned:
                with contextlib.suppress(Exception):  # what reads it later meets the same error, and says so
                    self._after()

        threading.Thread(target=body, daemon=True, name="source-inventory").start()

    def result(self, timeout: float | None = None) -> T:
        self.start()
        return super().result(timeout)
