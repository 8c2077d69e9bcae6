"""LibreOffice shut in by bubblewrap, for real: not root, no secrets, no data dir, no network, what it may use
capped. Linked content: ``test_sandbox_links.py``; the worker's start and leftovers: ``test_sandbox_start.py``;
the running engine as the host sees it: ``test_sandbox_office.py``."""

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import requests
from conftest import Service, soffice_pids, wait_for

from docshift.engine import sandbox

SECRETS = {"DOCSHIFT_SECRET_KEY": "canary-secret-key-" + secrets.token_hex(8),
           "AWS_SECRET_ACCESS_KEY": "canary-aws-" + secrets.token_hex(8), "AWS_ACCESS_KEY_ID": "AKIACANARY"}


@pytest.fixture(scope="module")
def service(s3, tmp_path_factory):
    """A live service whose worker has secrets in its environment and settings."""
    service = Service(tmp_path_factory.mktemp("sandboxed"), s3["env"])
    service.env.update(SECRETS)
    service.start(workers=1)
    wait_for(lambda: soffice_pids(service.processes["worker"].pid), 60, "the worker's LibreOffice")
    yield service
    service.stop()


def test_libreoffice_is_not_root_and_has_none_of_the_secrets(service):
    pids = soffice_pids(service.processes["worker"].pid)
    assert pids  # the worker's parent, and any child of it at work
    for pid in pids:
        a_libreoffice_without_secrets(service, pid)


def a_libreoffice_without_secrets(service, pid):
    with open(f"/proc/{pid}/status") as f:
        ids = {line.split(":")[0]: line.split()[1:] for line in f if line.startswith(("Uid", "Gid"))}
    assert ids["Uid"] == ids["Gid"] == [str(sandbox.UID)] * 4
    environ = Path(f"/proc/{pid}/environ").read_bytes().decode()
    names = {entry.split("=", 1)[0] for entry in environ.split("\0") if entry}
    assert names <= {"HOME", "TMPDIR", "PATH", "LANG", "PWD", "OLDPWD", "SAL_USE_VCLPLUGIN", "UserInstallation",
                     "MAX_CONCURRENCY"}
    leaked = [*SECRETS.values(), service.env["DOCSHIFT_S3_SECRET_KEY"]]
    assert not [value for value in leaked if value in environ]
    if os.geteuid() == 0:  # the host may look at the sandbox's own file system from outside
        root = Path(f"/proc/{pid}/root")
        assert not (root / str(service.data_dir).lstrip("/")).exists()
        assert not (root / "etc" / "passwd").exists()
        assert sorted(p.name for p in (root / "job").iterdir()) == []


def test_healthz_reports_the_sandbox_and_the_engine(service):
    checks = requests.get(f"{service.base_url}/healthz", timeout=10).json()["checks"]
    assert checks["sandbox"] == "ok" and checks["engine"] == "ok"


PROBE = r"""
import json, os, socket, sys
data = sys.argv[1]
seen = {path: os.path.exists(path) for path in (data, data + "/secret_key", data + "/objects/input.doc",
                                                "/etc/passwd", "/root", "/home")}
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=3).close()
    reached = True
except OSError:
    reached = False
try:
    socket.getaddrinfo("example.com", 80)
    resolved = True
except OSError:
    resolved = False
print(json.dumps({"uid": os.getuid(), "seen": seen, "reached": reached, "resolved": resolved,
                  "interfaces": [name for _, name in socket.if_nameindex()], "env": sorted(os.environ),
                  "writable": [p for p in ("/", "/usr", "/etc", "/job", "/profile", "/tmp")
                               if os.access(p, os.W_OK)]}))
"""


def test_the_sandbox_sees_no_data_dir_and_no_network(tmp_path):
    """The argv Forkit uses, with a probe in place of LibreOffice."""
    data = tmp_path / "data"
    (data / "objects").mkdir(parents=True)
    (data / "secret_key").write_text("do not read")
    (data / "objects" / "input.doc").write_text("a tenant's file")
    job, profile = data / "work" / "probe", data / "office" / "probe"
    for path in (job, profile):
        path.mkdir(parents=True)
        sandbox.give(path)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    argv = sandbox.command(job, profile, Path(sandbox.__file__).parent,
                           ["/usr/bin/python3", "-c", PROBE, str(data), str(listener.getsockname()[1])])
    env = {**os.environ, **SECRETS}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd="/")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    with pytest.raises(TimeoutError):
        listener.accept()
    listener.close()
    assert report["uid"] == sandbox.UID
    assert not any(report["seen"].values()), report["seen"]
    assert not report["reached"] and not report["resolved"] and report["interfaces"] == ["lo"]
    assert report["env"] == ["LANG", "PATH", "PWD"]
    assert report["writable"] == ["/profile", "/tmp"]  # its job dir is read-only, the rest in memory


# what a hostile program may use inside ----------------------------------------------------

def run_inside(tmp_path, script, limits=None):
    """``script`` run by python in the sandbox Forkit uses, with ``limits`` (the defaults if None)."""
    job, profile = tmp_path / "job", tmp_path / "profile"
    for path in (job, profile):
        path.mkdir(exist_ok=True)
        sandbox.give(path)
    extra = {} if limits is None else {"limits": limits}
    argv = sandbox.command(job, profile, Path(sandbox.__file__).parent, ["/usr/bin/python3", "-c", script], **extra)
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, env={}, cwd="/")


FORK_BOMB = r"""
import json, os
forked, error = 0, None
while forked < 1000:
    try:
        pid = os.fork()
    except OSError as failure:
        error = type(failure).__name__
        break
    if pid == 0:
        os.execv("/usr/bin/sleep", ["sleep", "120"])
    forked += 1
print(json.dumps({"forked": forked, "error": error}), flush=True)
"""


def test_a_fork_bomb_stops_at_the_process_limit(tmp_path):
    done = run_inside(tmp_path, FORK_BOMB)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["error"] == "BlockingIOError" and report["forked"] < sandbox.Limits().processes, report


def test_the_limit_on_processes_is_each_sandboxs_own(tmp_path):
    """The count is per sandbox (its user namespace), not per host user: 65534 is every sandbox's,
    and a fork bomb in one leaves the others their processes."""
    job, profile = tmp_path / "bomb-job", tmp_path / "bomb-profile"
    for path in (job, profile):
        path.mkdir()
        sandbox.give(path)
    holding = FORK_BOMB + "import time\ntime.sleep(120)\n"  # keeps what it got
    argv = sandbox.command(job, profile, Path(sandbox.__file__).parent, ["/usr/bin/python3", "-c", holding])
    bomb = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env={}, cwd="/", start_new_session=True)
    try:
        assert json.loads(bomb.stdout.readline())["error"] == "BlockingIOError"
        done = run_inside(tmp_path, FORK_BOMB)
        assert json.loads(done.stdout)["forked"] >= sandbox.Limits().processes - 10, done.stdout
    finally:
        os.killpg(bomb.pid, signal.SIGKILL)
        bomb.wait()
        bomb.stdout.close()


BIG_FILE = r"""
import errno, json, os
error = None
try:
    with open("/tmp/big", "wb") as f:
        for _ in range(64):
            f.write(b"x" * (1 << 20))
            f.flush()
except OSError as failure:
    error = errno.errorcode[failure.errno]
print(json.dumps({"size": os.path.getsize("/tmp/big"), "error": error}))
"""


def test_no_file_grows_past_the_scratch_limit(tmp_path):
    done = run_inside(tmp_path, BIG_FILE, sandbox.Limits(scratch_mb=8))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"size": 8 << 20, "error": "EFBIG"}


# writes 1 MiB files into each of PLACES until MIB of them or an error: {place: [files written, errno name]}
FILL = r"""
import errno, json, os
found = {}
for where in PLACES:
    written, error = 0, None
    try:
        while written < MIB:
            with open(f"{where}/fill-{written}", "wb") as f:
                f.write(b"x" * (1 << 20))
            written += 1
    except OSError as failure:
        error = errno.errorcode[failure.errno]
    found[where] = [written, error]
print(json.dumps(found))
"""


def fill(places, mib):
    """FILL for ``places``, ``mib`` files at most each."""
    return FILL.replace("PLACES", repr(tuple(places))).replace("MIB", str(mib))


def test_the_sandbox_file_systems_are_sized(tmp_path):
    """``/tmp`` and ``/dev/shm`` are small, ``/dev`` and the job dir take no files, the profile (with LibreOffice's
    temp files, and each child's copy of its source and result) holds the scratch limit: none can fill the host's
    memory or disk."""
    places = ("/tmp", "/dev/shm", "/dev", "/profile", "/job")
    done = run_inside(tmp_path, fill(places, 48), sandbox.Limits(scratch_mb=32))
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["/dev"] == found["/job"] == [0, "EROFS"]
    for where, size in (("/tmp", sandbox.SMALL_TMPFS_MB), ("/dev/shm", sandbox.SMALL_TMPFS_MB), ("/profile", 32)):
        assert found[where][1] == "ENOSPC" and size - 2 <= found[where][0] <= size, (where, found)
    assert list((tmp_path / "profile").iterdir()) == list((tmp_path / "job").iterdir()) == []  # nothing on disk


# a worker that is not root (the container image, the systemd unit): the sandbox's user is then the worker's own uid
# on the host, so file modes keep nothing out

def as_a_service_user(code, *args, timeout=180):
    """Python ``code`` run by the venv's python as a worker that is not root would: as nobody when the tests run
    as root (the sandbox then takes its non-root way), as the tests' own user otherwise."""
    prefix = ["setpriv", f"--reuid={sandbox.UID}", f"--regid={sandbox.GID}", "--clear-groups"] \
        if os.geteuid() == 0 else []
    return subprocess.run([*prefix, sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={"PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": "1"},
                          cwd=Path(__file__).resolve().parents[2])


@pytest.fixture
def service_dir():
    """A directory a worker that is not root owns: not under the tests' tmp dir, which only root may enter."""
    directory = Path(tempfile.mkdtemp(prefix="docshift-not-root-", dir="/var/tmp"))
    if os.geteuid() == 0:
        os.chown(directory, sandbox.UID, sandbox.GID)
    yield directory
    shutil.rmtree(directory)


IN_A_SANDBOX = r"""
import subprocess, sys
from pathlib import Path
from docshift.engine import sandbox
base, script = Path(sys.argv[1]), sys.argv[2]
assert not sandbox.as_root()
for name in ("job", "profile"):
    (base / name).mkdir()
argv = sandbox.command(base / "job", base / "profile", Path(sandbox.__file__).parent,
                       ["/usr/bin/python3", "-c", script], limits=sandbox.Limits(scratch_mb=int(sys.argv[3])))
done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env={}, cwd="/")
print(done.stdout, end="")
print(done.stderr, end="", file=sys.stderr)
sys.exit(done.returncode)
"""


def disk_use(directory):
    return sum(path.lstat().st_blocks * 512 for path in Path(directory).rglob("*"))


def test_a_sandbox_of_a_worker_that_is_not_root_cannot_fill_the_disk(service_dir):
    """Its job dir on the host is its own uid's, yet read-only inside; what it writes goes to its profile, in
    memory and no larger than the scratch limit: 40 MiB tried, 8 MiB written, none of it on the host's disk."""
    done = as_a_service_user(IN_A_SANDBOX, service_dir, fill(("/job", "/profile"), 40), 8)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["/job"] == [0, "EROFS"], found
    assert found["/profile"][1] == "ENOSPC" and 6 <= found["/profile"][0] <= 8, found
    assert disk_use(service_dir) < 1 << 20, sorted(service_dir.rglob("*"))


NOT_ROOT_OFFICE = r"""
import json, sys
from pathlib import Path
from docshift.engine import sandbox
from docshift.engine.forkit import Forkit
from docshift.formats import FORMATS
base, source = Path(sys.argv[1]), Path(sys.argv[2])
assert not sandbox.as_root()
office = Forkit(base / "office", name="not-root")
try:
    office.export(source, base / "result.docx", FORMATS["doc"].export_filter, 60)
    seen = sorted(p.name for p in office.job_dir.iterdir())
finally:
    office.close()
result = (base / "result.docx").stat()
print(json.dumps({"result": result.st_size, "mode": result.st_mode & 0o777, "job dir after": seen}))
"""


def test_a_worker_that_is_not_root_converts_through_descriptors(service_dir, legacy):
    """A worker whose sandbox's user is its own uid, as in the container image, converts: the source and the
    result go to the child as descriptors, the result is the worker's alone (0600), and ``/job`` stays empty."""
    source = service_dir / "letter.doc"
    shutil.copy(legacy["doc"], source)
    if os.geteuid() == 0:
        os.chown(source, sandbox.UID, sandbox.GID)
    done = as_a_service_user(NOT_ROOT_OFFICE, service_dir, source)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["result"] > 0 and found["mode"] == 0o600 and found["job dir after"] == [], found


SPIN = r"""
import resource
while resource.getrusage(resource.RUSAGE_SELF).ru_utime < 4:
    pass
print("spun 4 s of CPU")
"""


def test_cpu_time_is_limited(tmp_path):
    done = run_inside(tmp_path, SPIN, sandbox.Limits(cpu_seconds=1))
    assert "spun" not in done.stdout and done.returncode != 0, (done.returncode, done.stdout)
