"""A compromised LibreOffice cannot steer the worker through the job dir or its ``/out``: each test plays it for
real, a program in the Office's own sandbox, or in a real sandbox of its own over the Office's job dir, as the
sandbox's user, doing what a hostile document that took LibreOffice over could do there."""

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


def in_its_own_sandbox(office, script, *args):
    """Run ``script`` as the Office's LibreOffice itself could: in the namespaces of its sandbox, as its user."""
    argv = ["nsenter", "-t", str(office.office_pid()), "--user", "--mount", "--preserve-credentials",
            f"--setuid={sandbox.UID}", f"--setgid={sandbox.GID}", "--wd=/",
            "/usr/bin/python3", "-c", script, *map(str, args)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={}, cwd="/")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


HOSTILE = r"""
import errno, json, os, sys
source, target, secret = sys.argv[1:4]
staging = os.path.dirname(source)
tried = {}
def attempt(what, action):
    try:
        action()
        tried[what] = "done"
    except OSError as error:
        tried[what] = errno.errorcode[error.errno]
def write(path):
    with open(path, "wb") as f:
        f.write(b"written by the sandbox")
def swap_target():
    os.symlink(secret, "/out/swap")
    os.replace("/out/swap", target)
def move_staging():
    os.rename(staging, "/job/moved")
attempt("write the target", lambda: write(target))
attempt("write in /job", lambda: write("/job/planted"))
attempt("plant a link in /job", lambda: os.symlink(secret, "/job/link"))
attempt("move the staging dir", move_staging)
attempt("plant a link beside the source", lambda: os.symlink(secret, staging + "/planted"))
attempt("remove the source", lambda: os.unlink(source))
attempt("swap the target for a link", swap_target)
print(json.dumps(tried))
"""


def test_the_sandbox_writes_nothing_on_the_host_and_its_links_are_not_followed(office, legacy, outside, tmp_path):
    """While LibreOffice converts, its job dir is read-only to it, whoever the worker runs as: it writes only in
    its own ``/out``. A link it puts there in place of its result is never followed, and no file outside changes."""
    before = snapshot(outside)
    target = tmp_path / "result.docx"
    secret = outside / "secret.docx"
    with pytest.raises(OfficeCrashed, match="no regular file"), \
            office._visible(Path(legacy["doc"]).resolve(), target) as (inner_source, inner_target):
        tried = in_its_own_sandbox(office, HOSTILE, inner_source, inner_target, secret)
    assert tried == {"write the target": "done", "write in /job": "EROFS", "plant a link in /job": "EROFS",
                     "move the staging dir": "EROFS", "plant a link beside the source": "EROFS",
                     "remove the source": "EROFS", "swap the target for a link": "done"}
    assert not target.is_symlink()
    assert secret.read_bytes() not in (target.read_bytes() if target.exists() else b"")
    assert untouched(outside, before)
    assert sorted(os.listdir(office.job_dir)) == []
    office.start()  # the crash stopped it


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
