"""Where a worker process keeps its LibreOffice's files on the host, and what dead worker processes left there.

Each dir is named ``<host>.<pid>.<name>`` (``owned``), so that a worker's start can tell its dead predecessors' dirs
from those of the other worker processes on the host (``clear_leftovers``).
"""

import glob
import logging
import os
import re
import shutil
import socket
from pathlib import Path

log = logging.getLogger("docshift.office")

HOST = socket.gethostname()


def owned(name: str) -> str:
    """``<host>.<pid>.<name>``, ``name`` made safe for a path: what this worker process's dirs are named, so that
    ``clear_leftovers`` knows whose they are."""
    return f"{HOST}.{os.getpid()}.{re.sub(r'[^A-Za-z0-9_-]', '_', name)}"


def clear_leftovers(base_dir: str | Path) -> None:
    """Remove the job, profile and tasks dirs that dead worker processes on this host left in ``base_dir`` (a
    SIGKILL gives them no chance); call it when a worker process starts."""
    for kind in ("work", "office", "tasks"):
        for path in Path(base_dir, kind).glob(f"{glob.escape(HOST)}.*"):
            pid = path.name[len(HOST) + 1:].split(".", 1)[0]
            # our own pid in a name is a former process's (a container's worker always has the same)
            if pid.isdigit() and (int(pid) == os.getpid() or not alive(int(pid))):
                log.info("removing %s, left by worker process %s", path, pid)
                shutil.rmtree(path, ignore_errors=True)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
