"""The engine's LibreOffice in its sandbox as the host sees it, running: a parent and the children it forks are
nobody, with a clean environment, and not dumpable; ``/job`` is read-only and empty; what a child writes on the
host goes through the result's descriptor only, within the file-size limit."""

import errno
import fcntl
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import ended_children_dirs, soffice_pids, wait_for

from docshift.contract import TaskErrorCode
from docshift.engine import convert, sandbox
from docshift.engine.forkit import Forkit
from docshift.errors import ConversionFailed, DocshiftError
from docshift.formats import FORMATS

ENVIRONMENT = {"HOME", "TMPDIR", "PATH", "LANG", "PWD", "SAL_USE_VCLPLUGIN", "UserInstallation", "MAX_CONCURRENCY"}


def export(office, source, target, timeout=60):
    kind = Path(source).suffix.lstrip(".")
    return office.export(source, target, FORMATS[kind].export_filter, timeout)


def at_work(office, source, target, look):
    """``look(parent, child)`` while a child of ``office`` converts ``source`` on another thread; returns what
    it returned and what the export did ("facts" or "error")."""
    outcome = {}
    parent, *before = soffice_pids(office.process.pid)

    def run():
        try:
            outcome["facts"] = export(office, source, target)
        except Exception as error:  # what the export raised is the finding
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    child, deadline = None, time.monotonic() + 30
    while child is None and thread.is_alive() and time.monotonic() < deadline:
        child = next((pid for pid in soffice_pids(office.process.pid)[1:] if pid not in before), None)
    try:
        assert child is not None, f"no child was seen converting: {outcome}"
        return look(parent, child), outcome
    finally:
        thread.join(120)


def uid(pid):
    return int(next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                    if line.startswith("Uid:")).split()[1])


def test_neither_the_parent_nor_a_child_is_dumpable(office, slow_xls, tmp_path):
    """Both run as the sandbox's user (nobody for a root worker), yet their /proc files (memory, descriptors,
    environment) are root's: the kernel's mark of a process that is not dumpable, whose memory no process of the
    same uid (another child, a taken-over parent's sibling) may read or write. Their environment is clean."""
    def look(parent, child):
        return {pid: (uid(pid), os.stat(f"/proc/{pid}/environ").st_uid, os.stat(f"/proc/{pid}/mem").st_uid,
                      Path(f"/proc/{pid}/environ").read_bytes()) for pid in (parent, child)}

    seen, outcome = at_work(office, slow_xls, tmp_path / "big.xlsx", look)
    assert "facts" in outcome, outcome
    expected = sandbox.UID if sandbox.as_root() else os.getuid()
    for pid, (runs_as, environ_owner, mem_owner, environ) in seen.items():
        assert runs_as == expected and environ_owner == mem_owner == 0, (pid, runs_as, environ_owner, mem_owner)
        names = {entry.split(b"=", 1)[0].decode() for entry in environ.split(b"\0") if entry}
        assert names <= ENVIRONMENT, names


def test_the_job_dir_is_read_only_and_empty(office, legacy, tmp_path):
    """``/job``, the one host directory the sandbox sees, is mounted read-only and holds nothing, during and
    after conversions: the files come as descriptors."""
    export(office, legacy["doc"], tmp_path / "letter.docx")
    parent = soffice_pids(office.process.pid)[0]
    mounts = [line.split() for line in Path(f"/proc/{parent}/mountinfo").read_text().splitlines()]
    job = [fields for fields in mounts if fields[4] == sandbox.JOB]
    assert job and all("ro" in fields[5].split(",") for fields in job), job
    assert list(office.job_dir.iterdir()) == []
    if sandbox.as_root():  # the host may look into the sandbox from outside
        assert os.listdir(f"/proc/{parent}/root{sandbox.JOB}") == []


# what a child does with its result: writes to an inherited descriptor of a host file, far past the limit
WRITE_FD = r"""
import errno, json, os, sys
fd, error, written = int(sys.argv[1]), None, 0
try:
    while written < 64 << 20:
        written += os.write(fd, b"x" * (1 << 20))
except OSError as failure:
    error = errno.errorcode[failure.errno]
print(json.dumps({"written": written, "error": error}))
"""


def test_a_result_written_through_its_descriptor_stops_at_the_file_size_limit(tmp_path):
    """The sandbox writes on the host only through the result's descriptor, and no further than the scratch
    limit (RLIMIT_FSIZE): 64 MiB tried, 8 MiB on disk."""
    job, profile = tmp_path / "job", tmp_path / "profile"
    for path in (job, profile):
        path.mkdir()
        sandbox.give(path)
    target = tmp_path / "result.docx"
    result = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    # above the wrapper's own (3 to 5), and a free number: dup2 onto a fixed one closed whatever this process had
    # there (a zip another test still held failed later with EBADF)
    passed = fcntl.fcntl(result, fcntl.F_DUPFD, 20)
    os.close(result)
    try:
        argv = sandbox.command(job, profile, Path(sandbox.__file__).parent,
                               ["/usr/bin/python3", "-c", WRITE_FD, str(passed)], limits=sandbox.Limits(scratch_mb=8))
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={}, cwd="/", pass_fds=(passed,))
    finally:
        os.close(passed)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"written": 8 << 20, "error": errno.errorcode[errno.EFBIG]}
    assert target.stat().st_size == 8 << 20


def test_a_conversion_past_the_scratch_limit_fails_and_leaves_nothing_over_it(legacy, slow_xls, tmp_path):
    """A parent whose limits are tiny (8 MiB) starts and converts a small file; a child whose source and result
    need more fails, its file on the host no larger than the limit, and the parent serves on."""
    office = Forkit(tmp_path / "office", name="tiny", limits=sandbox.Limits(scratch_mb=8))
    try:
        assert export(office, legacy["doc"], tmp_path / "small.docx")["outcome"] == "converted"
        with pytest.raises(DocshiftError):
            export(office, slow_xls, tmp_path / "big.xlsx")
        assert (tmp_path / "big.xlsx").stat().st_size <= 8 << 20
        # the failed child's temp dir goes when the parent reaps it: the next child then has the room
        parent = soffice_pids(office.process.pid)[0]
        wait_for(lambda: ended_children_dirs(parent) == [], 10, "the failed child's temp dir to go")
        assert export(office, legacy["xls"], tmp_path / "after.xlsx")["outcome"] == "converted"
        assert office.restarts == 0
    finally:
        office.close()


def test_a_file_that_outgrows_the_scratch_space_is_named_so(slow_xls, tmp_path):
    """Its source loads, and the store fails for want of room: the task says so, and how much room there is, not
    that LibreOffice could not read the file (a 104 MB workbook, past the default 512 MB)."""
    office = Forkit(tmp_path / "office", name="tiny", limits=sandbox.Limits(scratch_mb=8), ready=1)
    try:
        with pytest.raises(ConversionFailed) as failed:
            convert.convert(office, slow_xls, "xls", tmp_path / "work", 60)
    finally:
        office.close()
    assert failed.value.code == TaskErrorCode.CONVERSION_FAILED
    assert failed.value.message == "This file needs more room to convert than the service gives one conversion (8 MB)."


def test_files_that_fill_the_scratch_space_together_convert_one_after_another(slow_xls, tmp_path):
    """The worker's conversions share one sandbox, so one scratch space: two shares of 12 MB hold one such
    workbook's conversion, not two. Both convert, the one that found the space full tried again alone. Before,
    both failed, each told it needed more room than "one conversion" has."""
    office = Forkit(tmp_path / "office", name="shared", limits=sandbox.Limits(scratch_mb=12), ready=2)
    outcomes = {}

    def run(n):
        try:
            convert.convert(office, slow_xls, "xls", tmp_path / f"work-{n}", 60)
            outcomes[n] = "converted"
        except ConversionFailed as error:
            outcomes[n] = error.message

    try:
        office.start()
        threads = [threading.Thread(target=run, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        office.close()
    assert outcomes == {0: "converted", 1: "converted"}


@pytest.mark.parametrize("kind", ["doc", "xls"])
def test_conversions_work_with_a_private_umask(office, legacy, tmp_path, kind):
    """systemd runs the worker with UMask=0077: whatever the worker makes is its own, yet the child still reads
    the source and writes the result, through the descriptors the worker opened."""
    old = os.umask(0o077)
    try:
        target = tmp_path / f"result.{FORMATS[kind].target}"
        export(office, legacy[kind], target)
    finally:
        os.umask(old)
    assert target.stat().st_size > 0 and target.stat().st_mode & 0o077 == 0
