"""One LibreOffice per account: a LibreOffice that has converted one account's file never converts
another's, the job dir is emptied between tasks, a spare started in the background takes over for a new
account, and an account's idle LibreOffice waits for its next task (a few accounts, for a while)."""

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import alive, autogroup, dies

from docshift.engine import convert as converter
from docshift.engine import sandbox
from docshift.engine.office import Office


@pytest.fixture
def spared(tmp_path):
    office = Office(tmp_path / "office", name="spared", spare=True, accounts=1)
    office.start()
    yield office
    office.close()


def spare_pid(office, within=120):
    """The pid of the spare's soffice.bin, once the spare keeper has one ready."""
    deadline = time.monotonic() + within
    while True:
        spare = office._spare
        if spare is not None:
            pid = spare.pid()
            if pid:
                return pid
        assert time.monotonic() < deadline, "no spare LibreOffice came up"
        time.sleep(0.1)


def convert_for(office, tenant, source, kind, work):
    office.take(tenant)
    task_dir = office.tasks_dir / work
    task_dir.mkdir(parents=True)
    return converter.convert(office, source, kind, task_dir, 60)


def test_with_one_account_kept_another_account_gets_the_spare_and_the_first_is_stopped(spared, legacy):
    convert_for(spared, "acct_a", legacy["doc"], "doc", "1")
    first = spared.office_pid()
    convert_for(spared, "acct_a", legacy["xls"], "xls", "2")
    assert spared.office_pid() == first, "the same account keeps its LibreOffice"
    waiting = spare_pid(spared)
    convert_for(spared, "acct_b", legacy["ppt"], "ppt", "3")
    assert spared.office_pid() == waiting, "the new account's file went to the spare"
    assert dies(first), "the first account's LibreOffice is gone before another account's file arrives"
    assert spared.tenant == "acct_b"
    # and a new spare comes up for the next account
    assert spare_pid(spared) not in (first, waiting)
    convert_for(spared, "acct_a", legacy["doc"], "doc", "4")
    assert spared.office_pid() not in (first, waiting)


def test_a_spare_starts_at_the_lowest_priority_and_converts_at_the_others(spared, legacy):
    """Nobody waits for a spare: its start and self-test take only the CPU that the converting LibreOffices
    leave idle (its session's autogroup at nice 19, theirs at 10). Taken, it converts at nice 10 at once."""
    if autogroup(spared.office_pid()) is None:
        pytest.skip("no autogroup scheduling on this kernel: nice alone orders the CPU, and a spare has 10 too")
    assert autogroup(spared.office_pid())[1] == 10, "a start that a task waits for is not held back"
    waiting = spare_pid(spared)
    assert autogroup(waiting)[1] == 19
    assert os.getpriority(os.PRIO_PROCESS, waiting) == 10
    convert_for(spared, "acct_a", legacy["doc"], "doc", "1")
    assert autogroup(waiting)[1] == 19, "a spare that has not been taken stays low"
    convert_for(spared, "acct_b", legacy["xls"], "xls", "2")
    assert spared.office_pid() == waiting
    # the bridge raises it as the conversion begins; the kernel may make it wait 0.1 s (EAGAIN)
    deadline = time.monotonic() + 5
    while autogroup(waiting)[1] != 10:
        assert time.monotonic() < deadline, autogroup(waiting)
        time.sleep(0.05)
    assert autogroup(spare_pid(spared))[1] == 19, "the next spare starts low again"


def test_a_spare_whose_libreoffice_died_is_not_handed_work(spared, legacy):
    """A LibreOffice killed while it waits (here the spare) takes its bridge with it: the worker sees it gone and
    starts another, instead of handing a file to a bridge with no LibreOffice behind it."""
    os.kill(spare_pid(spared), signal.SIGKILL)
    waiting = spared._spare
    deadline = time.monotonic() + 10
    while waiting.running:
        assert time.monotonic() < deadline, "the spare's bridge outlived its LibreOffice"
        time.sleep(0.05)
    convert_for(spared, "acct_a", legacy["doc"], "doc", "1")
    assert spared.current is not waiting
    convert_for(spared, "acct_b", legacy["xls"], "xls", "2")  # a new account: a spare, or a fresh start
    assert spared.tenant == "acct_b"


def test_without_a_spare_a_new_account_still_gets_a_fresh_libreoffice(fresh_office, legacy):
    convert_for(fresh_office, "acct_a", legacy["doc"], "doc", "1")
    first = fresh_office.office_pid()
    convert_for(fresh_office, "acct_b", legacy["doc"], "doc", "2")
    assert fresh_office.office_pid() != first and dies(first)


PLANT = r"""
import os
os.makedirs("/out/planted")
open("/out/planted/evil.doc", "w").write("x")
open("/out/note.txt", "w").write("left")
os.symlink("/usr", "/out/link")
"""


def test_the_job_dir_and_out_are_emptied_between_tasks(spared, legacy):
    convert_for(spared, "acct_a", legacy["doc"], "doc", "1")
    # what an earlier task left behind where the next one would see it
    (spared.job_dir / "planted").mkdir()
    (spared.job_dir / "planted" / "evil.doc").write_bytes(b"x")
    (spared.job_dir / "note.txt").write_text("left")
    (spared.job_dir / "link").symlink_to("/etc")
    # and what LibreOffice left in its /out, as its own user
    pid = spared.office_pid()
    subprocess.run(["nsenter", "-t", str(pid), "--user", "--mount", "--preserve-credentials", f"--setuid={sandbox.UID}",
                    f"--setgid={sandbox.GID}", "--wd=/", "/usr/bin/python3", "-c", PLANT], check=True, env={}, cwd="/")
    assert len(os.listdir(f"/proc/{pid}/root{sandbox.OUT}")) == 3
    spared.take("acct_a")
    assert spared.office_pid() == pid
    assert list(spared.job_dir.iterdir()) == [] and os.listdir(f"/proc/{pid}/root{sandbox.OUT}") == []
    assert any(Path("/etc").iterdir()), "emptying never follows a link out of the job dir"


def test_recycling_takes_the_spare(tmp_path, legacy):
    office = Office(tmp_path / "office", max_conversions=1, name="recycled-spare", spare=True)
    office.start()
    try:
        waiting = spare_pid(office)
        first = office.office_pid()
        convert_for(office, "acct_a", legacy["doc"], "doc", "1")
        assert office.office_pid() == waiting and dies(first) and office.restarts == 1
    finally:
        office.close()


@pytest.mark.slow
def test_closing_stops_the_spare_too(tmp_path):
    office = Office(tmp_path / "office", name="closing", spare=True)
    office.start()
    waiting = spare_pid(office)
    office.close()
    assert dies(waiting) and not alive(waiting) and not office.job_dir.exists()


@pytest.fixture
def kept(tmp_path):
    office = Office(tmp_path / "office", name="kept", spare=True, accounts=2, idle_seconds=600)
    office.start()
    yield office
    office.close()


def visible_in_job(pid):
    """What the LibreOffice ``pid`` sees in its ``/job``: its sandbox's own view of the host."""
    return set(os.listdir(f"/proc/{pid}/root{sandbox.JOB}"))


def test_an_accounts_libreoffice_waits_for_its_next_task_and_sees_no_other_accounts_files(kept, legacy):
    convert_for(kept, "acct_a", legacy["doc"], "doc", "1")
    first = kept.office_pid()
    waiting = spare_pid(kept)
    convert_for(kept, "acct_b", legacy["xls"], "xls", "2")
    assert kept.office_pid() == waiting, "the new account's file went to the spare"
    assert alive(first), "the first account's LibreOffice waits for its next task"
    # the two never share a job dir: what is staged for one account is not in the other's sandbox
    (kept.job_dir / "staged-for-b").write_text("b")
    assert "staged-for-b" in visible_in_job(waiting) and "staged-for-b" not in visible_in_job(first)
    convert_for(kept, "acct_a", legacy["ppt"], "ppt", "3")
    assert kept.office_pid() == first, "the account's own LibreOffice came back, warm"
    assert kept.tenant == "acct_a" and alive(waiting)
    assert "staged-for-b" not in visible_in_job(first)
    assert kept.restarts == 1, "coming back is no start"


def test_beyond_the_accounts_kept_the_least_recently_used_is_stopped(kept, legacy):
    pids = {}
    for n, tenant in enumerate(["acct_a", "acct_b", "acct_a", "acct_c"]):
        spare_pid(kept)  # as a worker's spare is up long before: each new account takes it
        convert_for(kept, tenant, legacy["doc"], "doc", str(n))
        pids.setdefault(tenant, kept.office_pid())
    assert kept.office_pid() == pids["acct_c"]
    assert alive(pids["acct_a"]), "the account served last before stays"
    assert dies(pids["acct_b"]), "the least recently used account's LibreOffice is stopped"


def test_an_idle_libreoffice_is_stopped_after_its_time(tmp_path, legacy):
    office = Office(tmp_path / "office", name="idle", spare=True, accounts=3, idle_seconds=2)
    office.start()
    try:
        convert_for(office, "acct_a", legacy["doc"], "doc", "1")
        first = office.office_pid()
        spare_pid(office)
        convert_for(office, "acct_b", legacy["doc"], "doc", "2")
        assert alive(first)
        assert dies(first, within=30), "an idle account's LibreOffice is stopped after idle_seconds"
        assert alive(office.office_pid()), "the one at hand is not idle"
    finally:
        office.close()


def test_closing_stops_the_idle_ones_too(tmp_path, legacy):
    office = Office(tmp_path / "office", name="closing-idle", spare=True, accounts=3)
    office.start()
    convert_for(office, "acct_a", legacy["doc"], "doc", "1")
    first = office.office_pid()
    spare_pid(office)
    convert_for(office, "acct_b", legacy["doc"], "doc", "2")
    second = office.office_pid()
    office.close()
    assert dies(first) and dies(second)
    assert not any((tmp_path / "office" / "work").iterdir()) and not any((tmp_path / "office" / "office").iterdir())


# One pool per worker process: an account's idle LibreOffice serves its next task on any worker thread.


def shared_pool(base_dir, accounts=2):
    from docshift.engine import Engine

    return Engine.pool(base_dir, accounts=accounts)


def in_thread(work):
    """Run ``work()`` in a thread of its own that then ends, as a worker thread does: what it returned."""
    done = []
    thread = threading.Thread(target=lambda: done.append(work()))
    thread.start()
    thread.join()
    assert done, "the thread's work failed"
    return done[0]


def test_an_accounts_libreoffice_serves_its_next_task_on_another_thread_after_the_first_ended(tmp_path, legacy):
    """The first thread's Office converts for acct_a, then for acct_b, and ends. The LibreOffice of acct_a waits
    in the pool, alive though the thread it worked for ended (bubblewrap's --die-with-parent follows the thread
    that started it: the pool's own launcher), and the second thread's Office converts acct_a's next file on
    it: no start. Its job dir was emptied, and acct_b's LibreOffice never comes back for acct_a."""
    pool = shared_pool(tmp_path / "office")

    def first_thread():
        office = Office(tmp_path / "office", name="first", pool=pool)
        office.start()
        convert_for(office, "acct_a", legacy["doc"], "doc", "1")
        served_a = office.office_pid()
        (office.job_dir / "left-by-a").write_text("a")
        convert_for(office, "acct_b", legacy["xls"], "xls", "2")
        served_b = office.office_pid()
        office.close()
        return served_a, served_b

    second = Office(tmp_path / "office", name="second", pool=pool)
    second.start()
    try:
        served_a, served_b = in_thread(first_thread)
        assert dies(served_b), "the thread's own LibreOffice at hand goes with it"
        assert alive(served_a), "acct_a's idle LibreOffice outlives the thread it worked for"
        starts = second.starts
        result = convert_for(second, "acct_a", legacy["ppt"], "ppt", "3")
        assert result.path.exists() and second.office_pid() == served_a, "acct_a's own LibreOffice came back"
        assert second.starts == starts, "taking an account's idle LibreOffice is no start"
        assert "left-by-a" not in visible_in_job(served_a)
        convert_for(second, "acct_c", legacy["doc"], "doc", "4")
        assert second.office_pid() not in (served_a, served_b), "another account gets a fresh LibreOffice"
    finally:
        second.close()
    assert dies(served_a), "the last Office to close closes the pool and its idle LibreOffices"
    assert not pool.work_dir.exists() and not any((tmp_path / "office" / "office").iterdir())


def test_a_shared_pool_keeps_idle_ones_for_each_office(tmp_path, legacy):
    """With two accounts kept per Office and two Offices, the pool keeps two idle LibreOffices: a third set
    aside stops the least recently used."""
    pool = shared_pool(tmp_path / "office", accounts=2)
    offices = [Office(tmp_path / "office", name=f"office-{n}", pool=pool) for n in range(2)]
    try:
        for office in offices:
            office.start()
        served = {}
        for n, tenant in enumerate(["acct_a", "acct_b", "acct_c", "acct_d"]):
            office = offices[n % 2]
            convert_for(office, tenant, legacy["doc"], "doc", str(n))
            served[tenant] = office.office_pid()
        # acct_a and acct_b were set aside when acct_c and acct_d came: both wait
        assert {soffice.tenant for soffice in pool.idle} == {"acct_a", "acct_b"}
        convert_for(offices[0], "acct_e", legacy["doc"], "doc", "5")
        assert {soffice.tenant for soffice in pool.idle} == {"acct_b", "acct_c"}
        assert dies(served["acct_a"]) and alive(served["acct_b"]) and alive(served["acct_c"])
    finally:
        for office in offices:
            office.close()
