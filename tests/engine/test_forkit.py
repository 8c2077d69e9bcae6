"""The engine's LibreOffice: one preinitialised parent in its sandbox, a fresh child of it for every file.

Real LibreOffice in the real sandbox. A child is caught at work by looking below the parent's bubblewrap
(``office_pids``) while another thread converts ``slow_xls``, which keeps a child busy for a second or more.
The worker's reader of a child's answers and messages is tried against plain processes that answer as a
compromised child would."""

import http.server
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import openpyxl
import pytest
from conftest import ROOT, alive, at_work, autogroup, dies, office_pids, sandbox_pid

from docshift.engine import Engine, sandbox
from docshift.engine import convert as converter
from docshift.engine.forkit import Forkit
from docshift.engine.job import MAX_LOG_LINE, Job, log_lines
from docshift.engine.profile import PROFILE_SETTINGS
from docshift.errors import EngineBroken, OfficeCrashed, OfficeTimeout
from docshift.formats import FORMATS

MEMORY_MB, CPU_SECONDS, SCRATCH_MB = 3000, 700, 300
CORPUS = ROOT.parent / "shared" / "corpus"


def export(office, source, target, timeout=60):
    kind = Path(source).suffix.lstrip(".")
    return office.export(source, target, FORMATS[kind].export_filter, timeout)


def lineage(office):
    """The office's parent and its children at work on a file (host pids), below its own bubblewrap."""
    found = office_pids(office.process.pid) if office.process is not None else []
    return (found[0] if found else None), at_work(found[1:])


def waiting_dirs(office):
    """The temp dirs the office's live children may have: ``child-<its pid in the sandbox>``."""
    found = office_pids(office.process.pid)
    return sorted(f"child-{sandbox_pid(pid)}" for pid in found[1:])


def child_scratch(office):
    """The ``child-*`` temp dirs in the sandbox's ``/profile/tmp``, seen from the host through the parent."""
    parent, _ = lineage(office)
    return sorted(name for name in os.listdir(f"/proc/{parent}/root{sandbox.PROFILE}/tmp") if name.startswith("child-"))


def eventually(check, within=5.0):
    """True once ``check()`` is, polled for ``within`` seconds."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@contextmanager
def converting(office, source, target, timeout=60):
    """Export ``source`` on a thread; yields ``(child pid, outcome)`` once a child is at work. ``outcome`` gets
    "facts" or "error" when the export ends, which the block's end waits for."""
    outcome = {}
    seen = set(lineage(office)[1])  # children still going from before are not this one

    def run():
        try:
            outcome["facts"] = export(office, source, target, timeout)
        except Exception as error:  # what the export raised is the finding
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    child = None
    deadline = time.monotonic() + 30
    while child is None and thread.is_alive() and time.monotonic() < deadline:
        child = next((pid for pid in lineage(office)[1] if pid not in seen), None)
        time.sleep(0.005)
    try:
        assert child is not None, f"no child was seen converting: {outcome}"
        yield child, outcome
    finally:
        thread.join(120)


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    """A parent under limits of the test's choosing, for the tests that only look."""
    office = Forkit(tmp_path_factory.mktemp("limited"), name="limited", memory_limit_mb=MEMORY_MB,
                    limits=sandbox.Limits(cpu_seconds=CPU_SECONDS, scratch_mb=SCRATCH_MB))
    office.start()
    yield office
    office.close()


def test_the_parent_passes_its_self_test_and_each_file_converts_in_a_new_child(limited, legacy, tmp_path):
    assert limited.running and limited.restarts == 0
    assert limited.timings["launch"] > 0 and limited.timings["self_test"] > 0, limited.timings
    parent, _ = lineage(limited)
    before = limited.children
    pids = []
    for n, kind in enumerate(["doc", "doc", "xls", "ppt"]):
        target = tmp_path / f"{n}.{FORMATS[kind].target}"
        facts = export(limited, legacy[kind], target)
        assert facts["outcome"] == "converted" and target.stat().st_size > 0, facts
        pids.append(facts["pid"])
    assert len(set(pids)) == 4, f"a child converted two files: {pids}"
    assert limited.children == before + 4 and lineage(limited)[0] == parent and limited.restarts == 0


def test_a_child_runs_under_the_memory_cpu_and_file_size_limits(limited, slow_xls, tmp_path):
    """The parent's limits are its children's: the worker's address-space cap, and the sandbox's CPU seconds,
    file size and processes, read from the kernel while a child converts."""
    wanted = {"Max address space": [str(MEMORY_MB << 20)] * 2, "Max cpu time": [str(CPU_SECONDS)] * 2,
              "Max file size": [str(SCRATCH_MB << 20)] * 2, "Max processes": [str(limited.limits.processes)] * 2}
    parent, _ = lineage(limited)
    with converting(limited, slow_xls, tmp_path / "big.xlsx") as (child, outcome):
        found = {}
        for pid in (parent, child):
            with open(f"/proc/{pid}/limits") as lines:
                limits = {line[:26].strip(): line[26:].split()[:2] for line in lines}
            found[pid] = {name: limits[name] for name in wanted}
            found[pid]["oom_score_adj"] = Path(f"/proc/{pid}/oom_score_adj").read_text().strip()
    assert "facts" in outcome, outcome
    assert found[child] == found[parent] == {**wanted, "oom_score_adj": "500"}, found


def test_libreoffice_yields_the_cpu_to_the_api(limited, slow_xls, tmp_path):
    """nice 10 for the parent and its children, and for their session's autogroup where the kernel has them
    (Debian's default): the sandbox's own session would otherwise weigh as much as the whole API."""
    parent, _ = lineage(limited)
    with converting(limited, slow_xls, tmp_path / "big.xlsx") as (child, _):
        nice = {pid: os.getpriority(os.PRIO_PROCESS, pid) for pid in (parent, child)}
        groups = {pid: autogroup(pid) for pid in (parent, child)}
    assert nice == {parent: 10, child: 10}
    mine = autogroup("self")
    if groups[parent] is not None:  # None: no autogroups here, and nice alone orders the CPU
        assert groups[child] == groups[parent] and groups[parent][1] == 10, groups
        assert mine is None or groups[parent][0] != mine[0], (groups, mine)


def test_the_parent_and_a_child_are_not_dumpable(limited, slow_xls, tmp_path):
    """A child's siblings run as its uid: the kernel keeps them out of its memory and descriptors, and out of the
    parent's that every later child is forked from, because neither is dumpable. That shows as their /proc files
    owned by root instead of their uid, which the sandbox's own bubblewrap, of the same uid and dumpable, shows
    (nobody for a root worker, the worker's uid otherwise)."""
    sandbox_uid = sandbox.UID if sandbox.as_root() else os.getuid()
    parent, _ = lineage(limited)
    bubblewrap = int(Path(f"/proc/{parent}/stat").read_text().rsplit(")", 1)[1].split()[1])

    def uid(pid):
        return int(next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                        if line.startswith("Uid:")).split()[1])

    with converting(limited, slow_xls, tmp_path / "big.xlsx") as (child, _):
        uids = {pid: uid(pid) for pid in (bubblewrap, parent, child)}
        # it turns itself non-dumpable as it starts: a few milliseconds after the fork
        hidden = eventually(lambda: os.stat(f"/proc/{child}/fd").st_uid == 0, within=5)
    assert set(uids.values()) == {sandbox_uid}, uids
    assert os.stat(f"/proc/{bubblewrap}/fd").st_uid == sandbox_uid
    assert hidden, "the child's /proc/<pid>/fd is its own uid's: a sibling could read its descriptors"
    assert os.stat(f"/proc/{parent}/fd").st_uid == 0, "the parent is dumpable: a child could read its memory"


def anonymous(pid):
    """{start: (size, marked)} of the private anonymous mappings of ``pid`` (no path, or ``[heap]``; writable, or a
    reserve a heap grows into): ``marked`` when its VmFlags hold ``hg`` (``MADV_HUGEPAGE``)."""
    found, start = {}, None
    with open(f"/proc/{pid}/smaps") as lines:
        for line in lines:
            fields = line.split()
            if "-" in fields[0] and ":" not in fields[0]:  # a mapping's first line: range, perms, offset, dev, inode
                bounds = [int(bound, 16) for bound in fields[0].split("-")]
                mine = fields[1] in ("rw-p", "---p") and (len(fields) == 5 or fields[5] == "[heap]")
                start = bounds[0] if mine else None
                if mine:
                    found[start] = (bounds[1] - bounds[0], False)
            elif fields[0] == "VmFlags:" and start is not None:
                found[start] = (found[start][0], "hg" in fields[1:])
    return found


def test_the_heaps_children_grow_ask_the_kernel_for_large_folios(limited, slow_xls, tmp_path):
    """Before its first fork the parent marks its heaps and the reserves they grow into ``MADV_HUGEPAGE``, and a
    child at work has the mark on the heap its conversion grows: the kernel may then serve each of its faults
    with a folio of several pages (``engine/uno/process.py``)."""
    parent, _ = lineage(limited)
    with converting(limited, slow_xls, tmp_path / "big.xlsx") as (child, _):
        grown = eventually(lambda: max(size for size, _ in anonymous(child).values()) > 32 << 20, within=30)
        theirs = anonymous(child)
    ours = anonymous(parent)
    assert grown, "the child's heap did not grow past 32 MB"
    largest = max(theirs, key=lambda start: theirs[start][0])
    assert theirs[largest][1], f"the child's largest heap ({theirs[largest][0] >> 20} MB) is not marked"
    for who, found in (("parent", ours), ("child", theirs)):
        unmarked = {hex(start): size for start, (size, hg) in found.items() if not hg}
        assert sum(unmarked.values()) < sum(size for size, _ in found.values()) * 0.1, (who, unmarked)


def test_the_parents_heap_is_in_2_mb_pages_that_a_fork_copies_as_one_entry_each(limited):
    """Before its first fork the parent collapses what its heaps hold into 2 MB pages (``MADV_COLLAPSE``, whatever
    the machine's huge page setting): a fork copies, and a child's exit frees, one entry for each where it took 512."""
    if not Path("/sys/kernel/mm/transparent_hugepage").is_dir():
        pytest.skip("a kernel without transparent huge pages")
    parent, _ = lineage(limited)
    with open(f"/proc/{parent}/smaps_rollup") as rollup:
        huge = next(int(line.split()[1]) for line in rollup if line.startswith("AnonHugePages:")) << 10
    assert huge >= 16 << 20, f"{huge >> 20} MiB of the parent in 2 MB pages"


THP_64K = Path("/sys/kernel/mm/transparent_hugepage/hugepages-64kB")


def test_a_childs_heap_grows_in_64_kb_folios_where_the_kernel_serves_them_to_those_that_ask(limited, legacy,
                                                                                               tmp_path):
    """The same file converted with the kernel's 64 KB folios off, then served to the mappings that ask for them
    (``madvise``, what ``make run`` sets): the kernel's count of such folios, which no process gets while they are
    off, grows by those of the child's heap."""
    if not os.access(THP_64K / "enabled", os.W_OK):
        pytest.skip("no 64 KB folios to set here: a kernel before 6.8, or not root")
    enabled, allocated = THP_64K / "enabled", THP_64K / "stats" / "anon_fault_alloc"
    was = next(word.strip("[]") for word in enabled.read_text().split() if word.startswith("["))
    grown = {}
    try:
        for setting in ("never", "madvise"):
            enabled.write_text(setting)
            before = int(allocated.read_text())
            export(limited, legacy["ppt"], tmp_path / f"{setting}.pptx")
            grown[setting] = int(allocated.read_text()) - before
    finally:
        enabled.write_text(was)
    assert grown["never"] == 0 and grown["madvise"] >= 50, grown


def test_a_childs_temp_dir_goes_with_it(limited, legacy, slow_xls, tmp_path):
    with converting(limited, slow_xls, tmp_path / "big.xlsx"):
        during = child_scratch(limited)
    assert during, "no child-* dir in the sandbox's /profile/tmp while a child converts: the wrong place"
    for n, kind in enumerate(["doc", "xls", "ppt"]):
        export(limited, legacy[kind], tmp_path / f"{n}.{FORMATS[kind].target}")
    # what is left is the temp dirs of the children waiting for a file, each of a live child, once the child of the
    # last file has ended (it lives on a moment after its answer, longer on a busy machine)
    assert eventually(lambda: child_scratch(limited) == waiting_dirs(limited)
                      and len(child_scratch(limited)) == limited.ready, within=10), child_scratch(limited)


def office_temp(office):
    """The files in LibreOffice's own temp dirs (``lu*.tmp``, made by the parent's LibreOffice before its forks, in
    the sandbox's ``/profile/tmp/office``), seen from the host through the parent."""
    parent, _ = lineage(office)
    top = Path(f"/proc/{parent}/root{sandbox.PROFILE}/tmp/office")
    return sorted(str(path.relative_to(top)) for path in top.glob("lu*.tmp/*"))


def test_what_children_leave_in_libreoffices_temp_dir_goes_once_none_is_at_work(limited, legacy, tmp_path):
    """A child exits with its document open: the temp files LibreOffice made for it stay in the temp dir all
    children share. The child removes those it holds, the parent the rest once no child is at work."""
    before = office_temp(limited)
    for n, kind in enumerate(["doc", "xls", "ppt"]):
        export(limited, legacy[kind], tmp_path / f"{n}.{FORMATS[kind].target}")
    assert eventually(lambda: office_temp(limited) == before, within=5), (before, office_temp(limited))


def test_an_import_that_yields_to_libreoffices_main_loop_converts_in_a_child(limited, tmp_path):
    """A workbook's OOXML import reads its sheets on threads and yields to LibreOffice's main loop meanwhile. A
    child forked from the parent's own thread has no main loop, and waited for ever there; forked by the main loop,
    it is that loop's thread."""
    workbook = openpyxl.Workbook()
    for n in range(3):
        sheet = workbook.active if n == 0 else workbook.create_sheet()
        sheet.title = f"Sheet {n}"
        for row in range(1, 50):
            sheet.cell(row=row, column=1, value=row * n)
    workbook.save(tmp_path / "package.xls")  # an .xlsx under a legacy name, as customers' files sometimes are
    began = time.monotonic()
    facts = export(limited, tmp_path / "package.xls", tmp_path / "package.xlsx", timeout=30)
    assert facts["outcome"] == "converted" and facts["loaded"]["sheets"] == ["Sheet 0", "Sheet 1", "Sheet 2"], facts
    assert time.monotonic() - began < 10
    assert openpyxl.load_workbook(tmp_path / "package.xlsx")["Sheet 2"]["A49"].value == 98


def test_two_files_at_once_convert_in_two_children_at_the_same_time(limited, slow_xls, tmp_path):
    outcomes = [{}, {}]

    def run(n):
        try:
            outcomes[n]["facts"] = export(limited, slow_xls, tmp_path / f"{n}.xlsx")
        except Exception as error:
            outcomes[n]["error"] = error

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(2)]
    for thread in threads:
        thread.start()
    most = 0
    while any(thread.is_alive() for thread in threads):
        most = max(most, len(lineage(limited)[1]))
        time.sleep(0.01)
    assert all("facts" in outcome for outcome in outcomes), outcomes
    assert outcomes[0]["facts"]["pid"] != outcomes[1]["facts"]["pid"]
    assert most == 2, f"at most {most} children were at work at once"


def test_a_child_killed_mid_conversion_fails_that_file_only(fresh_office, slow_xls, legacy, tmp_path):
    parent, _ = lineage(fresh_office)
    with converting(fresh_office, slow_xls, tmp_path / "big.xlsx") as (child, outcome):
        time.sleep(0.3)  # into the load
        os.kill(child, signal.SIGKILL)
    assert isinstance(outcome.get("error"), OfficeCrashed), outcome
    assert dies(child)
    facts = export(fresh_office, legacy["doc"], tmp_path / "next.docx")
    assert facts["outcome"] == "converted"
    assert lineage(fresh_office)[0] == parent and fresh_office.restarts == 0, "the parent was started again"


def test_a_conversion_past_its_timeout_is_killed_and_the_parent_serves_on(fresh_office, slow_xls, legacy, tmp_path):
    parent, _ = lineage(fresh_office)
    began = time.monotonic()
    with converting(fresh_office, slow_xls, tmp_path / "big.xlsx", timeout=0.5) as (child, outcome):
        pass
    assert isinstance(outcome.get("error"), OfficeTimeout), outcome
    assert time.monotonic() - began < 10, "the deadline did not hold"
    assert dies(child, within=5), "the child outlived its deadline"
    assert export(fresh_office, legacy["ppt"], tmp_path / "next.pptx")["outcome"] == "converted"
    assert lineage(fresh_office)[0] == parent and alive(parent) and fresh_office.restarts == 0


def test_a_killed_parent_is_started_again_by_the_next_export(fresh_office, legacy, tmp_path):
    parent, _ = lineage(fresh_office)
    os.kill(parent, signal.SIGKILL)
    assert dies(parent)
    assert eventually(lambda: not fresh_office.running, within=10), "its sandbox outlived the parent"
    facts = export(fresh_office, legacy["xls"], tmp_path / "after.xlsx")
    assert facts["outcome"] == "converted" and fresh_office.restarts == 1
    assert lineage(fresh_office)[0] not in (None, parent)


def test_a_file_whose_parent_dies_under_it_twice_converts_on_a_third_and_is_no_crash(fresh_office, slow_xls,
                                                                                     tmp_path, caplog):
    """The parent killed while its child converts, and again on the next try: the child did not crash on the file
    either time. The file goes to a parent started again each time and converts; counted as two crashes, it failed."""
    outcome, killed = {}, []

    def run():
        try:
            outcome["converted"] = converter.convert(fresh_office, slow_xls, "xls", tmp_path / "work", 120)
        except Exception as error:  # what the conversion raised is the finding
            outcome["error"] = error

    def at_work_on_a_parent_not_killed():
        parent, children = lineage(fresh_office)
        return parent not in (None, *killed) and bool(children)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    for _ in range(2):
        assert eventually(at_work_on_a_parent_not_killed, within=60), outcome
        time.sleep(0.3)  # into the load
        killed.append(lineage(fresh_office)[0])
        os.kill(killed[-1], signal.SIGKILL)
        assert dies(killed[-1])
    thread.join(180)
    assert "converted" in outcome, outcome
    assert fresh_office.restarts == 2
    assert "LibreOffice crashed on" not in caplog.text
    assert caplog.text.count("not counted as a crash of the file") == 2


# 'MS Word 97', the filter the self-test writes its Word file with, taken out of LibreOffice's configuration
NO_WORD_97 = PROFILE_SETTINGS.replace("</oor:items>", '<item oor:path="/org.openoffice.TypeDetection.Filter/Filters">'
                                      '<node oor:name="MS Word 97" oor:op="remove"/></item>\n</oor:items>')


def test_a_parent_whose_self_test_keeps_failing_is_reported_broken(tmp_path):
    """A profile whose settings take away a filter the self-test needs: the parent starts, its self-test fails,
    three times, and the worker hears "broken". It also shows that the profile's settings (macros off, links
    not updated: ``PROFILE_SETTINGS``) reach the LibreOffice that converts."""
    # control: a plain LibreOffice on these settings cannot write a Word 97 file
    (tmp_path / "plain" / "user").mkdir(parents=True)
    (tmp_path / "plain" / "user" / "registrymodifications.xcu").write_text(NO_WORD_97)
    (tmp_path / "note.txt").write_text("hello")
    subprocess.run(["soffice", "--headless", "--norestore", f"-env:UserInstallation={(tmp_path / 'plain').as_uri()}",
                    "--convert-to", "doc:MS Word 97", "--outdir", str(tmp_path / "out"), str(tmp_path / "note.txt")],
                   capture_output=True, timeout=120)
    assert not (tmp_path / "out" / "note.doc").exists(), "the settings do not take the filter away"
    heard = []
    office = Forkit(tmp_path / "office", name="broken", profile_settings=NO_WORD_97,
                    on_start=lambda state, detail: heard.append((state, detail)))
    try:
        with pytest.raises(EngineBroken, match="3 starts"):
            office.start()
        assert office.starts == 3 and not office.running
        assert [state for state, _ in heard] == ["broken"] and "self-test" in heard[0][1], heard
    finally:
        office.close()


def test_close_leaves_no_process_and_nothing_in_the_workers_dirs(tmp_path, legacy):
    engine = Engine(Forkit(tmp_path / "data", name="closing"))
    try:
        engine.start()
        with engine.workspace("task-1") as work:
            assert engine.convert(legacy["doc"], "doc", work, 60).path.exists()
        running = office_pids(engine.office.process.pid)
        assert running
    finally:
        engine.close()
    assert all(dies(pid) for pid in running) and not engine.office.running
    left = [str(path.relative_to(tmp_path)) for path in (tmp_path / "data").rglob("*")
            if engine.office.own in path.parts]
    assert left == [], left


class Recorder(http.server.BaseHTTPRequestHandler):
    requests: ClassVar[list] = []

    def do_GET(self):
        Recorder.requests.append(self.path)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_linked_content_is_never_fetched(limited, linked_doc, tmp_path):
    path, port = linked_doc
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        # control: a plain LibreOffice does fetch this picture, so the document is a fair test
        profile = f"-env:UserInstallation={(tmp_path / 'plain').as_uri()}"
        subprocess.run(["soffice", "--headless", "--norestore", profile, "--convert-to", "docx",
                        "--outdir", str(tmp_path / "plain-out"), str(path)], capture_output=True, timeout=120)
        assert Recorder.requests, "the control conversion did not fetch the linked picture"
        Recorder.requests.clear()
        assert converter.convert(limited, path, "doc", tmp_path, 60).path.exists()
        time.sleep(0.5)
        assert Recorder.requests == []
    finally:
        server.shutdown()
        server.server_close()


# what a child says: a compromised one must not hang or swamp the worker ---------------------------

HOSTILE_REPLIES = {
    # half an answer, then nothing: the deadline holds for a partial line too
    "no newline": ('import sys, time\nsys.stdout.write(\'{"ok": true\')\nsys.stdout.flush()\ntime.sleep(300)',
                   OfficeTimeout),
    # a line that never ends: the reader stops long before it holds 64 MiB
    "endless line": ('import sys, time\nsys.stdout.write("x" * (64 << 20))\nsys.stdout.flush()\ntime.sleep(300)',
                     OfficeCrashed),
    "no json": ('import time\nprint("hello", flush=True)\ntime.sleep(300)', OfficeCrashed),
    "no object": ('import time\nprint("[1, 2]", flush=True)\ntime.sleep(300)', OfficeCrashed),
    "deep nesting": ('import time\nprint("[" * 100000 + "]" * 100000, flush=True)\ntime.sleep(300)', OfficeCrashed),
    "gone": ('import sys\nsys.stdout.write(\'{"ok": \')', OfficeCrashed),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_REPLIES))
def test_a_hostile_answer_neither_hangs_nor_swamps_the_reader(name):
    """The worker's reader of a child's job socket against a real process that answers as a compromised child
    would (a test program, not LibreOffice: what is tested is the reader of the protocol)."""
    script, expected = HOSTILE_REPLIES[name]
    ours, theirs = socket.socketpair()
    process = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.DEVNULL, stdout=theirs.fileno(),
                               start_new_session=True)
    theirs.close()
    messages, told = os.pipe()
    os.close(told)
    job = Job(ours, messages, "hostile", None)
    outcome = {}

    def read():
        try:
            outcome["reply"] = job.read(2)
        except Exception as error:  # what the reader raised is the finding
            outcome["error"] = error

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        reader.join(60)
        assert not reader.is_alive(), "the reader hangs"
        assert isinstance(outcome.get("error"), expected), outcome
    finally:
        job.close()
        process.kill()
        process.wait()


ENDLESS_MESSAGE = r"""
import sys
for _ in range(64):
    sys.stderr.buffer.write(b"x" * (1 << 20))
sys.stderr.buffer.write(b"\nafter\n")
"""


def test_an_endless_message_line_is_cut_not_held(caplog):
    """LibreOffice's messages are read a bounded line at a time: a real process that writes 64 MiB without a
    newline costs the reader no more than a line of the log, and what follows is logged as it comes."""
    process = subprocess.Popen([sys.executable, "-c", ENDLESS_MESSAGE], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    tracemalloc.start()
    try:
        with caplog.at_level(logging.INFO, logger="docshift.office"):
            log_lines(process.stderr, "endless", None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        process.wait()
    assert peak < 1 << 20, f"{peak >> 10} KiB held"
    logged = [record.getMessage() for record in caplog.records if record.name == "docshift.office"]
    assert logged == ["endless: " + "x" * MAX_LOG_LINE + " [cut]", "endless: after"]


def test_the_retry_after_a_crash_loads_a_text_with_no_view_and_its_report_names_what_that_leaves_out(office, legacy,
                                                                                                   tmp_path):
    """The try after a child crashed on a text loads it with no frame and no view, so that no layout is computed:
    Writer's layout crashes on some files (a section of footnotes in columns, in a real manual that a plain soffice
    cannot convert either). Its text converts whole; its pictures and objects need the view, and the report names
    them. A workbook or a deck is loaded as before (a view), as is every first try, as a plain soffice does."""
    from docshift.engine import inventory, ooxml

    for kind, source in legacy.items():
        first, again = tmp_path / f"first.{kind}x", tmp_path / f"again.{kind}x"
        viewed = office.export(source, first, FORMATS[kind].export_filter, 60)
        retried = office.export(source, again, FORMATS[kind].export_filter, 60, crashed=True)
        assert (viewed["outcome"], viewed["viewed"]) == ("converted", True), kind
        assert (retried["outcome"], retried["viewed"]) == ("converted", kind != "doc"), kind
        assert retried["loaded"] == viewed["loaded"], kind
        assert ooxml.facts(again, kind) == ooxml.facts(first, kind), kind
    pictured = CORPUS / "doc" / "53379.doc"  # two objects, each shown by its picture
    result = tmp_path / "pictured.docx"
    retried = office.export(pictured, result, FORMATS["doc"].export_filter, 60, crashed=True)
    report = inventory.report(inventory.of_source(pictured, "doc"), inventory.of_result(result, "doc"))
    assert retried["viewed"] is False and report["complete"] is False
    assert {lost["what"] for lost in report["lost"]} >= {"embedded_objects"}, report["lost"]
