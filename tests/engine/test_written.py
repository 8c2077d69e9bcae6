"""What a child copies before its file comes: the parent's pages that children write (``engine/uno/written.py``).

The learning and the copying are tried with real forks of this process and its real page map, on a private mapping
whose pages each learner writes as the test says; the engine's own waiting child is then looked at from the host."""

import ctypes
import importlib.util
import json
import mmap
import os
import signal
import sys
import time
import types

import pytest
from conftest import ROOT, office_pids

from docshift.engine.forkit import Forkit

UNO = ROOT / "docshift" / "engine" / "uno"


def uno_module(name, file):
    """A module of the sandbox's parent, loaded as the parent loads it: with the modules beside it importable."""
    sys.path.insert(0, str(UNO))
    try:
        spec = importlib.util.spec_from_file_location(name, UNO / file)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(UNO))
    return module


written = uno_module("written", "written.py")
PAGE = written.PAGE
PAGES = 16
# the pages of the block each learner writes: pages 4-7 by two of them, 10-11 by two, the rest by one or none
PLAN = {"a": range(8), "b": range(4, 12), "c": range(10, 14)}
WRITTEN_BY_TWO = {4, 5, 6, 7, 10, 11}


@pytest.fixture
def block():
    """A private anonymous mapping of ``PAGES`` pages, each written once (present in this process)."""
    mapped = mmap.mmap(-1, PAGES * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for page in range(PAGES):
        mapped[page * PAGE] = 1
    yield mapped, ctypes.addressof(ctypes.c_char.from_buffer(mapped))
    mapped.close()


def fork(become_child):
    pid = os.fork()
    if pid == 0:
        become_child(os.getpid())  # never returns
    return pid


def alone(address, pages=PAGES):
    """The pages of the mapping at ``address`` this process holds alone (copied, or written since a fork)."""
    with open("/proc/self/pagemap", "rb") as pagemap:
        pagemap.seek(address // PAGE * 8)
        entries = [int.from_bytes(pagemap.read(8), "little") for _ in range(pages)]
    wanted = written.PRESENT | written.EXCLUSIVE
    return {page for page, entry in enumerate(entries) if entry & wanted == wanted}


def in_runs(runs, address, flag=0, pages=PAGES):
    """The pages of the mapping at ``address`` in those of ``runs`` of ``flag`` (0: written, or GROWN)."""
    return {(start - address) // PAGE + n for start, size, given in runs if given == flag
            for n in range(size // PAGE) if address <= start < address + pages * PAGE}


def learned(block, tmp_path):
    mapped = block[0]

    def convert(name, _, scratch):
        for page in PLAN[name]:
            mapped[page * PAGE] = 2

    found = written.Written(str(tmp_path))
    found.learn(fork, convert, [(name, "filter") for name in PLAN], lambda pid: str(tmp_path / f"child-{pid}"))
    return found


def test_the_pages_half_the_learners_wrote_are_what_children_copy(block, tmp_path):
    found = learned(block, tmp_path)
    assert found.learned == 3
    assert in_runs(found.runs, block[1]) == WRITTEN_BY_TWO
    assert not list(tmp_path.iterdir()), "a learner's list or temp dir was left behind"
    assert block[0][4 * PAGE] == 1, "a learner's write reached the parent"


def test_a_waiting_child_holds_its_copies_before_it_writes_and_they_read_the_same(block, tmp_path):
    found = learned(block, tmp_path)
    mapped, address = block
    told, tell = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            before = alone(address)
            found.copy()
            os.write(tell, json.dumps([sorted(before), sorted(alone(address)), mapped[4 * PAGE]]).encode())
        finally:
            os._exit(0)
    os.close(tell)
    before, after, value = json.loads(os.read(told, 65536))
    os.waitpid(pid, 0)
    assert before == [] and set(after) == WRITTEN_BY_TWO and value == 1


def test_a_list_is_counted_only_where_the_parent_has_writable_pages(block, tmp_path):
    """A learner's list names pages: those outside the parent's private mappings, a page of a writable mapping
    listed as grown (or the other way round), or a list cut short, count for nothing."""
    found = learned(block, tmp_path)
    address = block[1]
    first = address // PAGE
    assert found.mappings and not any(start <= 1 < end for start, end, _ in found.mappings)
    listed = (1, 2, first + 15, (first + 14) | written.GROWN)
    (tmp_path / "written-1").write_bytes(b"".join(page.to_bytes(8, "little") for page in listed))
    (tmp_path / "written-2").write_bytes(b"\0" * 7)
    found.count(1)
    found.count(2)
    assert found.counts[first + 15] == 1 and 1 not in found.counts and 2 not in found.counts
    assert (first + 14) | written.GROWN not in found.counts
    assert found.learned == 4 and not list(tmp_path.iterdir())


def private_dirty(pid):
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        return next(int(line.split()[1]) for line in rollup if line.startswith("Private_Dirty:")) << 10


def waiting_child(office):
    found = office_pids(office.process.pid)
    for pid in found[1:]:
        with open(f"/proc/{pid}/comm") as comm:
            if comm.read().strip() == "forkit-ready":
                return pid
    raise AssertionError(f"no child waits below {found}")


@pytest.mark.slow
def test_the_engines_waiting_child_has_copied_what_children_write(office, legacy, tmp_path):
    """The service's engine learns from a learner of each self-test file at its start, and its waiting child holds a
    private copy of about a thousand of the parent's pages more than the waiting child of an engine with no learners;
    a file converts the same on both."""
    bare = Forkit(tmp_path / "bare", name="bare", learners=0)
    bare.start()
    try:
        for engine in (office, bare):  # a child that converted a file is gone, and its successor waits
            engine.export(legacy["xls"], tmp_path / f"{engine.name}.xlsx", "Calc Office Open XML", 60)
        copied, plain = (private_dirty(waiting_child(engine)) for engine in (office, bare))
        assert office.pages["learners"] == 3 and office.pages["copied"] > 500 and office.pages["grown"] > 500
        assert bare.pages == {"learners": 0, "copied": 0, "grown": 0}
        assert copied - plain > 2 << 20, (copied >> 10, plain >> 10)
        facts = [engine.export(legacy["ppt"], tmp_path / f"{engine.name}.pptx", "Impress Office Open XML", 60)
                 for engine in (office, bare)]
        for found in facts:
            found.pop("pid", None)
            found.pop("seconds", None)
        assert facts[0] == facts[1]
    finally:
        bare.close()


def test_learners_past_their_time_are_killed_and_no_more_are_forked(block, tmp_path, monkeypatch):
    """A learner that never ends holds up the parent's start only ``LEARN_SECONDS``: it is killed, the learners after
    it are not forked, and what the others listed still counts."""
    monkeypatch.setattr(written, "LEARN_SECONDS", 0.5)
    mapped, address = block
    forked = []

    def convert(name, _, scratch):
        if name == "hangs":
            os.kill(os.getpid(), signal.SIGSTOP)
        for page in PLAN["a"]:
            mapped[page * PAGE] = 2

    def counted(become_child):
        forked.append(fork(become_child))
        return forked[-1]

    found = written.Written(str(tmp_path))
    began = time.monotonic()
    found.learn(counted, convert, [("a", None), ("hangs", None), ("a", None)], lambda pid: str(tmp_path / f"c{pid}"))
    assert time.monotonic() - began < 5 and len(forked) == 2 and found.learned == 1
    assert in_runs(found.runs, address) == set(PLAN["a"])
    with pytest.raises(ChildProcessError):
        os.waitpid(forked[1], os.WNOHANG)



def test_a_child_opens_and_writes_the_reserve_learners_grew_their_heap_into_but_no_guard(tmp_path):
    """A heap grows into a reserve its allocator opens as it goes (a malloc arena's, ``---p``): a child opens and
    writes, before its file, the pages half the learners grew into, which read as zeros. A page a learner opened and
    closed again (a guard) is never opened."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    reserve = libc.mmap(None, PAGES * PAGE, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    grow = {"a": range(6), "b": range(8), "c": range(2)}  # pages 0-5 by two or three learners, 6-7 by one

    def convert(name, _, scratch):
        assert libc.mprotect(reserve, len(grow[name]) * PAGE, 3) == 0
        ctypes.memset(reserve, 7, len(grow[name]) * PAGE)
        guard = reserve + 12 * PAGE  # opened, written, closed again
        assert libc.mprotect(guard, PAGE, 3) == 0
        ctypes.memset(guard, 7, PAGE)
        assert libc.mprotect(guard, PAGE, 0) == 0

    try:
        (tmp_path / "lists").mkdir()
        found = written.Written(str(tmp_path / "lists"))
        found.learn(fork, convert, [(name, "filter") for name in grow], lambda pid: str(tmp_path / f"c{pid}"))
        assert in_runs(found.runs, reserve, written.GROWN) == set(range(6))
        assert found.summary()["grown"] == 6
        told, tell = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                found.copy()
                held = sorted(alone(reserve))
                zeros = ctypes.string_at(reserve, 6 * PAGE) == bytes(6 * PAGE)
                with open("/proc/self/maps") as lines:
                    modes = {int(line.split("-")[0], 16): line.split()[1] for line in lines}
                os.write(tell, json.dumps([held, zeros, modes.get(reserve), modes.get(reserve + 6 * PAGE)]).encode())
            finally:
                os._exit(0)
        os.close(tell)
        held, zeros, opened, rest = json.loads(os.read(told, 65536))
        os.waitpid(pid, 0)
        assert held == list(range(6)) and zeros and (opened, rest) == ("rw-p", "---p")
    finally:
        libc.munmap(reserve, PAGES * PAGE)


def huge_kb(address):
    """The kB of 2 MB pages in this process's mapping that holds ``address`` (``/proc/self/smaps``)."""
    inside = False
    with open("/proc/self/smaps") as lines:
        for line in lines:
            if "-" in line.split()[0] and len(line.split()) >= 5:
                start, end = (int(bound, 16) for bound in line.split()[0].split("-"))
                inside = start <= address < end
            elif inside and line.startswith("AnonHugePages:"):
                return int(line.split()[1])
    return 0


def test_a_child_opens_a_grown_reserve_a_step_at_a_time_as_malloc_does_never_in_a_2_mb_page(tmp_path):
    """Opened and written at once, 6 MB of a reserve marked for large pages comes in 2 MB pages, each zeroed whole
    and costlier to free; a heap opened a step at a time never gets one. A child opens what learners grew into a
    step at a time too."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mprotect.argtypes = libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size, grown = 16 << 20, 6 << 20
    reserves = [libc.mmap(None, size, 0, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0) for _ in range(2)]
    starts = [(reserve + (2 << 20) - 1) & ~((2 << 20) - 1) for reserve in reserves]  # 2 MB aligned inside each
    for reserve in reserves:
        libc.madvise(reserve, size, 14)  # MADV_HUGEPAGE, as the parent marks its heaps' reserves
    try:
        assert libc.mprotect(starts[1], grown, 3) == 0 and libc.madvise(starts[1], grown, 23) == 0
        if huge_kb(starts[1]) == 0:
            pytest.skip("this kernel gives no 2 MB pages to a mapping that asks")

        def convert(name, _, scratch):
            assert libc.mprotect(starts[0], grown, 3) == 0
            ctypes.memset(starts[0], 7, grown)

        (tmp_path / "lists").mkdir()
        found = written.Written(str(tmp_path / "lists"))
        found.learn(fork, convert, [(name, "filter") for name in "ab"], lambda pid: str(tmp_path / f"c{pid}"))
        assert found.summary()["grown"] >= grown // PAGE
        told, tell = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                found.copy()
                os.write(tell, json.dumps([len(alone(starts[0], pages=grown // PAGE)), huge_kb(starts[0])]).encode())
            finally:
                os._exit(0)
        os.close(tell)
        held, huge = json.loads(os.read(told, 65536))
        os.waitpid(pid, 0)
        assert held == grown // PAGE and huge == 0
    finally:
        for reserve in reserves:
            libc.munmap(reserve, size)


def test_a_parent_whose_learning_fails_forks_children_that_copy_nothing(tmp_path, capsys):
    """Learning saves time and nothing else: a parent whose learners cannot even be forked says so on its stderr
    (the worker's log) and goes on, its children copying nothing."""
    parent = uno_module("forkit_parent", "forkit.py")

    def fork(become_child):
        raise OSError("no more processes")

    forkit = object.__new__(parent.Forkit)  # the parent's own state, less LibreOffice: only learning is tried
    forkit.bridge, forkit.learners, forkit.office_tmp = None, 1, str(tmp_path / "office")
    forkit.main_loop = types.SimpleNamespace(fork=fork)
    forkit.written = written.Written(str(tmp_path))
    forkit.learn([("selftest.doc", "filter")])
    assert forkit.written.runs == [] and forkit.written.summary()["learners"] == 0
    assert "learning which pages children write failed: OSError: no more processes" in capsys.readouterr().err
