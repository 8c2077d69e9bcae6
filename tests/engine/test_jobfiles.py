"""A compromised LibreOffice cannot steer the worker through the job dir: each test plays it for real,
a program in a real sandbox of its own over the Office's job dir, as the sandbox's user, doing what
a hostile document that took LibreOffice over could do there; the worker runs as root here."""

import json
import os
import secrets
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import wait_for

from docshift import settings
from docshift.engine import Engine, sandbox
from docshift.engine.office import Office
from docshift.errors import OfficeCrashed
from docshift.formats import FORMATS
from docshift.storage import ObjectStore
from docshift.tasks import conversion


@pytest.fixture(scope="module")
def office(tmp_path_factory):
    office = Office(tmp_path_factory.mktemp("jobfiles"), name="jobfiles")
    office.start()
    yield office
    office.stop()


def in_the_sandbox(office, tmp_path, script, *args, wait=True):
    """Run ``script`` as the Office's own LibreOffice could: in its sandbox over its job dir, as its user."""
    profile = tmp_path / "hostile-profile"
    profile.mkdir(exist_ok=True)
    sandbox.give(profile)
    argv = sandbox.command(office.job_dir, profile, Path(sandbox.__file__).parent,
                           ["/usr/bin/python3", "-c", script, *map(str, args)])
    if not wait:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env={}, cwd="/", start_new_session=True)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={}, cwd="/")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def outside(tmp_path):
    """A host directory the sandbox cannot see, with a root-only file in it: what a symlink would aim at."""
    directory = tmp_path / "outside"
    directory.mkdir()
    secret = directory / "secret.docx"
    secret.write_bytes(b"PK\x03\x04 another tenant's result " + secrets.token_bytes(16))
    secret.chmod(0o600)
    return directory


def untouched(directory, before):
    return {p.name: (p.lstat().st_uid, p.lstat().st_mode, p.read_bytes()) for p in directory.iterdir()} == before


def snapshot(directory):
    return {p.name: (p.lstat().st_uid, p.lstat().st_mode, p.read_bytes()) for p in directory.iterdir()}


HOSTILE = r"""
import json, os, sys
source, target, secret = sys.argv[1:4]
staging = os.path.dirname(target)
tried = {}
def attempt(what, action):
    try:
        action()
        tried[what] = "done"
    except OSError as error:
        tried[what] = type(error).__name__
def write_target():
    with open(target, "wb") as f:
        f.write(b"written by the sandbox")
def swap_target():
    os.symlink(secret, staging + "/swap")
    os.replace(staging + "/swap", target)
def move_staging():
    os.rename(staging, "/job/moved")
    os.rename("/job/moved", staging)
attempt("write the target", write_target)
attempt("swap the target for a link", swap_target)
attempt("list /job", lambda: os.listdir("/job"))
attempt("plant a link in /job", lambda: os.symlink(secret, "/job/planted"))
attempt("move the staging dir", move_staging)
attempt("plant a link beside the target", lambda: os.symlink(secret, staging + "/planted"))
attempt("remove the source", lambda: os.unlink(source))
print(json.dumps(tried))
"""


def test_the_sandbox_writes_its_target_and_nothing_else(office, legacy, outside, tmp_path):
    """While LibreOffice converts, the one thing it may write on the host is the target made for it;
    a link it swaps in for the target is never followed, and no file outside changes."""
    before = snapshot(outside)
    target = tmp_path / "result.docx"
    secret = outside / "secret.docx"
    try:
        with office._visible(Path(legacy["doc"]).resolve(), target) as (inner_source, inner_target):
            tried = in_the_sandbox(office, tmp_path, HOSTILE, inner_source, inner_target, secret)
    except OfficeCrashed:  # a worker that is not root: the sandbox owns the dirs, the link is refused
        assert not sandbox.as_root()
    if sandbox.as_root():
        assert tried == {"write the target": "done", "list /job": "PermissionError",
                         "plant a link in /job": "PermissionError", "move the staging dir": "PermissionError",
                         "plant a link beside the target": "PermissionError",
                         "swap the target for a link": "PermissionError", "remove the source": "PermissionError"}
        assert target.read_bytes() == b"written by the sandbox"
    assert not target.is_symlink()
    assert secret.read_bytes() not in (target.read_bytes() if target.exists() else b"")
    assert untouched(outside, before)
    assert sorted(os.listdir(office.job_dir)) == []


WATCHER = r"""
import os, sys, time
outside = sys.argv[1]
print("watching", flush=True)
deadline = time.monotonic() + 60
swapped = set()
while time.monotonic() < deadline:
    try:
        names = os.listdir("/job")
    except OSError:
        continue
    for name in names:
        if name in swapped or name == "selftest":
            continue
        try:
            os.rename("/job/" + name, "/job/." + name)
            os.symlink(outside, "/job/" + name)
            swapped.add(name)
            print("swapped", name, flush=True)
        except OSError as error:
            print("refused", name, error, flush=True)
"""


def test_a_task_dir_cannot_be_swapped_for_a_link(office, legacy, outside, s3, tmp_path):
    """A compromised LibreOffice, idle between tasks, watches ``/job`` and swaps each new directory
    for a link to a host directory, hoping the worker writes the next task's files through it and
    hands them over (chown) to the sandbox's user. The task converts, and nothing outside changes."""
    config = settings.load({"DATA_DIR": str(tmp_path / "data"), "S3_BUCKET": f"jobfiles-{secrets.token_hex(4)}",
                            "S3_ENDPOINT": s3["endpoint"], "S3_ACCESS_KEY": s3["env"]["DOCSHIFT_S3_ACCESS_KEY"],
                            "S3_SECRET_KEY": s3["env"]["DOCSHIFT_S3_SECRET_KEY"]})
    objects = ObjectStore(config)
    objects.ensure_bucket()
    task_id = "task" + secrets.token_hex(6)
    objects.put_input(task_id, Path(legacy["doc"]).read_bytes())
    outside.chmod(0o777)  # even a directory the sandbox's user could write in
    before = snapshot(outside)
    watcher = in_the_sandbox(office, tmp_path, WATCHER, outside, wait=False)
    try:
        assert watcher.stdout.readline() == "watching\n"
        outcome = conversion.convert_task(task_id, "doc", objects, config, Engine(office))
    finally:
        os.killpg(watcher.pid, signal.SIGKILL)
        watcher.wait()
    said = watcher.stdout.read()
    watcher.stdout.close()
    assert "swapped" not in said, said
    assert outcome.status == "SUCCEEDED", outcome
    assert untouched(outside, before)
    wait_for(lambda: not os.listdir(office.job_dir), 10, "the job dir to be empty")


@pytest.mark.parametrize("kind", ["doc", "xls"])
def test_conversions_work_with_a_private_umask(office, legacy, tmp_path, kind):
    """systemd runs the worker with UMask=0077: whatever the worker makes is its own, yet the
    sandbox still reads the source and writes the target."""
    old = os.umask(0o077)
    try:
        target = tmp_path / f"result.{FORMATS[kind].target}"
        office.export(legacy[kind], target, FORMATS[kind].export_filter, 60)
    finally:
        os.umask(old)
    assert target.stat().st_size > 0 and target.stat().st_mode & 0o077 == 0
