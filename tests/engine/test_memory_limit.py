"""A LibreOffice killed for a memory limit of the service's (a container's ``--memory``), by the engine's watch
before the kernel's OOM killer has to: the task's message says it ran out of memory, not that it crashed on the file,
and the one killed is the largest child at work."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from conftest import ROOT, wait_for

from docshift.engine import memory, sandbox

CORPUS = ROOT.parent / "shared" / "corpus"
# the engine's parent holds about 300 MB: this deck's child needs more than the rest (it converts without the limit)
LIMIT_MB, DECK = 700, CORPUS / "ppt" / "42474-2.ppt"

CONVERT = """
import json, os, sys
from pathlib import Path
with open(sys.argv[1], "w") as procs:
    procs.write(str(os.getpid()))  # into the limited cgroup, before LibreOffice starts: its processes follow
from docshift.engine import Engine, Forkit, memory
from docshift.errors import ConversionFailed
engine = Engine(Forkit(Path(sys.argv[2]), name="oom"))
engine.start()
found = {"before": memory.Cgroup.own().oom_kills()}
try:
    with engine.workspace("t") as work:
        engine.convert(Path(sys.argv[3]), "ppt", work, 120)
    found["outcome"] = "converted"
except ConversionFailed as error:
    found["outcome"], found["message"] = error.code, str(error)
found["after"], found["watch"] = memory.Cgroup.own().oom_kills(), engine.office.watch.kills
engine.close()
print(json.dumps(found))
"""

# three of that deck at once, each fitting alone (about 1.5-1.8 GB with the parent), none beside another
ALONE_LIMIT_MB, AT_ONCE = 2000, 3

CONVERT_AT_ONCE = """
import json, os, sys, threading
from pathlib import Path
with open(sys.argv[1], "w") as procs:
    procs.write(str(os.getpid()))
from docshift.engine import Engine, Forkit, memory
from docshift.errors import ConversionFailed
files = [Path(p) for p in sys.argv[3:]]
engine = Engine(Forkit(Path(sys.argv[2]), name="oom", ready=len(files)))
engine.start()
found = {"before": memory.Cgroup.own().oom_kills(), "outcomes": [None] * len(files)}
def run(n, path):
    try:
        with engine.workspace(f"t{n}") as work:
            engine.convert(path, "ppt", work, 240)
        found["outcomes"][n] = "converted"
    except ConversionFailed as error:
        found["outcomes"][n] = str(error)
threads = [threading.Thread(target=run, args=(n, path)) for n, path in enumerate(files)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
found["after"], found["watch"] = memory.Cgroup.own().oom_kills(), engine.office.watch.kills
engine.close()
print(json.dumps(found))
"""


def memory_cgroup(limit_bytes):
    """A memory cgroup of the test's own at its hierarchy's root (v2, or v1's memory hierarchy) with the limit;
    the path of the file a process writes its pid into to join it."""
    name = f"docshift-test-{uuid.uuid4().hex[:8]}"
    if Path("/sys/fs/cgroup/cgroup.controllers").exists():  # v2
        group = Path("/sys/fs/cgroup", name)
        group.mkdir()
        (group / "memory.max").write_text(str(limit_bytes))
        if (group / "memory.swap.max").exists():  # no swap to slip into instead
            (group / "memory.swap.max").write_text("0")
    else:
        group = Path("/sys/fs/cgroup/memory", name)
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(limit_bytes))
    return group


def remove(group):
    for _ in range(50):  # its processes are gone once the engine closed; the kernel lets go of the group
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.1)


@pytest.mark.slow
def test_a_file_that_runs_the_service_out_of_memory_is_named_so(tmp_path):
    group = memory_cgroup(LIMIT_MB << 20)
    try:
        run = subprocess.run([sys.executable, "-c", CONVERT, str(group / "cgroup.procs"), str(tmp_path / "office"),
                              str(DECK)], capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert run.returncode == 0, run.stderr[-3000:]
        found = json.loads(run.stdout.splitlines()[-1])
    finally:
        remove(group)
    assert found["outcome"] == "conversion_failed", found
    # the second try ran with no other file converting: it is the file's own need, not its neighbours'
    assert found["message"] == ("LibreOffice ran out of memory converting this file (the service's memory limit), "
                                "twice, the second time with no other file converting.")
    # both tries were killed by the engine's watch, near the limit, before the kernel's reclaim and OOM killer
    assert found["watch"] == 2, found
    assert found["after"] == found["before"], found


@pytest.mark.slow
def test_files_that_run_out_of_memory_together_convert_one_after_another(tmp_path):
    """Under a limit each fits alone, three large decks at once: the kernel kills some, and each is tried again
    with no other file converting. Tried again at once, beside the others, two of the three failed."""
    group = memory_cgroup(ALONE_LIMIT_MB << 20)
    try:
        run = subprocess.run([sys.executable, "-c", CONVERT_AT_ONCE, str(group / "cgroup.procs"),
                              str(tmp_path / "office"), *[str(DECK)] * AT_ONCE],
                             capture_output=True, text=True, timeout=600, cwd=ROOT)
        assert run.returncode == 0, run.stderr[-3000:]
        found = json.loads(run.stdout.splitlines()[-1])
    finally:
        remove(group)
    assert found["watch"] + found["after"] > found["before"], found  # they did not fit together
    assert found["outcomes"] == ["converted"] * AT_ONCE, found


def test_the_oom_kill_count_is_read_from_this_process_s_own_cgroup():
    """On this host, as in a container (``tests/image/run.py``): a count, not None (its absence would hide every OOM
    kill)."""
    assert isinstance(memory.Cgroup.own().oom_kills(), int)


def test_a_retry_after_an_oom_kill_waits_for_the_conversions_running_and_runs_alone():
    room, events, lock = sandbox.Room(), [], threading.Lock()
    first_in, release_first = threading.Event(), threading.Event()

    def note(what):
        with lock:
            events.append(what)

    def neighbour():
        with room.shared(30) as alone:
            note(("neighbour in", alone))
            first_in.set()
            release_first.wait(30)
            note("neighbour out")

    def retry():
        with room.alone(30) as alone:
            note(("retry in", alone))
            time.sleep(0.2)
            note("retry out")

    def later():
        with room.shared(30):
            note("later in")

    threads = [threading.Thread(target=neighbour)]
    threads[0].start()
    assert first_in.wait(30)
    threads.append(threading.Thread(target=retry))
    threads[1].start()
    time.sleep(0.2)  # the retry waits for the neighbour, and a conversion that comes now waits for the retry
    threads.append(threading.Thread(target=later))
    threads[2].start()
    time.sleep(0.2)
    assert events == [("neighbour in", False)]
    release_first.set()
    for thread in threads:
        thread.join(30)
    assert events == [("neighbour in", False), "neighbour out", ("retry in", True), "retry out", "later in"]


def test_conversions_share_the_room_and_a_wait_to_be_alone_is_bounded():
    room = sandbox.Room()
    with room.shared(1), room.shared(1) as beside:  # any number at once
        assert beside is False
        started = time.monotonic()
        with room.alone(0.3) as alone:  # the others did not end in time: it goes ahead beside them, and says so
            assert alone is False
        assert 0.25 < time.monotonic() - started < 5
    with room.alone(1) as alone:
        assert alone is True


def test_a_file_waits_behind_one_run_alone_only_as_long_as_a_long_run():
    """A retry alone after an OOM kill runs until it ends; a file that comes meanwhile waits a long run's time
    (the engine gives it a twelfth of the timeout, 10 s by default), then goes ahead beside it."""
    room = sandbox.Room()
    with room.alone(1) as alone:
        assert alone is True
        started = time.monotonic()
        with room.shared(0.3) as beside:
            assert beside is False
            assert 0.25 < time.monotonic() - started < 5
    assert sandbox.LONG_RUN_SHARE * 120 == 10


def test_the_files_that_come_while_one_runs_alone_share_one_wait():
    """The wait is counted from when the retry began to wait, once: files that come later wait what is left of it,
    and none after it. Each with a wait of its own, files sent every half second let one through a long run's time,
    and a second account's files waited a minute behind an attacker's."""
    room, entered, lock = sandbox.Room(), [], threading.Lock()

    def newcomer():
        with room.shared(0.6), lock:
            entered.append(time.monotonic())

    with room.alone(1) as alone:
        assert alone is True
        began = time.monotonic()
        threads = []
        for _ in range(3):  # one every 0.15 s within the window
            threads.append(threading.Thread(target=newcomer))
            threads[-1].start()
            time.sleep(0.15)
        for thread in threads:
            thread.join(10)
        # all three went in together when the one window ended, not one window after another
        assert len(entered) == 3
        assert all(0.5 < moment - began < 1.0 for moment in entered), [moment - began for moment in entered]
        assert max(entered) - min(entered) < 0.15
        late = time.monotonic()
        newcomer()  # past the window: at once
        assert entered[-1] - late < 0.1


# a tree like a sandbox's: a child at work of 80 MB, one of 280 MB, and one waiting for a file of 180 MB (larger than
# the first, never killed: it has no file); in a cgroup of 700 MB, past its watch's line (700 - 160 MB) together
SIZES = (80, 280, 180)
TREE = """
import ctypes, json, os, sys, threading, time
def child(megabytes, title):
    ready, told = os.pipe()
    pid = os.fork()
    if pid == 0:
        ctypes.CDLL(None).prctl(15, title, 0, 0, 0)
        block = bytearray(megabytes << 20)
        for at in range(0, len(block), 4096):
            block[at] = 1
        os.write(told, b"up")
        time.sleep(120)
        os._exit(0)
    os.read(ready, 2)
    return pid
pids = {}
def fork(name, megabytes, title):  # from a thread of its own, as LibreOffice's main loop forks
    pids[name] = child(megabytes, title)
small, large, waiting = (int(size) for size in sys.argv[1:4])
threads = [threading.Thread(target=fork, args=arguments) for arguments in
           (("small", small, b"forkit-file"), ("large", large, b"forkit-file"), ("waiting", waiting, b"forkit-ready"))]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps(pids), flush=True)
time.sleep(120)
"""


def test_the_watch_kills_the_largest_child_at_work_once_the_limit_is_near():
    group = memory_cgroup(700 << 20)
    tree = subprocess.Popen(["/bin/sh", "-c", 'echo $$ > "$0" && exec "$1" -c "$2" "$3" "$4" "$5"',
                             str(group / "cgroup.procs"), sys.executable, TREE, *map(str, SIZES)],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        pids = json.loads(tree.stdout.readline())
        watch = memory.Watch("test", memory.Cgroup(group, v2=(group / "memory.max").exists()))
        used, limit = watch.cgroup.unreclaimable(), watch.cgroup.limit()
        assert limit - memory.RESERVE_MIN_MB * 2**20 < used < limit, (used >> 20, limit >> 20)
        assert memory.descendants(tree.pid) and set(pids.values()) <= set(memory.descendants(tree.pid))
        assert watch.check(tree.pid) is True
        assert watch.kills == 1
        wait_for(lambda: state(pids["large"]) == "Z", 5, "the killed child's end")  # its parent never reaps it
        assert {name: state(pid) for name, pid in pids.items()} == {"small": "S", "large": "Z", "waiting": "S"}
        time.sleep(0.5)  # the memory of the one killed is given back: no second kill
        assert watch.check(tree.pid) is False
    finally:
        os.killpg(tree.pid, signal.SIGKILL)  # and its children
        tree.wait()
        tree.stdout.close()
        remove(group)


def state(pid):
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_without_a_cgroup_limit_the_machine_s_memory_is_watched():
    group = memory_cgroup(700 << 20)
    try:
        (group / ("memory.max" if (group / "memory.max").exists() else "memory.limit_in_bytes")).write_text(
            "max" if (group / "memory.max").exists() else "-1")
        cgroup = memory.Cgroup(group, v2=(group / "memory.max").exists())
        assert cgroup.limit() is None
        watch = memory.Watch("test", cgroup)
    finally:
        remove(group)
    assert isinstance(watch.bounds, memory.Machine)
    assert watch.bounds.limit() == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert 0 < watch.bounds.unreclaimable() < watch.bounds.limit()
    assert watch.check(1) is False  # this machine is far from its limit
    # the line: a tenth of the machine, at least 160 MB and at most 1 GB
    assert memory.reserve(700 << 20) == 160 << 20 and memory.reserve(4 << 30) == (4 << 30) // 10
    assert memory.reserve(24 << 30) == 1 << 30


# what the tree's children take on a machine with no limit: once they are up, the line is put 1000 MB above what the
# machine has free, so the largest at work, 3000 MB, is killed, and then 2000 MB more than the line are free, less
# what the suite's other tests take meanwhile (a clean-clone run met one that took 1200 MB within the half second)
MACHINE_SIZES = (100, 3000, 300)


def test_without_a_cgroup_limit_the_largest_child_at_work_is_killed_near_the_machine_s_limit(monkeypatch):
    """The same kill as under a cgroup's limit, on the machine's real memory. This test cannot fill a machine's memory
    beside the others, so it puts the line where the machine's free memory (``MemAvailable``) is once the tree is
    up, 1000 MB above it: wide margins, as the suite's other tests take and free memory meanwhile."""
    watch = memory.Watch("test", memory.Cgroup(Path("/nonexistent"), v2=True))
    assert isinstance(watch.bounds, memory.Machine)
    tree = subprocess.Popen([sys.executable, "-c", TREE, *map(str, MACHINE_SIZES)], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        pids = json.loads(tree.stdout.readline())
        line = (memory.available() >> 20) + 1000
        monkeypatch.setattr(memory, "RESERVE_MIN_MB", line)
        monkeypatch.setattr(memory, "RESERVE_MAX_MB", line)
        assert watch.check(tree.pid) is True
        assert watch.kills == 1
        wait_for(lambda: state(pids["large"]) == "Z", 5, "the killed child's end")
        assert {name: state(pid) for name, pid in pids.items()} == {"small": "S", "large": "Z", "waiting": "S"}
        wait_for(lambda: memory.available() >> 20 > line, 10, "the killed child's memory back")
        assert watch.check(tree.pid) is False
        assert watch.kills == 1
    finally:
        os.killpg(tree.pid, signal.SIGKILL)
        tree.wait()
        tree.stdout.close()
