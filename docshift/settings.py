"""The one configuration of every docshift process: web, worker, operator CLI, object store.

``load(overrides)`` reads ``DOCSHIFT_*`` from the environment the way Flask's
``Config.from_prefixed_env`` does (values parse as JSON where they can), on
top of the defaults below, then ``overrides`` (the tests' dict). The embedded
object store's credentials and the token-signing secret are generated once
into the data directory, when ``load`` is called: importing creates nothing.
"""

import hashlib
import hmac
import ipaddress
import json
import os
import secrets
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from flask import Config

DEFAULTS = {
    "PORT": 8000,
    "DATA_DIR": "var",
    "BASE_URL": None,
    "SECRET_KEY": None,
    "S3_ENDPOINT": None,
    "S3_ACCESS_KEY": None,
    "S3_SECRET_KEY": None,
    "S3_BUCKET": "docshift",
    "S3_SECURE": False,
    "S3_REGION": "us-east-1",
    "S3_PUBLIC_URL": None,
    # port of the embedded SeaweedFS S3 endpoint; its other ports follow it
    "S3_PORT": 8333,
    # the store as conversion nodes reach it (http://host:port), for the links each job carries; unset,
    # S3_ENDPOINT (nodes on this host or network reach it as the coordinator does)
    "S3_NODE_URL": None,
    # the address that port listens on; the container image opens it to its published port
    "S3_BIND": "127.0.0.1",
    # a Unix socket serving the same S3 as S3_ENDPOINT; the embedded store's by default
    "S3_SOCKET": None,
    "MARKETPLACE": "local",
    # the aws marketplace backend
    "AWS_PRODUCT_CODE": None,
    "AWS_SQS_QUEUE_URL": None,
    "AWS_REGION": "us-east-1",
    "AWS_MAX_ATTEMPTS": 5,
    "AWS_OVERAGE_DIMENSION": "overage",
    "WORKERS": os.cpu_count() or 2,
    "CONVERSION_TIMEOUT": 120,
    # a warm LibreOffice is replaced after this many conversions (it never returns memory)
    "OFFICE_MAX_CONVERSIONS": 200,
    # address-space cap of each LibreOffice process, in MiB (a 571 KB .ppt of the corpus
    # peaks at 2.6 GB resident and more in address space; 4096 made it fail)
    "OFFICE_MEMORY_LIMIT_MB": 8192,
    # each LibreOffice keeps a spare started and self-tested, to take over at once for a new account (a
    # LibreOffice converts one account's files only) and at recycling; "off" starts one when needed
    "OFFICE_SPARE": "on",
    # the LibreOffices each worker thread keeps, one per account, the converting one included: an account's
    # next task finds its own warm (a new account's takes over the spare); each idle one holds its memory
    "OFFICE_ACCOUNTS": 4,
    # an account's LibreOffice that waited this long for its next task is stopped
    "OFFICE_IDLE_SECONDS": 600,
    # CPU seconds each process in the sandbox may use (a busy LibreOffice is recycled long before;
    # one killed mid-conversion is retried on a fresh one): an idle compromised one cannot spin forever
    "OFFICE_CPU_LIMIT_SECONDS": 600,
    # the sandbox's in-memory profile and temp files (RAM), and the largest file it may write
    "OFFICE_SCRATCH_LIMIT_MB": 512,
    # LibreOffice runs in its bubblewrap sandbox; "off" runs it without (a warning at every start)
    "SANDBOX": "on",
    "RESULT_RETENTION_SECONDS": 1800,
    # unfinished (QUEUED or PROCESSING) tasks an account may have before 429 too_many_tasks
    "MAX_PENDING_TASKS": 100,
    # how long one run waits out an outage of the database or the object store (5 min and some)
    "OUTAGE_PATIENCE_SECONDS": 330,
    # the worker's own duties, on a thread of their own: liveness, and the sweep of retention and recovery
    "HEARTBEAT_SECONDS": 10,
    "SWEEP_SECONDS": 15,
    # redis://host:port/db moves the queue to Redis, for conversion nodes; unset, the SQLite queue.
    # Off loopback it must carry a password (redis://:password@host, or rediss:// for TLS)
    "QUEUE_URL": None,
    # seals every queue message and Redis entry; on Redis, the same long secret on the coordinator,
    # the web and every node (on one box it derives from SECRET_KEY)
    "QUEUE_KEY": None,
    # conversion nodes beat this often; one silent for longer is gone, and its jobs are taken back
    "NODE_HEARTBEAT_SECONDS": 2,
    "NODE_SILENCE_SECONDS": 15,
    # the most conversions one node is given at once, whatever it announces
    "NODE_MAX_SLOTS": 32,
    "DOWNLOAD_EXPIRES_IN": 300,
    # how long an Idempotency-Key keeps answering with its task (at least 24 h by contract)
    "IDEMPOTENCY_KEY_TTL_SECONDS": 24 * 3600,
    "PLAN_QUOTAS": {},
    # a local registration link's life: it is used once, and a fresh one is issued as easily
    "REGISTRATION_TOKEN_MAX_AGE": 24 * 3600,
    "MAX_UPLOAD_BYTES": 4 * 1024 * 1024,
    # seconds a request body may pause under gunicorn before the request is refused
    "READ_TIMEOUT": 30,
    # when set, /metrics answers only to "Authorization: Bearer <token>"; required beyond loopback
    "METRICS_TOKEN": None,
    # how long a web process reuses the database figures /metrics last read
    "METRICS_CACHE_SECONDS": 5,
}

PLANS = {"starter": 500, "team": 2500, "business": 10000}
MIN_QUEUE_KEY = 32
OVERAGE_USD = 0.02


def load(overrides=None):
    """Defaults, then the environment, then ``overrides``; derived values filled in."""
    config = Config(os.getcwd())
    config.from_mapping(DEFAULTS)
    config.from_prefixed_env("DOCSHIFT")
    if overrides:
        config.update(overrides)
    finish(config)
    return config


def finish(config):
    """Fill in what derives from other settings (data dir files, embedded store); idempotent."""
    data_dir = Path(config["DATA_DIR"]).resolve()
    # keys' hashes, tasks, secrets: for the service's user only, whatever the umask says
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    config["DATA_DIR"] = str(data_dir)
    config.setdefault("DATABASE", str(data_dir / "docshift.db"))
    config.setdefault("QUEUE_DATABASE", str(data_dir / "queue.db"))
    for database in (config["DATABASE"], config["QUEUE_DATABASE"]):
        _private_file(database)  # SQLite gives its -wal and -shm files the database's mode
    if not config.get("SECRET_KEY"):
        config["SECRET_KEY"] = _generated_once(data_dir / "secret_key", lambda: secrets.token_hex(32))
    if not config.get("S3_ENDPOINT"):
        config["S3_ENDPOINT"] = f"127.0.0.1:{config['S3_PORT']}"
        # the web and the worker skip the port and its relay (storage.seaweed)
        config["S3_SOCKET"] = config.get("S3_SOCKET") or str(data_dir / "objects" / "s3.sock")
        creds = json.loads(_generated_once(data_dir / "s3-credentials.json", _new_s3_credentials))
        config["S3_ACCESS_KEY"] = config.get("S3_ACCESS_KEY") or creds["access_key"]
        config["S3_SECRET_KEY"] = config.get("S3_SECRET_KEY") or creds["secret_key"]
    if not config.get("S3_PUBLIC_URL"):
        scheme = "https" if config["S3_SECURE"] else "http"
        config["S3_PUBLIC_URL"] = f"{scheme}://{config['S3_ENDPOINT']}"
    config["PLAN_QUOTAS"] = {**PLANS, **(config.get("PLAN_QUOTAS") or {})}
    config["SANDBOX"] = _on_or_off(config["SANDBOX"])
    _queue(config)
    return config


def _queue(config):
    """The queue key, and a Redis that is not open to anyone who reaches it."""
    url = str(config.get("QUEUE_URL") or "")
    if not url.startswith(("redis://", "rediss://", "unix://")):
        # the SQLite queue, beside the secret key: its key needs no sharing
        config["QUEUE_KEY"] = config.get("QUEUE_KEY") or hmac.new(
            str(config["SECRET_KEY"]).encode(), b"docshift queue messages", hashlib.sha256).hexdigest()
        return
    if len(str(config.get("QUEUE_KEY") or "")) < MIN_QUEUE_KEY:
        raise ValueError(f"DOCSHIFT_QUEUE_KEY must be set, at least {MIN_QUEUE_KEY} characters, the same on the "
                         "coordinator, the web and every node (e.g. `openssl rand -hex 32`): it seals what goes "
                         "through Redis")
    parts = urlsplit(url)
    if parts.scheme == "unix" or _loopback(parts.hostname) or parts.password or "password" in parse_qs(parts.query):
        return
    raise ValueError(f"DOCSHIFT_QUEUE_URL names Redis at {parts.hostname} without a password: anyone who reaches "
                     "it could drop or flood the queue. Give it one (redis://:password@host:port/db, or rediss:// "
                     "for TLS), or run Redis on loopback")


def _loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def _on_or_off(value):
    text = str(value).strip().lower()
    if text in ("on", "true", "1", "yes"):
        return "on"
    if text in ("off", "false", "0", "no"):
        return "off"
    raise ValueError(f"DOCSHIFT_SANDBOX must be on or off, not {value!r}")


def _new_s3_credentials():
    return json.dumps({"access_key": "ds" + secrets.token_hex(8), "secret_key": secrets.token_hex(20)})


def _private_file(path):
    """Create ``path`` empty with mode 0600 if it does not exist (an empty file is an empty database)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass


def _generated_once(path, make):
    """Read ``path``, creating it atomically with ``make()`` if it does not exist yet."""
    try:
        return path.read_text()
    except FileNotFoundError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(make())
    try:
        os.link(tmp, path)  # fails if another process won the race
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)
    return path.read_text()
