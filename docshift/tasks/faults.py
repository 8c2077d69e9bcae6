"""Faults of the service, not of the file: a full disk, a LibreOffice that cannot start.

Such a fault is retried without using the file's attempts and never ends a task FAILED
(SPEC). ``diagnose`` tells it from the file's own failures; each worker process keeps one
``Faults``, which holds its conversions off a little longer after every try that met one
(so a fault that stays is no busy loop) and names what stands for ``/healthz``, until a
conversion gets through.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from docshift.contract import TaskErrorCode, Verdict
from docshift.engine import Engine
from docshift.errors import ConversionFailed, DiskFull, ServiceFault
from docshift.storage.spool import OUT_OF_SPACE, short_of_room

if TYPE_CHECKING:
    from docshift.tasks.conversion import Outcome

log = logging.getLogger("docshift.faults")

# A conversion that fails while the disk of its job or profile has less than spool.DISK_RESERVE_BYTES free ran
# out of room: LibreOffice says only that it could not write, and removes what it had written.
# the failures a full disk causes: a load or store that failed, no output, a truncated package
DISK_CODES = (TaskErrorCode.CONVERSION_FAILED, TaskErrorCode.OUTPUT_INVALID)
# seconds a process holds off after a try met a fault: doubled at each one in a row, up to the longest
FIRST_PAUSE, LONGEST_PAUSE = 5.0, 300.0


def diagnose(error: BaseException, engine: Engine) -> ServiceFault | None:
    """The fault of the service behind ``error``, whatever a conversion on ``engine`` raised, or
    None when it may be the file's."""
    if isinstance(error, ConversionFailed) and error.code not in DISK_CODES:
        return None
    short = short_of_room(engine.places())
    if short or _out_of_space(error):
        return DiskFull(short or f"the disk is full: {error}")
    return error if isinstance(error, ServiceFault) else None


def _out_of_space(error: BaseException | None) -> bool:
    while error is not None:
        if isinstance(error, OSError) and error.errno in OUT_OF_SPACE:
            return True
        error = error.__cause__ or error.__context__
    return False


class Faults:
    """The fault of the service this process met last, while it stands, and how long the process
    holds off its conversions. ``on_change()`` hears when a fault comes or goes; ``standing()`` says what of the
    service's own stands now (a full disk), looked at when a file fails for its own sake."""

    def __init__(self, on_change: Callable[[], object] | None = None, first: float = FIRST_PAUSE,
                 longest: float = LONGEST_PAUSE, standing: Callable[[], str | None] | None = None) -> None:
        self.on_change, self.standing = on_change, standing
        self.first, self.longest = first, longest
        self._lock = threading.Lock()
        self.reason: str | None = None
        self.pause = 0.0
        self.until = 0.0

    def observe(self, outcome: Outcome) -> None:
        """Take note of a conversion's Outcome: a fault, or a conversion that got through (SUCCEEDED, or FAILED
        for the file's sake). A file can fail for its own sake before it writes anything (an encrypted one): while
        the disk is still full, such a failure leaves the fault standing, its hold-off as it was."""
        if outcome.fault:
            self.failed(outcome.fault)
        elif outcome.status == Verdict.SUCCEEDED:
            self.passed()
        elif outcome.status == Verdict.FAILED:
            still = self.standing() if self.reason and self.standing else None
            if still is None:
                self.passed()
            else:  # what stands is the disk, whatever was met before
                with self._lock:
                    self.reason = still

    def failed(self, reason: str) -> None:
        with self._lock:
            self.reason = reason
            self.pause = min(self.longest, max(self.first, 2 * self.pause))
            self.until = time.monotonic() + self.pause
        self._changed()

    def passed(self) -> None:
        with self._lock:
            standing, self.reason, self.pause, self.until = self.reason, None, 0.0, 0.0
        if standing:
            log.info("the fault of the service has passed: %s", standing)
            self._changed()

    def wait(self) -> float:
        """Seconds to hold off before the next conversion; 0 when nothing stands or the pause is over."""
        with self._lock:
            return max(0.0, self.until - time.monotonic()) if self.reason else 0.0

    def describe(self) -> str | None:
        """What stands, for /healthz, or None."""
        with self._lock:
            if self.reason is None:
                return None
            return f"{self.reason}; conversions wait, next try in {max(0, self.until - time.monotonic()):.0f} s"

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception as error:  # a report that cannot be recorded must not stop the conversions
                log.warning("could not report the fault: %r", error)
