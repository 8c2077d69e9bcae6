"""One LibreOffice per account: a LibreOffice that has converted one account's file never converts
another's, the job dir is emptied between tasks, and a spare started in the background takes over."""

import time
from pathlib import Path

import pytest
from test_office import alive, dies

from docshift.engine import convert as converter
from docshift.engine.office import Office


@pytest.fixture
def spared(tmp_path):
    office = Office(tmp_path / "office", name="spared", spare=True)
    office.start()
    yield office
    office.close()


def spare_pid(office, within=120):
    """The pid of the spare's soffice.bin, once the spare keeper has one ready."""
    deadline = time.monotonic() + within
    while True:
        spare = office._spare
        if spare is not None:
            pid = office.office_pid(spare.process)
            if pid:
                return pid
        assert time.monotonic() < deadline, "no spare LibreOffice came up"
        time.sleep(0.1)


def convert_for(office, tenant, source, kind, work):
    office.take(tenant)
    task_dir = office.job_dir / work
    task_dir.mkdir(parents=True)
    return converter.convert(office, source, kind, task_dir, 60)


def test_an_account_keeps_its_libreoffice_and_another_gets_the_spare(spared, legacy):
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


def test_without_a_spare_a_new_account_still_gets_a_fresh_libreoffice(fresh_office, legacy):
    convert_for(fresh_office, "acct_a", legacy["doc"], "doc", "1")
    first = fresh_office.office_pid()
    convert_for(fresh_office, "acct_b", legacy["doc"], "doc", "2")
    assert fresh_office.office_pid() != first and dies(first)


def test_the_job_dir_is_emptied_between_tasks(spared, legacy):
    convert_for(spared, "acct_a", legacy["doc"], "doc", "1")
    # what a LibreOffice, or an earlier task, left behind where the next one would see it
    (spared.job_dir / "planted").mkdir()
    (spared.job_dir / "planted" / "evil.doc").write_bytes(b"x")
    (spared.job_dir / "note.txt").write_text("left")
    (spared.job_dir / "link").symlink_to("/etc")
    spared.take("acct_a")
    assert list(spared.job_dir.iterdir()) == []
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
