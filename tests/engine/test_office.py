"""The warm LibreOffice pool: timeouts, crashes, recycling, memory cap, no network."""

import base64
import http.server
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import ClassVar

import pytest
from conftest import alive, autogroup, dies, soffice_pids

from docshift.engine import convert as converter
from docshift.engine import sandbox, soffice
from docshift.engine.office import UNO_PYTHON, Office
from docshift.engine.soffice import Soffice
from docshift.errors import EngineBroken, OfficeCrashed, OfficeTimeout
from docshift.formats import FORMATS


def test_warm_conversion_of_each_type(fresh_office, legacy, tmp_path):
    for kind in ("doc", "xls", "ppt"):
        work = tmp_path / kind
        work.mkdir()
        result = converter.convert(fresh_office, legacy[kind], kind, work, 60).path
        assert result.suffix == f".{FORMATS[kind].target}" and result.stat().st_size > 0
    assert fresh_office.conversions == 3 and fresh_office.restarts == 0


def test_timeout_kills_only_that_process(office, fresh_office, slow_xls, legacy, tmp_path):
    other = office.office_pid()
    victim = fresh_office.office_pid()
    with pytest.raises(converter.ConversionFailed) as failure:
        converter.convert(fresh_office, slow_xls, "xls", tmp_path, timeout=0.5)
    assert failure.value.code == "conversion_timeout"
    assert dies(victim)
    assert alive(other), "a timeout must not touch another worker's LibreOffice"
    # the same Office serves the next task on a fresh process
    result = converter.convert(fresh_office, legacy["doc"], "doc", tmp_path, 60).path
    assert result.exists() and fresh_office.office_pid() != victim


# of the compatibility corpus, the file whose document LibreOffice takes longest to close (about a second
# after the worker has checked its result, where most take a few milliseconds)
SLOW_TO_CLOSE = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "ppt" / "42474-2.ppt"


@pytest.mark.parametrize("fault", ["SIGSTOP", "SIGKILL"])
def test_a_result_is_handed_over_before_libreoffice_closes_the_document(fresh_office, legacy, tmp_path,
                                                                          monkeypatch, caplog, fault):
    """The bridge answers once the result is stored and closes the document after: the worker checks the
    result meanwhile. Here LibreOffice is stopped, or killed, the moment the conversion returns, while it
    closes: that conversion has its result, and the next file goes to a fresh LibreOffice (after
    ``CLOSE_SECONDS`` for the stopped one), with the whole of its own timeout and no crash counted
    against it. Before, the close came first, and the next file waited out its timeout on the stopped
    LibreOffice and failed."""
    from docshift.engine import office as office_module

    monkeypatch.setattr(office_module, "CLOSE_SECONDS", 2)
    first = converter.convert(fresh_office, SLOW_TO_CLOSE, "ppt", tmp_path / "first", 60)
    closing = fresh_office.office_pid()
    os.kill(closing, getattr(signal, fault))
    try:
        assert first.path.stat().st_size > 0
        second = converter.convert(fresh_office, legacy["doc"], "doc", tmp_path / "second", 15)
        assert second.path.stat().st_size > 0
        assert dies(closing), "the LibreOffice that never closed the document is still there"
        assert fresh_office.office_pid() != closing
        assert not [r for r in caplog.records if "crashed on" in r.getMessage()]
        if fault == "SIGSTOP":
            assert "did not close the last document within 2 s" in caplog.text
    finally:
        if alive(closing):
            os.kill(closing, signal.SIGKILL)


def kill_during_conversion(office, times):
    """Kill -9 the Office's soffice.bin once it is busy, ``times`` times over its restarts."""
    killed = []

    def killer():
        while len(killed) < times:
            pid = office.office_pid()
            if pid and pid not in killed and office.busy:
                time.sleep(0.2)  # into the load: slow_xls keeps a fresh LibreOffice busy for about a second
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.05)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    return thread, killed


def test_kill_9_mid_conversion_is_retried_on_a_fresh_process(fresh_office, slow_xls, tmp_path):
    thread, killed = kill_during_conversion(fresh_office, 1)
    result = converter.convert(fresh_office, slow_xls, "xls", tmp_path, timeout=60)
    thread.join(5)
    assert len(killed) == 1 and dies(killed[0])
    assert result.path.exists() and fresh_office.restarts == 1


def test_crashing_twice_fails_the_conversion(fresh_office, slow_xls, legacy, tmp_path):
    thread, killed = kill_during_conversion(fresh_office, 2)
    with pytest.raises(converter.ConversionFailed) as failure:
        converter.convert(fresh_office, slow_xls, "xls", tmp_path, timeout=60)
    thread.join(5)
    assert failure.value.code == "conversion_failed" and len(killed) == 2
    assert converter.convert(fresh_office, legacy["ppt"], "ppt", tmp_path, 60).path.exists()


def test_recycled_after_n_conversions(tmp_path, legacy):
    office = Office(tmp_path / "office", max_conversions=2, name="recycled")
    try:
        pids = []
        for n in range(3):
            work = tmp_path / str(n)
            work.mkdir()
            converter.convert(office, legacy["doc"], "doc", work, 60)
            pids.append(office.office_pid())
        assert pids[0] != pids[1] == pids[2] and office.restarts == 1
    finally:
        office.stop()


def test_later_self_tests_load_the_files_the_first_one_made(tmp_path, legacy):
    """Making the self-test's legacy files is most of its time and no conversion stores a legacy format: the
    first LibreOffice makes them, and the later ones of the worker load and export those (one handed a file that
    is not what its name says fails its self-test)."""
    office = Office(tmp_path / "office", name="samples")
    try:
        office.start()
        launcher = office.pool.launcher
        made = launcher.samples
        assert sorted(made) == ["selftest.doc", "selftest.ppt", "selftest.xls"]
        assert base64.b64decode(made["selftest.doc"])[:8] == bytes.fromhex("d0cf11e0a1b11ae1")  # an OLE file
        first = office.office_pid()
        office.restart()
        assert office.office_pid() != first and launcher.samples is made  # loaded, not made again
        work = tmp_path / "work"
        work.mkdir()
        assert converter.convert(office, legacy["xls"], "xls", work, 60).extension == "xlsx"
        launcher.samples = dict(made, **{"selftest.xls": made["selftest.doc"]})  # a Word file named .xls
        with pytest.raises(EngineBroken, match="self-test failed"):
            office.restart()
    finally:
        office.close()


@pytest.mark.slow
def test_memory_is_capped(tmp_path):
    office = Office(tmp_path / "office", memory_limit_mb=3000, name="capped")
    office.start()
    try:
        with open(f"/proc/{office.office_pid()}/limits") as limits:
            line = next(line for line in limits if line.startswith("Max address space"))
        assert line.split()[3] == str(3000 * 1024 * 1024)
    finally:
        office.stop()


@pytest.mark.slow
def test_the_sandbox_limits_reach_libreoffice(tmp_path):
    """Processes, file size and CPU time are capped, and LibreOffice's profile and temp files
    (``TMPDIR``) are on a sized in-memory file system of the sandbox, not on the data disk."""
    limits = sandbox.Limits(cpu_seconds=700, scratch_mb=300)
    office = Office(tmp_path / "office", name="limited", limits=limits)
    office.start()
    try:
        pid = office.office_pid()
        with open(f"/proc/{pid}/limits") as lines:
            found = {line[:26].strip(): line[26:].split()[:2] for line in lines}
        assert found["Max processes"] == [str(sandbox.MAX_PROCESSES)] * 2
        assert found["Max file size"] == [str(300 << 20)] * 2
        assert found["Max cpu time"] == ["700"] * 2
        assert Path(f"/proc/{pid}/oom_score_adj").read_text().strip() == "500"
        with open(f"/proc/{pid}/mountinfo") as lines:
            mounts = {line.split()[4]: line.split(" - ")[1].split() for line in lines}
        environ = dict(entry.split("=", 1) for entry in
                       Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if entry)
        assert environ["TMPDIR"].startswith(sandbox.PROFILE + "/")
        kind, _, options = mounts[sandbox.PROFILE]
        assert kind == "tmpfs" and f"size={300 << 10}k" in options.split(","), mounts[sandbox.PROFILE]
    finally:
        office.stop()


def test_a_fresh_profile_is_not_a_first_start(fresh_office):
    """Each LibreOffice starts on a fresh profile, which names the installed version as the last one started:
    LibreOffice then skips its first-start work (its graphics render tests, which write their log into the
    profile; 0.7 s of CPU a start), and the profile is still the sandbox's own, in memory."""
    version = subprocess.run(["soffice", "--version"], capture_output=True, text=True, check=True).stdout
    assert version.split()[1].startswith(soffice.installed_version() + ".")
    profile = Path(f"/proc/{fresh_office.office_pid()}/root{sandbox.PROFILE}/user")
    settings = (profile / "registrymodifications.xcu").read_text()
    assert f"<value>{soffice.installed_version()}</value>" in settings and "MacroSecurityLevel" in settings
    assert (profile / "extensions").is_dir(), "LibreOffice has made its profile"
    assert not (profile / "GraphicsRenderTests.log").exists()


def test_libreoffice_runs_once_per_start(fresh_office):
    """The bridge starts soffice.bin itself, on a profile that already names the build: no launcher (oosplash
    and its Java lookup) and no first run that sets the profile up and exits to be started again. Either left
    the CPU of a process that ran and ended in its parent's account (0.12 s, a fifth of a start)."""
    pid = fresh_office.office_pid()
    bridge = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    assert Path(f"/proc/{bridge}/comm").read_text().startswith("python"), "soffice.bin is the bridge's child"
    build = next(line.split("=", 1)[1].strip() for line in
                 Path(os.path.realpath(shutil.which("soffice"))).with_name("versionrc").read_text().splitlines()
                 if line.startswith("buildid="))
    assert Path(f"/proc/{pid}/root{sandbox.PROFILE}/user/extensions/buildid").read_text() == build
    ended = {}
    for process in (bridge, pid):
        fields = Path(f"/proc/{process}/stat").read_text().rsplit(")", 1)[1].split()
        ended[process] = int(fields[13]) + int(fields[14])  # cutime + cstime: children that ran and ended
    assert ended == {bridge: 0, pid: 0}


def test_a_profile_libreoffice_must_set_up_itself_still_starts(tmp_path):
    """Where the bridge cannot write the build into the profile, LibreOffice's first run there sets the profile
    up and exits asking to be started again, as its own launcher would do: the bridge starts it again."""
    script = tmp_path / "start.py"
    script.write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(Path(converter.__file__).with_name('uno'))!r})\n"
        "import process, uno\n"
        "profile = sys.argv[1]\n"
        "os.makedirs(os.path.join(profile, 'user', 'extensions', 'buildid'))  # a directory: it cannot be written\n"
        "soffice, context = process.start(uno.systemPathToFileUrl(profile), 'docshift-test-' + str(os.getpid()))\n"
        "desktop = context.ServiceManager.createInstanceWithContext('com.sun.star.frame.Desktop', context)\n"
        "try:\n"
        "    print(desktop.getCurrentComponent() is None, os.times().children_user > 0, flush=True)\n"
        "finally:\n"
        "    soffice.kill()\n")
    done = subprocess.run([UNO_PYTHON, str(script), str(tmp_path / "profile")], capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"})
    # the desktop answers, and a first LibreOffice ran and ended before the one that answers
    assert done.stdout.split() == ["True", "True"], done.stderr[-2000:]
    assert (tmp_path / "profile" / "user" / "extensions" / "buildid").is_file()


@pytest.mark.slow
def test_libreoffice_yields_the_cpu_to_the_api(tmp_path):
    """nice 10, for the process and for its session's autogroup: the sandbox's own session would
    otherwise weigh as much as the whole API on a kernel with autogroups (Debian's default). Two
    Offices start at once, as a worker's do: the kernel takes one autogroup change per 0.1 s."""
    offices = [Office(tmp_path / str(n), name=f"nice-{n}") for n in range(2)]
    # the pool's threads outlive the checks: an Office dies with the thread that started it
    with ThreadPoolExecutor(2) as pool:
        try:
            list(pool.map(Office.start, offices))
            for office in offices:
                pid = office.office_pid()
                assert os.getpriority(os.PRIO_PROCESS, pid) == 10
                theirs, mine = autogroup(pid), autogroup("self")
                # None for LibreOffice: no autogroups here, and nice alone orders the CPU
                if theirs is not None:
                    assert theirs[1] == 10, theirs
                    assert mine is None or theirs[0] != mine[0], (theirs, mine)
        finally:
            for office in offices:
                office.stop()


class Recorder(http.server.BaseHTTPRequestHandler):
    requests: ClassVar[list] = []

    def do_GET(self):
        Recorder.requests.append(self.path)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_linked_content_is_never_fetched(fresh_office, linked_doc, tmp_path):
    path, port = linked_doc
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        # control: a plain LibreOffice does fetch this picture, so the document is a fair test
        subprocess.run(["soffice", "--headless", "--norestore",
                        f"-env:UserInstallation={(tmp_path / 'plain').as_uri()}", "--convert-to", "docx",
                        "--outdir", str(tmp_path / "plain-out"), str(path)], capture_output=True, timeout=120)
        assert Recorder.requests, "the control conversion did not fetch the linked picture"
        Recorder.requests.clear()
        result = converter.convert(fresh_office, path, "doc", tmp_path, 60)
        assert result.path.exists()
        time.sleep(0.5)
        assert Recorder.requests == []
    finally:
        server.shutdown()
        server.server_close()


def test_service_recovers_from_kill_9_and_the_task_ends(live, slow_xls):
    key = live.register("kill-9")
    task_id = live.submit(key, slow_xls).json()["task_id"]
    deadline = time.monotonic() + 60
    while live.wait_status(key, task_id) != "PROCESSING":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.3)
    worker = live.processes["worker"].pid
    before = soffice_pids(worker)
    assert before
    for pid in before:
        os.kill(pid, signal.SIGKILL)
    task = live.wait(key, task_id)
    assert task["status"] == "SUCCEEDED", task
    assert not set(before) & set(soffice_pids(worker))


# what the bridge says: a compromised one must not hang or swamp the worker -----------------------

HOSTILE_REPLIES = {
    # half a reply, then nothing: the deadline holds for a partial line too
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


def test_replies_that_arrive_in_one_read_are_taken_in_turn(tmp_path):
    """The bridge's answer and its ``closed`` after it often reach the pipe together: each is its own reply."""
    script = ('import sys, time\nsys.stdout.write(\'{"ok": true}\\n{"closed": true}\\n\')\n'
              'sys.stdout.flush()\ntime.sleep(300)')
    process = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, bufsize=1, start_new_session=True)
    bridge = Soffice(process, tmp_path / "profile", tmp_path / "job")
    try:
        time.sleep(0.5)  # both lines are in the pipe before the first read
        assert bridge.read(10) == {"ok": True}
        bridge.closing = True
        assert bridge.settle(10)
        assert not bridge.closing
        with pytest.raises(OfficeTimeout):
            bridge.read(0.5)
    finally:
        bridge.kill()


@pytest.mark.parametrize("name", sorted(HOSTILE_REPLIES))
def test_a_hostile_reply_neither_hangs_nor_swamps_the_reader(tmp_path, name):
    """The Office's reader against a real process that answers as a compromised bridge would
    (a test program, not LibreOffice: what is tested is the reader of the protocol)."""
    script, expected = HOSTILE_REPLIES[name]
    # as the Launcher starts the bridge: text pipes, line-buffered, a session of its own
    process = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, bufsize=1, start_new_session=True)
    bridge = Soffice(process, tmp_path / "profile", tmp_path / "job")
    outcome = {}

    def read():
        try:
            outcome["reply"] = bridge.read(2)
        except Exception as error:  # what the reader raised is the finding
            outcome["error"] = error

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        reader.join(60)
        assert not reader.is_alive(), "the reader hangs"
        assert isinstance(outcome.get("error"), expected), outcome
    finally:
        bridge.kill()


ENDLESS_MESSAGE = r"""
import sys
for _ in range(64):
    sys.stderr.buffer.write(b"x" * (1 << 20))
sys.stderr.buffer.write(b"\nafter\n")
"""


def test_an_endless_message_line_is_cut_not_held(tmp_path, caplog):
    """LibreOffice's stderr is read a bounded line at a time: a real process that writes 64 MiB without a newline
    costs the reader no more than a line of the log, and what follows is logged as it comes."""
    # as the Launcher starts the bridge: text pipes, line-buffered
    process = subprocess.Popen([sys.executable, "-c", ENDLESS_MESSAGE], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, bufsize=1)
    bridge = Soffice(process, tmp_path / "profile", tmp_path / "job")
    launcher = soffice.Launcher("endless", True, sandbox.Limits(), 1 << 30, soffice.PROFILE_SETTINGS)
    tracemalloc.start()
    try:
        with caplog.at_level(logging.INFO, logger="docshift.office"):
            launcher._log_messages(bridge)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        process.wait()
    assert peak < 1 << 20, f"{peak >> 10} KiB held"
    logged = [record.getMessage() for record in caplog.records if record.name == "docshift.office"]
    assert logged == ["endless: " + "x" * soffice.MAX_LOG_LINE + " [cut]", "endless: after"]
