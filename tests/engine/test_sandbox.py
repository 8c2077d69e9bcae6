"""LibreOffice shut in by bubblewrap, for real: not root, no secrets, no data dir, no network,
linked content stays out, no sandbox means no worker, nothing left behind."""

import http.server
import json
import os
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
import zlib
from pathlib import Path
from typing import ClassVar

import olefile
import pytest
import requests
from conftest import BIN, Service, _soffice_save, free_port_block, soffice_pids, wait_for

from docshift.engine import sandbox
from docshift.engine.office import Office
from docshift.formats import FORMATS

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
    assert 1 <= len(pids) <= 2  # the worker's LibreOffice, and its spare once that is up
    for pid in pids:
        a_libreoffice_without_secrets(service, pid)


def a_libreoffice_without_secrets(service, pid):
    with open(f"/proc/{pid}/status") as f:
        ids = {line.split(":")[0]: line.split()[1:] for line in f if line.startswith(("Uid", "Gid"))}
    assert ids["Uid"] == ids["Gid"] == [str(sandbox.UID)] * 4
    environ = Path(f"/proc/{pid}/environ").read_bytes().decode()
    names = {entry.split("=", 1)[0] for entry in environ.split("\0") if entry}
    assert names <= {"HOME", "TMPDIR", "PATH", "LANG", "PWD", "OLDPWD", "URE_BOOTSTRAP", "SAL_ENABLE_FILE_LOCKING"}
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
                  "writable": [p for p in ("/", "/usr", "/etc", "/job", "/out", "/profile", "/tmp")
                               if os.access(p, os.W_OK)]}))
"""


def test_the_sandbox_sees_no_data_dir_and_no_network(tmp_path):
    """The argv Office uses, with a probe in place of the bridge."""
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
    assert report["writable"] == ["/out", "/profile", "/tmp"]  # its job dir is read-only, the rest in memory


# what a hostile program may use inside ----------------------------------------------------

def run_inside(tmp_path, script, limits=None):
    """``script`` run by python in the sandbox Office uses, with ``limits`` (the defaults if None)."""
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
    assert report["error"] == "BlockingIOError" and report["forked"] < sandbox.MAX_PROCESSES, report


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
        assert json.loads(done.stdout)["forked"] >= sandbox.MAX_PROCESSES - 10, done.stdout
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
    temp files) and ``/out`` (its results) hold the scratch limit: none can fill the host's memory or disk."""
    places = ("/tmp", "/dev/shm", "/dev", "/profile", "/out", "/job")
    done = run_inside(tmp_path, fill(places, 48), sandbox.Limits(scratch_mb=32))
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["/dev"] == found["/job"] == [0, "EROFS"]
    for where, size in (("/tmp", sandbox.SMALL_TMPFS_MB), ("/dev/shm", sandbox.SMALL_TMPFS_MB), ("/profile", 32),
                        ("/out", 32)):
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
    """Its job dir on the host is its own uid's, yet read-only inside; what it writes goes to ``/out``, in memory
    and no larger than the scratch limit: 40 MiB tried, 8 MiB written, none of it on the host's disk."""
    done = as_a_service_user(IN_A_SANDBOX, service_dir, fill(("/job", "/out"), 40), 8)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["/job"] == [0, "EROFS"], found
    assert found["/out"][1] == "ENOSPC" and 6 <= found["/out"][0] <= 8, found
    assert disk_use(service_dir) < 1 << 20, sorted(service_dir.rglob("*"))


NOT_ROOT_OFFICE = r"""
import json, sys
from pathlib import Path
from docshift.engine import sandbox
from docshift.engine.office import Office
from docshift.formats import FORMATS
base, source = Path(sys.argv[1]), Path(sys.argv[2])
assert not sandbox.as_root()
office = Office(base / "office", name="not-root")
try:
    office.export(source, base / "result.docx", FORMATS["doc"].export_filter, 60)
    seen = sorted(p.name for p in office.job_dir.iterdir())
finally:
    office.close()
print(json.dumps({"result": (base / "result.docx").stat().st_size, "job dir after": seen}))
"""


def test_a_worker_that_is_not_root_converts_through_the_sandboxs_out(service_dir, legacy):
    """The worker reaches ``/out`` of a sandbox whose user is its own uid (``sandbox.open_out``), as in the
    container image."""
    source = service_dir / "letter.doc"
    shutil.copy(legacy["doc"], source)
    if os.geteuid() == 0:
        os.chown(source, sandbox.UID, sandbox.GID)
    done = as_a_service_user(NOT_ROOT_OFFICE, service_dir, source)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["result"] > 0 and found["job dir after"] == [], found


SPIN = r"""
import resource
while resource.getrusage(resource.RUSAGE_SELF).ru_utime < 4:
    pass
print("spun 4 s of CPU")
"""


def test_cpu_time_is_limited(tmp_path):
    done = run_inside(tmp_path, SPIN, sandbox.Limits(cpu_seconds=1))
    assert "spun" not in done.stdout and done.returncode != 0, (done.returncode, done.stdout)


# linked content -----------------------------------------------------------------------

RTF = '{{\\rtf1\\ansi\\deff0{{\\fonttbl{{\\f0 Arial;}}}}\\f0 Before.\\par\n{{\\field{{\\*\\fldinst {field}}}' \
      '{{\\fldrslt stale}}}}\\par\nAfter.\\par}}'
NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
      'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
      'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
      'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:xlink="http://www.w3.org/1999/xlink" '
      'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
      'xmlns:of="urn:oasis:names:tc:opendocument:xmlns:of:1.2" office:version="1.2"')
FODT = ('<?xml version="1.0" encoding="UTF-8"?><office:document ' + NS + ' office:mimetype="application/'
        'vnd.oasis.opendocument.text"><office:body><office:text><text:p>Before.</text:p>{body}'
        '<text:p>After.</text:p></office:text></office:body></office:document>')
FODS = ('<?xml version="1.0" encoding="UTF-8"?><office:document ' + NS + ' office:mimetype="application/'
        'vnd.oasis.opendocument.spreadsheet"><office:body><office:spreadsheet><table:table table:name="Sheet1">'
        '{shapes}<table:table-row><table:table-cell office:value-type="string"><text:p>x</text:p>'
        '</table:table-cell>{cells}</table:table-row></table:table></office:spreadsheet></office:body>'
        '</office:document>')


def image(href, name):
    return (f'<draw:frame draw:name="{name}" svg:width="2cm" svg:height="2cm" text:anchor-type="as-char" svg:x="1cm" '
            f'svg:y="1cm"><draw:image xlink:href="{href}" xlink:type="simple" xlink:show="embed" '
            'xlink:actuate="onLoad"/></draw:frame>')


def formula(text):
    return f'<table:table-cell table:formula="of:={text}"/>'


# name: (suffix of the source LibreOffice makes the legacy file from, legacy kind, source text)
LINKED = {
    "includepicture_http": (".rtf", "doc", RTF.format(field='INCLUDEPICTURE "{http}/picture.png"')),
    "includepicture_http_d": (".rtf", "doc", RTF.format(field='INCLUDEPICTURE "{http}/picture-d.png" \\\\d')),
    "includepicture_file": (".rtf", "doc", RTF.format(field='INCLUDEPICTURE "{secret_png}"')),
    "includetext_http": (".rtf", "doc", RTF.format(field='INCLUDETEXT "{http}/text.txt"')),
    "includetext_secret": (".rtf", "doc", RTF.format(field='INCLUDETEXT "{secret_txt}"')),
    "includetext_passwd": (".rtf", "doc", RTF.format(field='INCLUDETEXT "file:///etc/passwd"')),
    "dde_field": (".rtf", "doc", RTF.format(field='DDEAUTO soffice "{secret_txt_path}" "A1"')),
    "html_img": (".html", "doc", '<html><head><link rel="stylesheet" href="{http}/style.css"></head><body><p>Hello'
                                 '</p><img src="{http}/img.png"><img src="{secret_png}"></body></html>'),
    "linked_images": (".fodt", "doc", FODT.format(body="<text:p>" + image("{http}/w.png", "I1")
                                                  + image("{secret_png}", "I2") + "</text:p>")),
    "linked_ole_object": (".fodt", "doc", FODT.format(
        body='<text:p><draw:frame draw:name="O1" text:anchor-type="as-char" svg:width="5cm" svg:height="2cm">'
             '<draw:object xlink:href="{secret_txt}" xlink:type="simple" xlink:show="embed" xlink:actuate="onLoad"/>'
             '</draw:frame></text:p>')),
    "linked_sections": (".fodt", "doc", FODT.format(
        body='<text:section text:name="S1"><text:section-source xlink:href="file:///etc/passwd" '
             'xlink:type="simple"/></text:section><text:section text:name="S2"><text:section-source '
             'xlink:href="{http}/section.html" xlink:type="simple"/></text:section>')),
    "webservice": (".fods", "xls", FODS.format(shapes="", cells=formula('WEBSERVICE(&quot;{http}/ws.txt&quot;)'))),
    "external_references": (".fods", "xls", FODS.format(shapes="", cells=formula(
        "['file:///etc/passwd'#$Sheet1.A1]") + formula("['{secret_txt}'#$Sheet1.A1]")
        + formula("['{http}/book.ods'#$Sheet1.A1]"))),
    "dde_formula": (".fods", "xls", FODS.format(shapes="", cells=formula(
        'DDE(&quot;soffice&quot;;&quot;{secret_txt_path}&quot;;&quot;A1&quot;)'))),
    "sheet_images": (".fods", "xls", FODS.format(shapes="<table:shapes>" + image("{http}/c.png", "I1")
                                                 + image("{secret_png}", "I2") + "</table:shapes>", cells="")),
}
CANARY = "canary-" + secrets.token_hex(8)


def png(text):
    """A 1x1 PNG carrying ``text`` in a tEXt chunk, so a copied picture shows in the result's bytes."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
            + chunk(b"tEXt", b"Comment\0" + text.encode()) + chunk(b"IDAT", zlib.compress(b"\0\0"))
            + chunk(b"IEND", b""))


class Listener(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list] = []

    def do_GET(self):
        Listener.hits.append(self.path)
        body = png(f"http-{CANARY}") if self.path.endswith(".png") else f"http-{CANARY}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def linked(tmp_path_factory):
    """``(files, listener)``: each linked document as a real .doc/.xls, and a loopback HTTP
    listener on the port they link to; the secrets they link are planted after the files are made,
    so the making could not copy them in."""
    out = tmp_path_factory.mktemp("linked")
    port = free_port_block()
    secret_dir = out / "secret"
    values = {"http": f"http://127.0.0.1:{port}", "secret_png": (secret_dir / "host.png").as_uri(),
              "secret_txt": (secret_dir / "secret.txt").as_uri(), "secret_txt_path": str(secret_dir / "secret.txt")}
    files = {}
    for name, (suffix, kind, text) in LINKED.items():
        source = out / f"{name}{suffix}"
        for key, value in values.items():  # the RTF's own braces rule out str.format
            text = text.replace(f"{{{key}}}", value)
        source.write_text(text)
        fmt = "doc:MS Word 97" if kind == "doc" else "xls:MS Excel 97"
        files[name] = (_soffice_save(source, fmt, out), kind)
    secret_dir.mkdir()
    (secret_dir / "host.png").write_bytes(png(f"file-{CANARY}"))
    (secret_dir / "secret.txt").write_text(f"file-{CANARY}\n")
    for path, _ in files.values():
        assert CANARY.encode() not in path.read_bytes()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Listener)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield files, Listener.hits
    server.shutdown()
    server.server_close()


PASSWD = Path("/etc/passwd").read_text().splitlines()[0]


def leaks(result):
    """What of the host or of the listener the result holds."""
    with zipfile.ZipFile(result) as z:
        blob = b"".join(z.read(name) for name in z.namelist())
    return [what for what in (CANARY, PASSWD) if what.encode() in blob]


def convert_all(office, files, tmp_path):
    found = {}
    for name, (path, kind) in files.items():
        result = tmp_path / f"{name}.{FORMATS[kind].target}"
        try:
            office.export(path, result, FORMATS[kind].export_filter, 60)
        except Exception as error:  # a failed conversion leaks nothing; say so
            found[name] = f"failed: {type(error).__name__}"
            continue
        found[name] = leaks(result)
    return found


def test_linked_content_stays_out(linked, tmp_path):
    files, hits = linked
    office = Office(tmp_path / "office", name="linked")
    try:
        del hits[:]
        found = convert_all(office, files, tmp_path)
    finally:
        office.close()
    time.sleep(0.5)
    assert hits == []
    assert {name: what for name, what in found.items() if what and not str(what).startswith("failed")} == {}
    assert sum(what == [] for what in found.values()) >= len(LINKED) - 2, found


def test_a_bare_libreoffice_does_fetch_them(linked, tmp_path):
    """The control: the linked pictures are fetched by a plain ``soffice --convert-to``."""
    files, hits = linked
    del hits[:]
    for name in ("html_img", "linked_images", "sheet_images"):
        path, kind = files[name]
        subprocess.run(["soffice", "--headless", "--norestore", f"-env:UserInstallation={(tmp_path / name).as_uri()}",
                        "--convert-to", FORMATS[kind].target, "--outdir", str(tmp_path / "out"), str(path)],
                       capture_output=True, timeout=120)
    assert hits


# the worker's start ----------------------------------------------------------------------

@pytest.fixture
def unusable_bwrap():
    """``path(how)``: a PATH on which bubblewrap fails for real: a ``bwrap`` that exits 1, or none
    at all. Not under /tmp, which a root worker's sandbox stage covers before it runs bwrap."""
    fake = Path(tempfile.mkdtemp(prefix="docshift-fake-bwrap-", dir="/var/tmp"))
    fake.chmod(0o755)  # a root worker runs bwrap as nobody
    yield lambda how: str(BIN) if how == "missing" else fake_bwrap(fake)
    shutil.rmtree(fake)


def fake_bwrap(fake):
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    return f"{fake}:{os.environ['PATH']}"


@pytest.mark.parametrize("how", ["failing", "missing"])
def test_the_worker_refuses_to_start_without_a_sandbox(s3, tmp_path, unusable_bwrap, how):
    service = Service(tmp_path / "data", s3["env"])
    service.env["PATH"] = unusable_bwrap(how)
    service.start_worker()
    try:
        assert service.processes["worker"].wait(60) == 78
        log = (service.data_dir / "worker.log").read_text()
        assert "the LibreOffice sandbox cannot be made here" in log and "DOCSHIFT_SANDBOX=off" in log
        # in a container, the runtime options it lacks
        assert "seccomp=deploy/container/seccomp.json" in log and "systempaths=unconfined" in log
        assert ("No permissions to create new namespace" if how == "failing" else "bwrap") in log
    finally:
        service.stop()


def test_sandbox_off_runs_and_shows_in_healthz(s3, tmp_path, unusable_bwrap, legacy):
    service = Service(tmp_path / "data", s3["env"], SANDBOX="off")
    service.env["PATH"] = unusable_bwrap("failing")  # not even asked
    try:
        service.start(workers=1)
        checks = requests.get(f"{service.base_url}/healthz", timeout=10).json()["checks"]
        assert checks["sandbox"] == "off" and checks["engine"] == "ok"
        key = service.register("sandbox-off")
        task = service.wait(key, service.submit(key, legacy["doc"]).json()["task_id"])
        assert task["status"] == "SUCCEEDED"
        log = (service.data_dir / "worker.log").read_text()
        assert "DOCSHIFT_SANDBOX=off: LibreOffice runs without its sandbox" in log
        assert "WITHOUT a sandbox" in log
    finally:
        service.stop()


def test_an_engine_that_keeps_failing_makes_healthz_say_so(s3, tmp_path):
    # an address space too small for LibreOffice: every start fails, for real
    service = Service(tmp_path / "data", s3["env"], OFFICE_MEMORY_LIMIT_MB=250)
    try:
        service.start_web()
        service.start_worker(workers=1)

        def broken():
            response = requests.get(f"{service.base_url}/healthz", timeout=5)
            return response.status_code == 503 and response.json()["checks"]["engine"].startswith("failing: ")
        wait_for(broken, 120, "the broken engine report")
        assert "failed 3 starts in a row" in (service.data_dir / "worker.log").read_text()
    finally:
        service.stop()


# nothing left behind ----------------------------------------------------------------------

def garbled_doc(legacy, tmp_path):
    """A .doc whose WordDocument stream is noise: it passes the pre-check and fails in LibreOffice."""
    path = tmp_path / "garbled.doc"
    shutil.copy(legacy["doc"], path)
    with olefile.OleFileIO(str(path), write_mode=True) as ole:
        size = ole.get_size("WordDocument")
        ole.write_stream("WordDocument", os.urandom(size))
    return path


def own_dirs(data_dir):
    return {kind: sorted(p.name for p in (data_dir / kind).iterdir()) for kind in ("work", "office")}


def test_nothing_is_left_behind(s3, legacy, slow_xls, tmp_path):
    """20 conversions (some failing) leave nothing of LibreOffice's in /tmp (its UNO pipe
    sockets and lu*.tmp dirs); a SIGKILLed worker's job and profile dirs are gone after a
    restart. The data dir lives outside /tmp, so that only LibreOffice's own names count."""
    outside = Path(tempfile.mkdtemp(prefix="docshift-sandbox-test-", dir="/var/tmp"))
    before = libreoffice_leftovers()
    service = Service(outside / "data", s3["env"])
    try:
        service.start_web()
        service.start_worker(workers=1)
        service.wait_healthy()
        key = service.register("nothing-left")
        files = [legacy["doc"], legacy["xls"], legacy["ppt"]] * 5 + [garbled_doc(legacy, tmp_path)] * 3
        files += [(legacy["xls"], "not-a-doc.doc")] * 2
        task_ids = []
        for item in files:
            path, name = item if isinstance(item, tuple) else (item, None)
            task_ids.append(service.submit(key, path, name=name).json()["task_id"])
        statuses = [service.wait(key, task_id)["status"] for task_id in task_ids]
        assert statuses.count("SUCCEEDED") == 15 and statuses.count("FAILED") == 5, statuses
        assert libreoffice_leftovers() - before == set()

        old = service.processes["worker"]
        slow = service.submit(key, slow_xls).json()["task_id"]
        wait_for(lambda: service.wait_status(key, slow) == "PROCESSING", 60, "the slow task")
        time.sleep(0.5)
        left = own_dirs(service.data_dir)
        assert any(f".{old.pid}." in name for name in left["work"])  # the kill has something to leave
        os.kill(old.pid, signal.SIGKILL)
        old.wait()
        wait_for(lambda: not soffice_pids(old.pid), 30, "the killed worker's LibreOffice to go")
        service.start_worker(workers=1)
        assert service.wait(key, slow, timeout=180)["status"] == "SUCCEEDED"
        new = service.processes["worker"].pid
        now = own_dirs(service.data_dir)
        assert all(f".{new}." in name for kind in now.values() for name in kind), now
        # each LibreOffice's job dir (work/<worker's own>/<n>) holds nothing of an earlier conversion
        job_dirs = list((service.data_dir / "work").glob("*/*"))
        assert job_dirs and [p.name for d in job_dirs for p in d.iterdir() if p.name != "selftest"] == []
        assert libreoffice_leftovers() - before == set()
    finally:
        service.stop()
        shutil.rmtree(outside, ignore_errors=True)
    assert soffice_pids(new) == []


def libreoffice_leftovers():
    """What LibreOffice leaves in the host's /tmp when it runs there: its UNO pipe sockets
    (OSL_PIPE_<uid>_<name>) and its lu*.tmp dirs."""
    return {name for name in os.listdir("/tmp")
            if name.startswith("OSL_PIPE_") or (name.startswith("lu") and name.endswith(".tmp"))}


def test_a_sandboxed_office_cleans_up_after_itself(tmp_path, legacy):
    office = Office(tmp_path / "office", name="tidy")
    office.export(legacy["doc"], tmp_path / "out.docx", FORMATS["doc"].export_filter, 60)
    assert (tmp_path / "out.docx").stat().st_size > 0
    assert list(office.job_dir.iterdir()) == []  # the staged copy went
    office.close()
    assert own_dirs(tmp_path / "office") == {"work": [], "office": []}
