"""``python -m docshift.allinone [process ...]``: processes of the ``Procfile`` run side by side
and stopped in the right order; by default ``web``, ``worker`` and ``objects``. It is the
container image's default command, for platforms that run one container: SQLite needs the web and
the worker on one volume.

SIGTERM (or SIGINT) drains. The web finishes the requests it serves (gunicorn on SIGTERM); the
worker finishes the conversions it runs, so it gets SIGINT (huey stops at once on SIGTERM); the
embedded object store stops last, once the worker has stored its last results. A process that
exits by itself stops the others the same way, and its exit status becomes this one's (the
worker's 78, no sandbox, among them).

A process killed by a signal that asks no process to stop (SIGKILL from the OOM killer or an
operator, a crash) is started again at once, the others running on: stopping them all for it would
keep the API down while the worker waits out its patience for a store that nothing starts again
(5.4 minutes, when the object store was killed). ``RESTARTS`` such starts within ``RESTART_WINDOW``
seconds, and the next death stops them all as an exit does.
"""

import logging
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from docshift import logs

log = logging.getLogger("docshift.allinone")
DEFAULT = ("web", "worker", "objects")
# how each process is asked to stop without losing work; the others get SIGTERM
DRAIN = {"worker": signal.SIGINT}
# stopped after all the others: the worker stores its results in it while it drains
LAST = {"objects"}
SIGNALS = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT}
# deaths that are asked for: a process stopped by one of these is not started again
ASKED = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT}
RESTARTS, RESTART_WINDOW = 5, 600


def procfile(path: str = "Procfile") -> dict[str, list[str]]:
    """``{name: argv}`` of a Procfile."""
    commands = {}
    for line in Path(path).read_text().splitlines():
        name, sep, command = line.partition(":")
        if sep and name.strip() and not name.startswith("#"):
            commands[name.strip()] = shlex.split(command)
    return commands


def run(names: list[str], commands: dict[str, list[str]]) -> int:
    """Start ``names``, wait for a stop signal or for one of them to exit, then stop them all;
    returns the exit status."""
    unknown = [name for name in names if name not in commands]
    if unknown:
        raise SystemExit(f"not in the Procfile: {', '.join(unknown)} (it has {', '.join(commands)})")
    # blocked before the first start, so no signal is missed; each child gets the usual mask back
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    # Started from a background shell or the like, SIGINT and SIGQUIT come ignored, and an ignored signal
    # is discarded, never waited for; a worker that inherited that could never be drained
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)
    # each in a process group of its own: a terminal's Ctrl-C reaches only this process, which
    # then stops them in order
    def start(name: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(commands[name], process_group=0, preexec_fn=_as_usual)

    processes = {name: start(name) for name in names}
    restarted: list[float] = []  # when each start again was
    exited = None
    while exited is None:
        for name, process in processes.items():
            if process.poll() is None:
                continue
            killed_by = killing_signal(process.returncode)
            restarted = [at for at in restarted if at > time.monotonic() - RESTART_WINDOW]
            if killed_by is None or killed_by in ASKED or len(restarted) >= RESTARTS:
                exited = name
                break
            restarted.append(time.monotonic())
            log.warning("%s was killed (%s); starting it again", name, killed_by.name)
            processes[name] = start(name)
        if exited is None and signal.sigwaitinfo(SIGNALS).si_signo != signal.SIGCHLD:
            break
    if exited:
        log.warning("%s exited with status %s; stopping the others", exited, processes[exited].returncode)
    stop(processes)
    if not exited:
        return max(abs(p.returncode) for p in processes.values())
    status = processes[exited].returncode
    return 128 - status if status < 0 else status  # killed by signal n: 128 + n, as a shell says it (not 256 - n)


def killing_signal(status: int) -> signal.Signals | None:
    """The signal that ended a process of exit ``status``: a negative status, or a wrapper's 128 + its number (the
    object store's launcher reports weed's death so); None for an exit of its own."""
    number = -status if status < 0 else status - 128 if 128 < status < 128 + signal.NSIG else None
    try:
        return signal.Signals(number) if number is not None else None
    except ValueError:
        return None


def _as_usual() -> None:
    """In a child before it runs: the signals this process waits for, unblocked and with their usual actions."""
    for number in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


def stop(processes: dict[str, subprocess.Popen[bytes]]) -> None:
    for group in ([n for n in processes if n not in LAST], [n for n in processes if n in LAST]):
        for name in group:
            if processes[name].poll() is None:
                processes[name].send_signal(DRAIN.get(name, signal.SIGTERM))
        for name in group:
            processes[name].wait()


def main(argv: list[str] | None = None) -> None:
    logs.configure()
    names = (sys.argv[1:] if argv is None else argv) or list(DEFAULT)
    sys.exit(run(names, procfile()))


if __name__ == "__main__":
    main()
