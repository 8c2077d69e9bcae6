"""The service's memory limit, watched: a LibreOffice child that grows into it is killed before the kernel's reclaim
slows every other conversion.

Under a memory limit (a container's ``--memory``, a systemd unit's ``MemoryMax``: this process's memory cgroup),
the kernel kills a process only once it can reclaim nothing more, and what it reclaims first is page cache: the
code of LibreOffice, Python and the object store, read again from disk as soon as it runs. A workbook whose child
grew to the limit of a 2000 MB service held it there for 30 s, 30,000 failed charges and 300 major faults a
second, while the other account's small files, 60 ms each alone, took 3 s at the median and up to a minute
(``bench/fairness.py --memory-mb``, with the service's files in the page cache charged to its own cgroup, as in a
container).

So a worker watches its cgroup while its children are at work: once the memory the kernel cannot reclaim without
swap (all that is charged, less the file pages) comes within ``RESERVE_SHARE`` of the limit (``RESERVE_MIN_MB`` at
least, ``RESERVE_MAX_MB`` at most), it kills its largest child at work, as the kernel's OOM killer would have picked
it, only earlier. That conversion then goes the way of a file the kernel killed (``convert.py``: tried again alone,
then failed as out of memory), counted by ``kills``.

Where no cgroup sets a limit (``make run`` on a bare host, a container started without ``--memory``), the machine's
memory is the limit and is watched the same way (``Machine``): the kernel reclaims the same page cache first there,
and every other process on the machine crawls with the service.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path

log = logging.getLogger("docshift.engine")

RESERVE_SHARE = 1 / 10  # of the limit, left for the page cache that the service's code runs from
RESERVE_MIN_MB = 160  # in the run above, major faults began with 110-160 MB of page cache left
RESERVE_MAX_MB = 1024  # a tenth of a large machine is more page cache than the service's code runs from
POLL_SECONDS = 0.1  # a child grew by 60-100 MB a second there: this overshoots by 10 MB at most
CALM_SECONDS = 1.0  # after a kill, for the memory to be given back before another is chosen
AT_WORK = "forkit-file"  # how the name a child takes once it has its file begins (``uno/forkit.py``)
PAGE = os.sysconf("SC_PAGE_SIZE")


class Cgroup:
    """This process's memory cgroup, read: v2's ``memory.max``, ``memory.current`` and ``memory.events``, or v1's
    ``memory.limit_in_bytes``, ``memory.usage_in_bytes`` and ``memory.oom_control``."""

    def __init__(self, path: Path, v2: bool) -> None:
        self.path, self.v2 = path, v2

    @classmethod
    def own(cls) -> Cgroup | None:
        """The nearest memory cgroup with a limit, this process's own or a parent (a unit's slice); where none has
        one, its own. In a container on cgroup v1 the path ``/proc/self/cgroup`` names is the host's, and the
        container sees its own group as the hierarchy's top: the walk up finds it there. None where no memory
        cgroup can be read."""
        try:
            lines = Path("/proc/self/cgroup").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            _, controllers, path = line.split(":", 2)
            if controllers == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
                top, v2 = Path("/sys/fs/cgroup"), True
            elif "memory" in controllers.split(","):
                top, v2 = Path("/sys/fs/cgroup/memory"), False
            else:
                continue
            own = group = top / path.lstrip("/")
            while True:
                if (candidate := cls(group, v2)).limit() is not None:
                    return candidate
                if group == top or group == group.parent:
                    break
                group = group.parent
            return cls(own if own.is_dir() else top, v2)
        return None

    def limit(self) -> int | None:
        """The limit in bytes, or None where there is none (or none below the machine's memory)."""
        try:
            text = (self.path / ("memory.max" if self.v2 else "memory.limit_in_bytes")).read_text().strip()
            limit = None if text == "max" else int(text)
        except (OSError, ValueError):
            return None
        return limit if limit is not None and limit < physical() else None

    def oom_kills(self) -> int | None:
        """How many processes the kernel's OOM killer has killed in this cgroup; None where it cannot be read. A
        LibreOffice child that dies as this count goes up ran out of memory; it did not crash on its file."""
        try:
            text = (self.path / ("memory.events" if self.v2 else "memory.oom_control")).read_text()
        except OSError:
            return None
        for entry in text.splitlines():
            name, _, count = entry.partition(" ")
            if name == "oom_kill":
                return int(count)
        return None

    def unreclaimable(self) -> int:
        """Bytes charged that the kernel cannot reclaim without swap: the usage less the file pages."""
        usage = int((self.path / ("memory.current" if self.v2 else "memory.usage_in_bytes")).read_text())
        stat = dict(line.split() for line in (self.path / "memory.stat").read_text().splitlines())
        prefix = "" if self.v2 else "total_"
        return usage - int(stat[f"{prefix}active_file"]) - int(stat[f"{prefix}inactive_file"])


class Machine:
    """The machine's memory, the limit where no cgroup sets one (``Cgroup.limit`` measures a limit against it too),
    and what the kernel cannot give back without swap: all of it less ``MemAvailable`` (``/proc/meminfo``: the
    kernel's own estimate of what it can free, the page cache and reclaimable kernel memory, less its reserves)."""

    def limit(self) -> int | None:
        return physical()

    def unreclaimable(self) -> int:
        return physical() - available()


def physical() -> int:
    """The machine's memory in bytes."""
    return os.sysconf("SC_PHYS_PAGES") * PAGE


def available() -> int:
    """``MemAvailable`` in bytes."""
    with open("/proc/meminfo") as info:
        for line in info:
            name, _, value = line.partition(":")
            if name == "MemAvailable":
                return int(value.split()[0]) << 10  # in kB
    raise KeyError("MemAvailable")


def reserve(limit: int) -> int:
    """The memory left below ``limit`` for the page cache, past which the largest child at work is killed."""
    return min(max(int(limit * RESERVE_SHARE), RESERVE_MIN_MB << 20), RESERVE_MAX_MB << 20)


class Watch:
    """Watches the memory cgroup's limit while conversions run (``busy``/``idle``), or the machine's where no cgroup
    sets one, and kills the largest of the children under ``root`` (a host pid: the sandbox's outermost process) at
    work once the limit is near. ``cgroup`` is where the kernel's OOM kills are counted (this process's own by
    default) and, if it has a limit, what is watched."""

    def __init__(self, name: str, cgroup: Cgroup | None = None) -> None:
        self.name, self.cgroup = name, cgroup or Cgroup.own()
        # which limit to watch, chosen once: the cgroup's, or else the machine's
        limited = self.cgroup is not None and self.cgroup.limit() is not None
        self.bounds: Cgroup | Machine = self.cgroup if limited and self.cgroup is not None else Machine()
        self.root: int | None = None
        self.kills = 0
        self._running = 0
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def busy(self, root: int | None) -> None:
        """A conversion begins under ``root``."""
        with self._changed:
            self.root, self._running = root, self._running + 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, daemon=True, name=f"{self.name}-memory")
                self._thread.start()
            self._changed.notify_all()

    def idle(self) -> None:
        """A conversion ended."""
        with self._changed:
            self._running -= 1

    def _loop(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._running > 0)
                root = self.root
            try:
                killed = self.check(root)
            except (OSError, ValueError, KeyError) as error:
                log.warning("%s: the memory limit could not be read (%s): no longer watched", self.name, error)
                return
            time.sleep(CALM_SECONDS if killed else POLL_SECONDS)

    def oom_kills(self) -> int | None:
        """Children killed for the limit: by the kernel's OOM killer in the cgroup, and by this watch before it;
        None where the cgroup's count cannot be read."""
        kernel = self.cgroup.oom_kills() if self.cgroup is not None else None
        return None if kernel is None else kernel + self.kills

    def check(self, root: int | None) -> bool:
        """Kill the largest child at work under ``root`` if the limit is near; whether one was killed."""
        limit = self.bounds.limit()
        if limit is None or root is None:
            return False
        used = self.bounds.unreclaimable()
        if used < limit - reserve(limit):
            return False
        sizes = {pid: resident(pid) for pid in descendants(root) if name(pid).startswith(AT_WORK)}
        if not sizes:
            return False
        largest = max(sizes, key=lambda pid: sizes[pid])
        self.kills += 1  # before the kill: its conversion sees the count risen as soon as it sees the child gone
        try:
            os.kill(largest, signal.SIGKILL)
        except ProcessLookupError:
            self.kills -= 1
            return False
        log.warning("%s: a LibreOffice child holding %d MB was killed, the %s memory at %d of its limit's %d MB",
                    self.name, sizes[largest] >> 20, "machine's" if isinstance(self.bounds, Machine) else
                    "service's", used >> 20, limit >> 20)
        return True


def descendants(root: int) -> list[int]:
    """The processes under ``root``, at any depth (a child is its forking thread's: every thread's are read)."""
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for thread in threads:
            try:
                children = Path(f"/proc/{pid}/task/{thread}/children").read_text().split()
            except OSError:
                continue
            found += [int(child) for child in children]
            pending += [int(child) for child in children]
    return found


def name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def resident(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0
