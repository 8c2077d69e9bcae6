"""Real parts for the suite: a SeaweedFS S3 server, LibreOffice-made legacy files,
and a live service (gunicorn + huey_consumer) on loopback."""

import atexit
import io
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
# From the first import on, nothing of the suite writes into the checkout: every process and
# in-process app defaults to a data dir of the session's own (tests give each app its own too).
SESSION_DATA = Path(tempfile.mkdtemp(prefix="docshift-tests-"))
os.environ["DOCSHIFT_DATA_DIR"] = str(SESSION_DATA / "default")
# Every process the suite starts keeps its temp files there too (a plain soffice's lu*.tmp dirs, gunicorn's and
# huey's), and the session's dir goes when its process ends: a machine that runs the suite all day keeps nothing.
# (tempfile has cached /tmp for this process by now: pytest's own tmp_path dirs stay where they were.)
(SESSION_DATA / "tmp").mkdir()
os.environ["TMPDIR"] = str(SESSION_DATA / "tmp")
atexit.register(shutil.rmtree, SESSION_DATA, ignore_errors=True)
os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)

# The fixtures that start LibreOffice, SeaweedFS or Redis (these below, and the test modules' own
# that do): a test that uses one, even through another fixture, is ``slow``, and ``make test-fast``
# leaves it out. A test that starts one itself says ``@pytest.mark.slow``.
REAL_PARTS = {"s3", "own_store", "office", "fresh_office", "live", "legacy", "slow_xls", "linked_doc",
              "relative_link_xls", "variants", "redis_url", "embedded", "workbook", "converted", "linked", "tls_redis"}


def pytest_collection_modifyitems(items):
    for item in items:
        if REAL_PARTS & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def _ports_free(ports):
    for port in ports:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def _ephemeral_floor():
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port_block(offsets=(0,)):
    """A base port whose ``base + offset`` ports are all free, all below the kernel's ephemeral
    range: a port in it can be taken by any outgoing connection between this check and the
    server's bind, or by a client that polls it before the server is up (a TCP self-connect)."""
    top = _ephemeral_floor() - max(offsets)
    for _ in range(200):
        base = random.randrange(10000, top)
        if _ports_free([base + o for o in offsets]):
            return base
    raise RuntimeError("no free ports")


def wait_for(check, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{what} did not come up in {timeout} s")


def read_until_closed(conn):
    """Everything a socket receives until the other side closes (or resets) it."""
    reply = b""
    try:
        while chunk := conn.recv(65536):
            reply += chunk
    except ConnectionResetError:
        pass
    return reply


def stop_process_group(process, grace=30):
    """SIGTERM the process group, SIGKILL it if it is still there after ``grace`` seconds."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait()


def office_pids(worker_pid):
    """The LibreOffice processes below a worker process: its forkit parent (``engine/uno/forkit.py``, in the
    sandbox or not) and the children it forked, the parent first."""
    parents, commands = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    commands[int(entry)] = f.read()
            except (OSError, IndexError, ValueError):
                continue

    def below(pid):
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == worker_pid:
                return True
        return False

    def forkit(command):  # python running forkit.py: not bubblewrap, whose arguments name it too
        return command.startswith(b"/usr/bin/python3\0") and b"forkit.py\0" in command

    found = [pid for pid, command in commands.items() if forkit(command) and below(pid)]
    # the parent is the one whose own parent is not a forkit
    return sorted(found, key=lambda pid: (forkit(commands.get(parents.get(pid, 0), b"")), pid))


soffice_pids = office_pids  # what the older tests call them


def at_work(pids):
    """Those of the forkit's children ``pids`` that are converting a file, not waiting for one (their name says)."""
    found = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm") as comm:
                if comm.read().startswith("forkit-file"):  # and its job's tag
                    found.append(pid)
        except OSError:
            continue
    return found


def ended_children_dirs(parent):
    """The temp dirs (``child-<pid in the sandbox>``) in the sandbox's ``/profile/tmp``, seen from the host (as
    root) through the forkit ``parent`` (host pid), of children that have ended: those of the children waiting
    for a file are theirs."""
    live = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    state, ppid = stat.read().rsplit(")", 1)[1].split()[:2]
                if int(ppid) == parent and state != "Z":  # a zombie has ended: its dir is to go
                    live.add(f"child-{sandbox_pid(int(entry))}")
            except (OSError, IndexError, ValueError):
                continue
    return sorted(name for name in os.listdir(f"/proc/{parent}/root/profile/tmp")
                  if name.startswith("child-") and name not in live)


def sandbox_pid(pid):
    """The pid the host's process ``pid`` has in its innermost PID namespace (a sandbox's), or None once gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            return int(next(line for line in status if line.startswith("NSpid:")).split()[-1])
    except (OSError, StopIteration, ValueError):
        return None


def dies(pid, within=10):
    """True once ``pid`` is gone; a killed big process takes a moment to be torn down."""
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a killed child stays a zombie until reaped; it is dead all the same, and it may be reaped while we look
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def autogroup(pid):
    """(group, nice) from /proc/<pid>/autogroup, or None: the file is missing without autogroup
    scheduling, and empty for a process left in the kernel's default group (CI's runner is)."""
    try:
        with open(f"/proc/{pid}/autogroup") as group:
            fields = group.read().split()  # "/autogroup-5133 nice 10"
    except FileNotFoundError:
        return None
    return (fields[0], int(fields[-1])) if fields else None


def start_embedded_store(data_dir, port=None, bind=None):
    """``python -m docshift.storage.seaweed`` (the Procfile's ``objects``) on ``port`` (free
    ports if None) of ``bind`` (its default if None), with credentials of its own data dir; returns
    its configuration and process."""
    from docshift import settings

    port = port or free_port_block((0, 1, 2, 3, 4, 10000, 10001, 10002, 10003, 10004))
    # not the session store's endpoint and credentials, which the environment may carry
    config = settings.load({"DATA_DIR": str(data_dir), "S3_PORT": port, "S3_ENDPOINT": None,
                            "S3_ACCESS_KEY": None, "S3_SECRET_KEY": None})
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCSHIFT_S3_")}
    env.update(DOCSHIFT_DATA_DIR=str(data_dir), DOCSHIFT_S3_PORT=str(port))
    if bind:
        env["DOCSHIFT_S3_BIND"] = bind
    with open(Path(data_dir) / "weed.log", "ab") as log:
        process = subprocess.Popen([str(BIN / "python"), "-m", "docshift.storage.seaweed"], cwd=ROOT,
                                   env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return config, process


def wait_for_store(config, process, data_dir, timeout=60):
    """Wait until the store started by ``start_embedded_store`` answers S3 (403 without
    credentials). If it ends first or never answers, stop what is left of it and fail with the
    end of its log, so that no process outlives the test and the failure says why."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://{config.s3_endpoint}/", timeout=1).status_code == 403:
                return
        except requests.RequestException:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.2)
    stop_process_group(process)
    log = (Path(data_dir) / "weed.log").read_text(errors="replace")[-4000:]
    raise TimeoutError(f"SeaweedFS on port {config.s3_port} did not come up (exit {process.returncode}); "
                       f"the end of its log:\n{log}")


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    """A real SeaweedFS S3 endpoint with credentials; env for every docshift process of the session."""
    data_dir = tmp_path_factory.mktemp("s3")
    config, process = start_embedded_store(data_dir)
    env = {"DOCSHIFT_S3_ENDPOINT": config.s3_endpoint, "DOCSHIFT_S3_ACCESS_KEY": config.s3_access_key,
           "DOCSHIFT_S3_SECRET_KEY": config.s3_secret_key}
    wait_for_store(config, process, data_dir)
    os.environ.update(env)
    yield {"endpoint": config.s3_endpoint, "env": env, "process": process, "data_dir": data_dir}
    stop_process_group(process)


@pytest.fixture
def own_store(tmp_path):
    """A SeaweedFS of this test's own, to stop and start again on the same port."""

    class Store:
        config, process = None, None

        @property
        def env(self):
            return {"DOCSHIFT_S3_ENDPOINT": self.config.s3_endpoint,
                    "DOCSHIFT_S3_ACCESS_KEY": self.config.s3_access_key,
                    "DOCSHIFT_S3_SECRET_KEY": self.config.s3_secret_key}

        def start(self):
            port = self.config.s3_port if self.config else None
            self.config, self.process = start_embedded_store(tmp_path / "store", port)
            wait_for_store(self.config, self.process, tmp_path / "store")

        def stop(self):
            stop_process_group(self.process)

    store = Store()
    store.start()
    yield store
    store.stop()


@pytest.fixture
def app(s3, tmp_path, request):
    """An app on its own database and bucket (no worker consumes its queue)."""
    from docshift.web import create_app

    bucket = f"t-{request.node.name[:30].lower().replace('_', '-').strip('-')}-{random.randrange(10**6)}"
    bucket = "".join(c if c.isalnum() or c == "-" else "-" for c in bucket)
    app = create_app({"TESTING": True, "DATA_DIR": str(tmp_path / "data"), "S3_BUCKET": bucket})
    with app.app_context():
        from docshift.web.context import get_store
        get_store().ensure_bucket()
    yield app
    with app.app_context():
        drop_bucket(get_store())


def drop_bucket(store):
    """Delete a test's bucket and what is in it: SeaweedFS gives each bucket volumes of its own,
    and their number is bounded by the disk (74 buckets with data on a disk with 80 GB free)."""
    try:
        for item in store.client.list_objects(store.bucket, recursive=True):
            store.client.remove_object(store.bucket, item.object_name)
        store.client.remove_bucket(store.bucket)
    except Exception:  # a test that stopped the store, or removed the bucket itself
        pass


def stored_inputs(store):
    """How many uploads the store holds: in the spool (one box) and in the bucket (a queue on Redis)."""
    spooled = [path for path in store.spool.directory.glob("*") if not path.name.startswith(".")] \
        if store.spool.directory.exists() else []
    return len(spooled) + sum(1 for entry in store.client.list_objects(store.bucket, prefix="inputs/")
                              if not entry.is_dir)


def input_stored(store, task_id):
    """Whether the task's upload is still in the store: the worker's own fetch of it finds it."""
    from docshift.errors import InputMissing

    with tempfile.TemporaryDirectory() as directory:
        try:
            store.fetch_input(task_id, Path(directory) / "input")
        except InputMissing:
            return False
    return True


@pytest.fixture
def client(app):
    return app.test_client()


def register(client, app, customer, plan="starter"):
    """Register ``customer`` through the in-process app's registration endpoint; returns the key."""
    from docshift.accounts import marketplace

    token = marketplace.LocalMarketplace(app.config["DOCSHIFT"]).issue_token(customer, plan)
    response = client.post("/marketplace/register", data={"x-amzn-marketplace-token": token},
                           headers={"Accept": "application/json"})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()["api_key"]


def overridden(app, settings):
    """The app's settings with ``settings`` (``{"CONVERSION_TIMEOUT": 0.5}``) in their place, for one call."""
    return replace(app.config["DOCSHIFT"], **{name.lower(): value for name, value in settings.items()})


def post_file(client, key, data, name, headers=None, query="", **fields):
    """POST /v1/conversions``query`` on the test client with ``data`` as the part ``file``."""
    from werkzeug.test import EnvironBuilder

    # werkzeug's test builder spools bodies over 500 KB to a temporary file that it never closes
    builder = EnvironBuilder(path=f"/v1/conversions{query}", method="POST",
                             headers={"Authorization": f"Bearer {key}", **(headers or {})},
                             data={"file": (io.BytesIO(data), name), **fields})
    environ = builder.get_environ()
    try:
        return client.open(environ)
    finally:
        environ["wsgi.input"].close()
        builder.close()


@pytest.fixture
def account(app, client):
    """An active starter account's API key on the in-process app."""
    return register(client, app, f"cust-{random.randrange(10**9)}")


class Service:
    """gunicorn + huey_consumer started for real, sharing the session's S3 server."""

    def __init__(self, data_dir, s3_env, **settings_env):
        self.data_dir = Path(data_dir)
        self.port = free_port_block()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **s3_env, "DOCSHIFT_DATA_DIR": str(self.data_dir),
                    "DOCSHIFT_PORT": str(self.port), "DOCSHIFT_S3_BUCKET": f"svc-{self.port}",
                    "PATH": f"{BIN}:{os.environ['PATH']}"}
        self.env.update({f"DOCSHIFT_{k}": str(v) for k, v in settings_env.items()})
        self.env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # its own, under its data dir
        self.processes = {}
        self.data_dir.mkdir(parents=True, exist_ok=True)

    def start(self, workers=2):
        """Web and worker, healthy; if they never get there, none of their processes outlives
        the call (the test that called it gets no service to stop)."""
        try:
            self.start_web()
            self.start_worker(workers)
            return self.wait_healthy()
        except BaseException:
            for process in self.processes.values():
                stop_process_group(process)
            self.processes.clear()
            raise

    def wait_healthy_web(self):
        """The web answers (healthy or not: no worker may run)."""
        wait_for(lambda: requests.get(f"{self.base_url}/healthz", timeout=2).status_code in (200, 503),
                 60, "docshift web")
        return self

    def wait_healthy(self):
        wait_for(lambda: requests.get(f"{self.base_url}/healthz", timeout=2).status_code == 200,
                 60, "docshift")
        return self

    def _spawn(self, name, argv, **env):
        with open(self.data_dir / f"{name}.log", "ab") as log:
            self.processes[name] = subprocess.Popen(argv, cwd=ROOT, env={**self.env, **env}, stdout=log,
                                                    stderr=subprocess.STDOUT, start_new_session=True)

    def start_web(self, **env):
        """The Procfile's settings, on this service's port; with ``PORT`` in ``env``, where
        gunicorn_conf binds on a PaaS (all interfaces)."""
        bind = [] if "PORT" in env else ["--bind", f"127.0.0.1:{self.port}"]
        self._spawn("web", [str(BIN / "gunicorn"), "-c", "python:docshift.gunicorn_conf", *bind,
                            "app:create_app()"], **env)

    def start_worker(self, workers=2, name="worker"):
        """``python worker.py`` with ``workers`` conversion threads."""
        self._spawn(name, [str(BIN / "python"), "worker.py"], DOCSHIFT_WORKERS=str(workers))

    def stop(self):
        for process in self.processes.values():
            stop_process_group(process)
        self.processes.clear()
        drop_bucket(self.store())

    def config(self):
        from docshift import settings

        return settings.load({"DATA_DIR": str(self.data_dir), "S3_BUCKET": f"svc-{self.port}",
                              "S3_ENDPOINT": self.env["DOCSHIFT_S3_ENDPOINT"],
                              "S3_ACCESS_KEY": self.env["DOCSHIFT_S3_ACCESS_KEY"],
                              "S3_SECRET_KEY": self.env["DOCSHIFT_S3_SECRET_KEY"]})

    def store(self):
        from docshift.storage import ObjectStore

        return ObjectStore(self.config())

    def register(self, customer, plan="starter"):
        from docshift.accounts import marketplace

        token = marketplace.LocalMarketplace(self.config()).issue_token(customer, plan)
        response = requests.post(f"{self.base_url}/marketplace/register", data={"x-amzn-marketplace-token": token},
                                 headers={"Accept": "application/json"}, timeout=10)
        response.raise_for_status()
        return response.json()["api_key"]

    def submit(self, key, path, name=None, **headers):
        with open(path, "rb") as f:
            return requests.post(f"{self.base_url}/v1/conversions",
                                 headers={"Authorization": f"Bearer {key}", **headers},
                                 files={"file": (name or Path(path).name, f)}, timeout=30)

    def wait_status(self, key, task_id):
        return requests.get(f"{self.base_url}/v1/conversions/{task_id}",
                            headers={"Authorization": f"Bearer {key}"}, timeout=10).json()["status"]

    def rows(self):
        """The conversions table's rows, by task id."""
        from docshift.storage import connection
        conn = connection.connect(self.config().database)
        try:
            return {row["id"]: row for row in conn.query("SELECT * FROM conversions")}
        finally:
            conn.conn.close()

    def wait(self, key, task_id, timeout=120):
        """Poll like a client until the task is final; returns the last body."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            body = requests.get(f"{self.base_url}/v1/conversions/{task_id}",
                                headers={"Authorization": f"Bearer {key}"}, timeout=10).json()
            if body["status"] not in ("QUEUED", "PROCESSING"):
                return body
            time.sleep(0.2)
        raise TimeoutError(f"task {task_id} still {body['status']}")


@pytest.fixture(scope="session")
def office(tmp_path_factory):
    """A real LibreOffice parent (a child of it per file) for the tests that run the worker's task code
    in-process."""
    from docshift.engine.forkit import Forkit

    office = Forkit(tmp_path_factory.mktemp("office"), name="test-office")
    office.start()
    yield office
    office.close()


@pytest.fixture
def fresh_office(tmp_path):
    """A LibreOffice parent of this test's own."""
    from docshift.engine.forkit import Forkit

    office = Forkit(tmp_path / "office", name="fresh")
    office.start()
    yield office
    office.close()


@pytest.fixture(scope="session")
def live(s3, tmp_path_factory):
    service = Service(tmp_path_factory.mktemp("live"), s3["env"]).start()
    yield service
    service.stop()


# legacy files, made by LibreOffice from documents generated here ------------------------

DOC_PARAGRAPHS = ["docshift keeps the words of a Word 97 file.", "Second paragraph: ünïcödé, 42 and 3.5."]
XLS_SHEETS = {"Alpha": {"A1": 42, "B2": "text cell", "C3": 3.5}, "Beta": {"A1": "second sheet", "B1": 7}}
PPT_TITLES = ["First slide", "Second slide", "Third slide"]


def flat_odf(kind, body):
    """A flat ODF document of ``kind`` ("text", "spreadsheet" or "presentation") whose office:body holds
    ``body`` (in its office:text, office:spreadsheet or office:presentation), with the namespaces the suite's
    documents use: office, text, table, draw and svg."""
    return ('<?xml version="1.0" encoding="UTF-8"?><office:document '
            'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
            'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
            'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
            'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
            'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" office:version="1.2" '
            f'office:mimetype="application/vnd.oasis.opendocument.{kind}"><office:body><office:{kind}>{body}'
            f'</office:{kind}></office:body></office:document>')


def sound_deck(outdir, name, frequency, plays="transition"):
    """(a .ppt saved by LibreOffice whose one slide plays the sound ``name``, that sound's bytes): a half-second WAV
    tone of ``frequency`` Hz made here, which the .ppt holds in its SoundCollection. ``plays``: at the slide's
    "transition", when its one shape is clicked ("click"), or with that shape's entrance "effect" (its timing)."""
    import math
    import struct
    import wave

    outdir.mkdir(parents=True, exist_ok=True)
    with wave.open(str(outdir / name), "wb") as tone:
        tone.setnchannels(1)
        tone.setsampwidth(2)
        tone.setframerate(8000)
        tone.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(2 * math.pi * frequency * n / 8000)))
                                  for n in range(4000)))
    link = f'xlink:href="{(outdir / name).as_uri()}"'
    sound = f'<presentation:sound {link} xlink:type="simple" xlink:show="new" xlink:actuate="onRequest"/>'
    transition = ('<office:automatic-styles><style:style style:family="drawing-page" style:name="dp1">'
                  '<style:drawing-page-properties presentation:transition-type="automatic" '
                  f'presentation:duration="PT2S">{sound}</style:drawing-page-properties></style:style>'
                  '</office:automatic-styles>')
    listeners = ('<office:event-listeners><presentation:event-listener script:event-name="dom:click" '
                 f'presentation:action="sound">{sound}</presentation:event-listener></office:event-listeners>')
    effect = ('<anim:par presentation:node-type="timing-root"><anim:seq presentation:node-type="main-sequence">'
              '<anim:par smil:begin="next"><anim:par smil:begin="0s"><anim:par smil:begin="0s" smil:fill="hold" '
              'presentation:node-type="on-click" presentation:preset-class="entrance" '
              'presentation:preset-id="ooo-entrance-appear"><anim:set smil:begin="0s" smil:dur="0.001s" '
              'smil:fill="hold" smil:targetElement="shape1" smil:attributeName="visibility" smil:to="visible"/>'
              f'<anim:audio {link} smil:begin="0s"/></anim:par></anim:par></anim:par></anim:seq></anim:par>')
    (outdir / "deck.fodp").write_text(
        '<?xml version="1.0" encoding="UTF-8"?><office:document '
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
        'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
        'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
        'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
        'xmlns:script="urn:oasis:names:tc:opendocument:xmlns:script:1.0" xmlns:dom="http://www.w3.org/2001/xml-events" '
        'xmlns:smil="urn:oasis:names:tc:opendocument:xmlns:smil-compatible:1.0" '
        'xmlns:anim="urn:oasis:names:tc:opendocument:xmlns:animation:1.0" '
        'xmlns:xlink="http://www.w3.org/1999/xlink" office:version="1.2" '
        'office:mimetype="application/vnd.oasis.opendocument.presentation">'
        f'{transition if plays == "transition" else ""}'
        '<office:body><office:presentation><draw:page draw:name="s1" draw:style-name="dp1"><draw:frame '
        'draw:id="shape1" xml:id="shape1" svg:x="2cm" svg:y="2cm" svg:width="10cm" svg:height="2cm">'
        f'<draw:text-box><text:p>{name} plays</text:p></draw:text-box>{listeners if plays == "click" else ""}'
        f'</draw:frame>{effect if plays == "effect" else ""}</draw:page></office:presentation></office:body>'
        '</office:document>')
    return _soffice_save(outdir / "deck.fodp", "ppt:MS PowerPoint 97", outdir), (outdir / name).read_bytes()


# the profile every soffice that makes a test file uses, one after the other: made by the first, it spares each
# later start the 1.2 s of making one
SOFFICE_PROFILE = (SESSION_DATA / "soffice-profile").as_uri()


def _soffice_save(source, fmt, outdir, infilter=None):
    profile = SOFFICE_PROFILE
    read_as = [f"--infilter={infilter}"] if infilter else []
    subprocess.run(["soffice", "--headless", "--norestore", f"-env:UserInstallation={profile}", *read_as,
                    "--convert-to", fmt, "--outdir", str(outdir), str(source)],
                   check=True, capture_output=True, timeout=120)
    result = outdir / f"{source.stem}.{fmt.split(':')[0]}"
    assert result.exists(), f"LibreOffice did not write {result}"
    return result


@pytest.fixture(scope="session")
def legacy(tmp_path_factory):
    """``{"doc": path, "xls": path, "ppt": path}``: legacy files saved by LibreOffice."""
    import docx
    import openpyxl
    import pptx

    out = tmp_path_factory.mktemp("legacy")
    document = docx.Document()
    for text in DOC_PARAGRAPHS:
        document.add_paragraph(text)
    document.save(out / "letter.docx")
    book = openpyxl.Workbook()
    book.remove(book.active)
    for title, cells in XLS_SHEETS.items():
        sheet = book.create_sheet(title)
        for ref, value in cells.items():
            sheet[ref] = value
    book.save(out / "numbers.xlsx")
    deck = pptx.Presentation()
    for title in PPT_TITLES:
        deck.slides.add_slide(deck.slide_layouts[1]).shapes.title.text = title
    deck.save(out / "deck.pptx")
    return {
        "doc": _soffice_save(out / "letter.docx", "doc:MS Word 97", out),
        "xls": _soffice_save(out / "numbers.xlsx", "xls:MS Excel 97", out),
        "ppt": _soffice_save(out / "deck.pptx", "ppt:MS PowerPoint 97", out),
    }


@pytest.fixture(scope="session")
def slow_xls(tmp_path_factory):
    """An .xls under the 4 MiB limit that keeps LibreOffice busy for about a second."""
    import openpyxl

    out = tmp_path_factory.mktemp("slow")
    book = openpyxl.Workbook(write_only=True)
    for n in range(4):
        sheet = book.create_sheet(f"Data{n}")
        for row in range(9000):
            sheet.append([row, row * 1.5, f"text {row}", f"=A{row + 1}*2", row % 7])
    book.save(out / "big.xlsx")
    return _soffice_save(out / "big.xlsx", "xls:MS Excel 97", out)


@pytest.fixture(scope="session")
def charts_xls(tmp_path_factory):
    """An .xls of 24 line charts over 2,000 rows: LibreOffice takes several seconds on it (a plain one 5-6 s)."""
    sys.path.append(str(ROOT / "bench"))  # the benchmarks' maker of such workbooks
    from harness import charts_workbook

    out = tmp_path_factory.mktemp("charts")
    return _soffice_save(charts_workbook(out, 24), "xls:MS Excel 97", out)


@pytest.fixture(scope="session")
def linked_doc(tmp_path_factory):
    """A .doc whose picture is only linked, from a loopback URL: ``(path, port)``."""
    out = tmp_path_factory.mktemp("linked")
    port = free_port_block()
    (out / "linked.html").write_text(
        "<html><body><p>A linked picture follows.</p>"
        f'<img src="http://127.0.0.1:{port}/pixel.png" width="10" height="10"></body></html>')
    return _soffice_save(out / "linked.html", "doc:MS Word 97", out), port


def _fods(path, cell):
    """A one-cell flat ODF spreadsheet at ``path``: ``cell`` is the table:table-cell's attributes and content."""
    path.write_text(
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
        ' xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"'
        ' xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
        ' xmlns:of="urn:oasis:names:tc:opendocument:xmlns:of:1.2" office:version="1.2"'
        ' office:mimetype="application/vnd.oasis.opendocument.spreadsheet"><office:body><office:spreadsheet>'
        f'<table:table table:name="Sheet1"><table:table-row><table:table-cell {cell}</table:table-cell>'
        '</table:table-row></table:table></office:spreadsheet></office:body></office:document>')
    return path


@pytest.fixture(scope="session")
def relative_link_xls(tmp_path_factory):
    """An .xls whose formula reads a cell of ``figures.xls``, a workbook beside it: Excel keeps such a
    reference relative to the file."""
    out = tmp_path_factory.mktemp("relative-link")
    value = 'office:value-type="float" office:value="42"><text:p>42</text:p>'
    _soffice_save(_fods(out / "figures.fods", value), "xls:MS Excel 97", out)
    target = (out / "figures.xls").as_uri()
    return _soffice_save(_fods(out / "book.fods", f"table:formula=\"of:=['{target}'#$Sheet1.A1]\" {value}"),
                         "xls:MS Excel 97", out)


@pytest.fixture(scope="session")
def variants(tmp_path_factory):
    """A directory of every kind of file a .doc, .xls or .ppt may really be (tests/make_variants.py,
    run under LibreOffice's Python), made once a session in about 10 s."""
    from docshift.engine.forkit import UNO_PYTHON

    out = tmp_path_factory.mktemp("variants")
    failures = []
    for _ in range(2):  # a second run if the first failed: the files are the suite's tools, not what it tests
        profile = tmp_path_factory.mktemp("variants-profile")  # LibreOffice's, removed with pytest's directories
        made = subprocess.run([UNO_PYTHON, str(ROOT / "tests" / "make_variants.py"), str(out), str(profile)],
                              capture_output=True, text=True, errors="replace", timeout=300)
        if made.returncode == 0:
            break
        failures.append(f"make_variants.py ended with {made.returncode}; its output ends:\n"
                        f"{made.stdout[-2000:]}\n{made.stderr[-4000:]}")
        # said in the session's warnings even when the second run makes the files: a flake is seen, not hidden
        warnings.warn(failures[-1], RuntimeWarning, stacklevel=1)
    else:
        pytest.fail("\n\n".join(failures))
    chart_sheet(out / "chart_sheet.xls")
    encrypted_ooxml(out / "encrypted_ooxml.xls")
    return out


def chart_sheet(path):
    """An Excel workbook whose middle sheet is a chart sheet (openpyxl writes OOXML), named .xls."""
    import openpyxl
    from openpyxl.chart import BarChart, Reference

    book = openpyxl.Workbook()
    data = book.active
    data.title = "Data"
    for row in range(1, 6):
        data.append([f"r{row}", row])
    chart = BarChart()
    chart.add_data(Reference(data, min_col=2, min_row=1, max_row=5))
    book.create_chartsheet("Chart").add_chart(chart)
    book.create_sheet("After")
    book.save(path)


def encrypted_ooxml(path, password="secret", spin_count=100_000):
    """An Excel workbook in an encrypted OOXML package (ECMA-376 agile, its key derived from the
    password in ``spin_count`` rounds: Office's own count by default), named as ``path``."""
    import openpyxl
    from msoffcrypto.method.ecma376_agile import ECMA376Agile

    plain = path.with_suffix(".plain.xlsx")
    openpyxl.Workbook().save(plain)
    with open(plain, "rb") as source:
        path.write_bytes(ECMA376Agile.encrypt(password, source, spin_count=spin_count))
    return path


# conversion nodes on Redis ------------------------------------------------------------

# nodes' beats and the sweep, fast enough for a test to see a node come and go
FAST_NODES = {"NODE_HEARTBEAT_SECONDS": 0.5, "NODE_SILENCE_SECONDS": 3, "SWEEP_SECONDS": 1}


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """A real redis-server on loopback, for this module only."""
    port = free_port_block()
    directory = tmp_path_factory.mktemp("redis")
    process = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", str(directory)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    import redis
    try:
        wait_for(lambda: redis.Redis(port=port).ping(), 30, "redis-server")
    except TimeoutError:
        stop_process_group(process)
        raise
    yield f"redis://127.0.0.1:{port}/0"
    stop_process_group(process)


def long_files_keep_a_slot_free(service, slow_xls, doc):
    """On two slots, where a run counts as long past the service's timeout / 12 (set so that ``slow_xls`` runs
    longer): once account A's files are known to run long, A converts one at a time while B, active lately, is
    about, and B's file starts at once, not after one of A's. A's backlog still goes through, with no sweep to help
    (the service is given none). Returns nothing; asserts."""
    heavy, other = service.register("heavy"), service.register("other")
    first = service.submit(other, doc).json()["task_id"]
    assert service.wait(other, first)["status"] == "SUCCEEDED"
    backlog = [service.submit(heavy, slow_xls, f"big-{n}.xls").json()["task_id"] for n in range(6)]
    # B comes while one of A's runs (what the check below needs): not in the moment between one of A's ending and
    # the next one's claim, which a loaded machine makes longer
    wait_for(lambda: (rows := service.rows()) and sum(rows[t]["finished_at"] is not None for t in backlog) >= 3
             and any(rows[t]["status"] == "PROCESSING" for t in backlog), 120, "three of the long files, one running")
    mine = service.submit(other, doc).json()["task_id"]
    assert service.wait(other, mine)["status"] == "SUCCEEDED"
    assert [service.wait(heavy, t, timeout=120)["status"] for t in backlog] == ["SUCCEEDED"] * 6
    seen = service.rows()
    order = sorted((seen[t]["started_at"], seen[t]["finished_at"]) for t in backlog)
    running = [finished for started, finished in order if started < seen[mine]["created_at"] < finished]
    assert running, "A's backlog was not running when B submitted"
    assert seen[mine]["started_at"] < min(running), "B's file waited for a slot behind A's"
    for n in range(2, len(order)):  # the first two started together, before anything was known of them
        assert order[n][0] >= max(finished for _, finished in order[:n]), f"A held both slots: {order}"


def a_first_burst_gives_a_slot_back(service, charts_xls, doc, running=None):
    """On two slots, where a run counts as long past the service's timeout / 12 (set so that ``charts_xls`` runs
    longer): account A's first two files take both slots before anything is known of them, and B's file comes while
    they run (``running(task ids)`` says they do; by default, their rows are PROCESSING). One of A's runs is stopped
    and goes back to the queue, B's file takes its slot, and A's file converts later, its attempt not used. Returns
    nothing; asserts."""
    heavy, other = service.register("burst"), service.register("other")
    backlog = [service.submit(heavy, charts_xls, f"charts-{n}.xls").json()["task_id"] for n in range(2)]
    running = running or (lambda tasks: all(service.rows()[t]["status"] == "PROCESSING" for t in tasks))
    wait_for(lambda: running(backlog), 60, "both of A's runs")
    mine = service.submit(other, doc).json()["task_id"]
    assert service.wait(other, mine)["status"] == "SUCCEEDED"
    assert [service.wait(heavy, t, timeout=120)["status"] for t in backlog] == ["SUCCEEDED"] * 2
    seen = service.rows()
    assert seen[mine]["started_at"] < min(seen[t]["finished_at"] for t in backlog), seen
    assert [seen[t]["attempts"] for t in backlog] == [1, 1]  # the stopped run used no attempt
    metrics = requests.get(f"{service.base_url}/metrics", timeout=10).text.splitlines()
    stopped = [float(line.split()[1]) for line in metrics if line.startswith("docshift_runs_stopped_total ")]
    assert stopped and stopped[0] >= 1, metrics


class Cluster:
    """A coordinator (web + worker with DOCSHIFT_WORKERS=0) and conversion nodes, sharing a
    queue key of their own."""

    def __init__(self, tmp_path, s3_env, redis_url, **settings_env):
        # each test its own Redis database, so queues and node registries never mix
        self.queue_url = redis_url.rsplit("/", 1)[0] + f"/{int(time.time() * 1000) % 15 + 1}"
        import redis
        self.redis = redis.Redis.from_url(self.queue_url)
        self.redis.flushdb()
        self.queue_key = secrets.token_hex(32)
        self.tmp_path = tmp_path
        self.settings = {"QUEUE_URL": self.queue_url, "QUEUE_KEY": self.queue_key, **FAST_NODES, **settings_env}
        self.coordinator = Service(tmp_path / "coordinator", s3_env, **self.settings)
        self.nodes = {}

    def start(self):
        """The coordinator's web and worker, its worker beating; /healthz says "failing" until a node takes jobs."""
        self.coordinator.start_web()
        self.coordinator.start_worker(workers=0)
        wait_for(lambda: requests.get(f"{self.coordinator.base_url}/healthz", timeout=2).json()["checks"]["worker"]
                 == "ok", 60, "the coordinator")
        return self

    def start_node(self, name, queue_key=None):
        """A node process: the queue, its key (``queue_key``: another one) and its own scratch dir;
        nothing of the coordinator's data dir, and no credential of the object store (each job
        brings links of its own)."""
        scratch = self.tmp_path / name
        scratch.mkdir()
        env = {key: value for key, value in self.coordinator.env.items() if not key.startswith("DOCSHIFT_")}
        env.update({key: value for key, value in self.coordinator.env.items() if key.startswith("DOCSHIFT_NODE_")})
        env.update({"DOCSHIFT_QUEUE_URL": self.queue_url, "DOCSHIFT_QUEUE_KEY": queue_key or self.queue_key,
                    "DOCSHIFT_DATA_DIR": str(scratch), "DOCSHIFT_WORKERS": "1"})
        with open(scratch / "node.log", "ab") as log:
            self.nodes[name] = subprocess.Popen([str(BIN / "python"), "worker.py", "node"], cwd=ROOT, env=env,
                                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        return self.nodes[name]

    def config(self, **overrides):
        """Settings of a process that shares the coordinator's queue and key (the test's own side)."""
        from docshift import settings

        return settings.load({"DATA_DIR": str(self.tmp_path / "test-side"), **self.settings, **overrides})

    def log(self, name="worker"):
        """What a process logged: the coordinator's ``web`` or ``worker``, or a node's name."""
        path = self.tmp_path / name / "node.log" if name in self.nodes else self.coordinator.data_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def rows(self):
        return self.coordinator.rows()

    def stop(self):
        for process in self.nodes.values():
            stop_process_group(process)
        self.coordinator.stop()

    def usage(self, key):
        return requests.get(f"{self.coordinator.base_url}/v1/account/usage",
                            headers={"Authorization": f"Bearer {key}"}, timeout=10).json()
