"""How ``docshift convert`` shows its progress: on a terminal, a bar (done/total, failures, rate, ETA) with
each failure printed above it; otherwise one plain line per file, successes on stdout, failures on stderr."""

import sys
import threading
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
)
from rich.text import Text


class Shown(Protocol):
    def done(self, text: str, ok: bool) -> None:
        """One file is done: ``text`` says how."""

    def close(self) -> None:
        """The run is over (or stopped): leave the terminal as it was."""


class Lines:
    """Not a terminal: ``[n/total]`` and the file's line, one line each, nothing redrawn."""

    def __init__(self, total: int) -> None:
        self.total, self.count = total, 0
        self.lock = threading.Lock()

    def done(self, text: str, ok: bool) -> None:
        with self.lock:
            self.count += 1
            if ok:
                print(f"[{self.count}/{self.total}] {text}", flush=True)
            else:
                print(f"{text} [{self.count}/{self.total}]", file=sys.stderr, flush=True)

    def close(self) -> None:
        pass


class Rate(ProgressColumn):
    """Files a second since the start, and the time left at that rate: rich's own need two samples in a
    half-minute window, which a slow file never gives."""

    def render(self, task: Task) -> Text:
        elapsed = task.elapsed or 0
        if not task.completed or not elapsed:
            return Text("- files/s, ETA -", style="progress.data.speed")
        rate = task.completed / elapsed
        left = int((task.remaining or 0) / rate)
        return Text(f"{rate_text(rate)}, ETA {left // 3600}:{left // 60 % 60:02d}:{left % 60:02d}",
                    style="progress.data.speed")


def rate_text(rate: float) -> str:
    """A rate as people read one: ``120 files/s`` (not ``1.2e+02``), ``3.4 files/s``, ``0.25 files/s``, and a
    file every so many minutes as ``2.5 files/min``."""
    if rate >= 10:
        return f"{rate:.0f} files/s"
    if rate >= 0.1:
        return f"{rate:.2g} files/s"
    return f"{rate * 60:.2g} files/min"


class Bar:
    """A terminal: rich's bar on stdout; failures are printed above it, successes only counted."""

    def __init__(self, total: int) -> None:
        self.console = Console(file=sys.stdout, highlight=False)
        self.failed = 0
        self.progress = Progress(TextColumn("converting"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[failed]} failed"), Rate(), console=self.console,
                                 redirect_stderr=False)
        self.task = self.progress.add_task("convert", total=total, failed=0)
        self.progress.start()

    def done(self, text: str, ok: bool) -> None:
        if not ok:
            self.failed += 1
            self.console.print(text, markup=False, style="red", soft_wrap=True)
        self.progress.update(self.task, advance=1, failed=self.failed)

    def close(self) -> None:
        self.progress.stop()


def progress_for(total: int) -> Shown:
    """A bar when stdout is a terminal, plain lines otherwise."""
    return Bar(total) if sys.stdout.isatty() else Lines(total)
