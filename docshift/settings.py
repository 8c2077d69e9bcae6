"""The one configuration of every docshift process: web, worker, operator CLI, object store.

``load(overrides)`` reads ``DOCSHIFT_*`` from the environment on top of the defaults of
``Settings``, then ``overrides`` (the tests' dict, by the same names without the prefix), and
checks every value once: a value of the wrong type or out of range stops the process with the
variable's name. Code reads the frozen ``Settings``' typed attributes and never casts. The
embedded object store's credentials and the token-signing secret are generated once into the
data directory, when ``load`` is called: importing creates nothing.
"""

import dataclasses
import hashlib
import hmac
import ipaddress
import json
import math
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from marshmallow import Schema, ValidationError, fields, validate

from docshift.errors import BadSetting

PREFIX = "DOCSHIFT_"
PLANS = {"starter": 500, "team": 2500, "business": 10000}
MIN_QUEUE_KEY = 32
OVERAGE_USD = 0.02
MIB = 1024 * 1024
HOUR = 3600
# the contract: an Idempotency-Key replays its task for at least this long (the client says so too)
MIN_IDEMPOTENCY_KEY_TTL = 24 * HOUR
# the silences' defaults, in beats of their heartbeats: a worker's beat waits behind its sweep, which may
# take a while; a node's beat is its own thread's, so fewer of them make it gone
SILENT_BEATS = 15
NODE_SILENT_BEATS = 7.5
# a slow client the whole-request deadline still serves (560 kbit/s: 4 MiB in 60 s)
SLOW_CLIENT_BYTES_PER_SECOND = 70_000
MIN_REQUEST_SECONDS = 60
# a 104 MB workbook needed more scratch space than 512 MB, and converted in 800
SCRATCH_MB = 512
SCRATCH_PER_UPLOAD = 8


def _setting(check: fields.Field, default: Any = None, factory: Callable[[], Any] | None = None,
             secret: bool = False) -> Any:
    """A field of ``Settings`` whose given value ``check`` (a marshmallow field) converts and validates;
    a secret one is left out of the object's repr."""
    if factory is not None:
        return field(default_factory=factory, metadata={"check": check}, repr=not secret)
    return field(default=default, metadata={"check": check}, repr=not secret)


def _count(default: int | None, minimum: int = 1, maximum: int | None = None) -> Any:
    return _setting(fields.Integer(validate=validate.Range(min=minimum, max=maximum)), default)


def _seconds(default: float | None, minimum: float = 0, above: bool = True) -> Any:
    """A duration: above ``minimum`` (or at least it, with ``above=False``); a ``None`` default is derived
    from other settings by ``_finish``."""
    return _setting(fields.Float(validate=validate.Range(min=minimum, min_inclusive=not above)), default)


def _text(default: str | None = None, optional: bool = True, secret: bool = False) -> Any:
    return _setting(fields.String(allow_none=optional), default, secret=secret)


def _web_url() -> Any:
    """An http(s) URL with a host, or unset: links are made from it, and a value with no scheme or no host
    (``api.example.com``) made links no client can follow."""
    return _setting(fields.Url(schemes={"http", "https"}, require_tld=False, allow_none=True))


def _switch(default: bool) -> Any:
    """on/off (also true/false, yes/no, 1/0)."""
    return _setting(fields.Boolean(), default)


class _JsonMapping(fields.Dict):
    """A mapping given as one, or as JSON text (``DOCSHIFT_PLAN_QUOTAS='{"starter": 3}'``)."""

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> Any:
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as error:
                raise ValidationError(f"Not valid JSON ({error}).") from error
        return super()._deserialize(value, attr, data, **kwargs)


@dataclass(frozen=True)
class Settings:
    """Every setting, typed; the environment's ``DOCSHIFT_<NAME>`` sets ``<name>``."""

    port: int = _count(8000, maximum=65535)
    data_dir: str = _text("var", optional=False)
    # made in the data dir unless given
    database: str = _text()
    queue_database: str = _text()
    base_url: str | None = _web_url()
    secret_key: str = _text(secret=True)
    # an external S3 store; unset, the embedded SeaweedFS (embedded_store), credentials generated once
    s3_endpoint: str = _text()
    s3_access_key: str = _text(secret=True)
    s3_secret_key: str = _text(secret=True)
    s3_bucket: str = _text("docshift", optional=False)
    s3_secure: bool = _switch(False)
    s3_region: str = _text("us-east-1", optional=False)
    s3_public_url: str = _web_url()
    # port of the embedded SeaweedFS S3 endpoint; its other ports follow it
    s3_port: int = _count(8333, maximum=65535 - 10004)
    # the store as conversion nodes reach it (http://host:port), for the links each job carries; unset,
    # s3_endpoint (nodes on this host or network reach it as the coordinator does)
    s3_node_url: str | None = _web_url()
    # the address that port listens on; the container image opens it to its published port
    s3_bind: str = _text("127.0.0.1", optional=False)
    # a Unix socket serving the same S3 as s3_endpoint; the embedded store's by default
    s3_socket: str | None = _text()
    marketplace: str = _setting(fields.String(validate=validate.OneOf(("local", "aws"))), "local")
    # the aws marketplace backend
    aws_product_code: str | None = _text()
    aws_sqs_queue_url: str | None = _text()
    aws_region: str = _text("us-east-1", optional=False)
    aws_max_attempts: int = _count(5)
    aws_overage_dimension: str = _text("overage", optional=False)
    # conversion threads, each converting one file at a time in a LibreOffice child of its own; 0 on a
    # coordinator whose conversions all run on nodes
    workers: int = _count(os.cpu_count() or 2, minimum=0)
    conversion_timeout: float = _seconds(120)
    # address-space cap of each LibreOffice process, in MiB (a 571 KB .ppt of the corpus
    # peaks at 2.6 GB resident and more in address space; 4096 made it fail)
    office_memory_limit_mb: int = _count(8192)
    # CPU seconds each process in the sandbox may use (a child converts one file; one killed mid-conversion
    # is retried in a fresh one): a compromised one cannot spin forever
    office_cpu_limit_seconds: int = _count(600)
    # each conversion's share of the sandbox's in-memory profile and temp files (RAM; one share per worker thread),
    # and the largest file it may write (a result). Unset, SCRATCH_MB, or SCRATCH_PER_UPLOAD times the upload limit
    office_scratch_limit_mb: int = _count(None)
    # LibreOffice runs in its bubblewrap sandbox; off runs it without (a warning at every start)
    sandbox: bool = _switch(True)
    result_retention_seconds: int = _count(1800)
    # unfinished (QUEUED or PROCESSING) tasks an account may have before 429 too_many_tasks
    max_pending_tasks: int = _count(100)
    # how long one run waits out an outage of the database or the object store (5 min and some)
    outage_patience_seconds: float = _seconds(330, above=False)
    # the worker's duties thread beats this often; /healthz calls the worker gone after worker_silence_seconds
    # without a beat: unset, SILENT_BEATS beats (the beat shares its thread with the sweep, which may take a while)
    heartbeat_seconds: float = _seconds(10)
    worker_silence_seconds: float = _seconds(None)
    sweep_seconds: float = _seconds(15)
    # redis://host:port/db moves the queue to Redis, for conversion nodes; unset, the SQLite queue.
    # Off loopback it must carry a password (redis://:password@host, or rediss:// for TLS)
    queue_url: str | None = _text()
    # seals every queue message and Redis entry; on Redis, the same long secret on the coordinator,
    # the web and every node (on one box it derives from secret_key). Comma-separated keys rotate:
    # the first seals, any opens
    queue_key: str = _text(secret=True)
    # conversion nodes beat this often; one silent for node_silence_seconds (unset, NODE_SILENT_BEATS beats)
    # is gone, and its jobs are taken back
    node_heartbeat_seconds: float = _seconds(2)
    node_silence_seconds: float = _seconds(None)
    # the most conversions one node is given at once, whatever it announces
    node_max_slots: int = _count(32)
    # a download link's life, at most (never past the result's retention)
    download_expires_in: int = _count(300)
    # how long an Idempotency-Key keeps answering with its task (at least what the contract promises)
    idempotency_key_ttl_seconds: int = _count(MIN_IDEMPOTENCY_KEY_TTL, minimum=MIN_IDEMPOTENCY_KEY_TTL)
    # included conversions per plan (PLANS), as overridden
    plan_quotas: dict[str, int] = _setting(  # noqa: RUF009 - a field with a default_factory, as each is
        _JsonMapping(keys=fields.String(validate=validate.OneOf(PLANS)),
                     values=fields.Integer(validate=validate.Range(min=0))), factory=lambda: dict(PLANS))
    # a local registration link's life: it is used once, and a fresh one is issued as easily
    registration_token_max_age: int = _count(24 * HOUR)
    max_upload_bytes: int = _count(4 * MIB)
    # seconds a request body may pause under gunicorn before the request is refused
    read_timeout: float = _seconds(30)
    # seconds a whole request body may take to arrive; a client that trickles it in, each byte within
    # read_timeout, is refused then all the same. Unset, the largest upload at SLOW_CLIENT_BYTES_PER_SECOND,
    # and never under MIN_REQUEST_SECONDS: a higher max_upload_bytes must not shut out the clients it was for
    request_seconds: float = _seconds(None)
    # when set, /metrics answers only to "Authorization: Bearer <token>", on loopback too (and /healthz shows
    # its report beyond loopback only with it); required for the web to listen beyond loopback
    metrics_token: str | None = _text(secret=True)
    # how long a web process reuses the database figures /metrics last read
    metrics_cache_seconds: float = _seconds(5, above=False)
    # derived: no s3_endpoint was given, so docshift runs SeaweedFS itself (storage.seaweed)
    embedded_store: bool = field(default=False, metadata={"derived": True})


NAMES = frozenset(f.name for f in dataclasses.fields(Settings) if "check" in f.metadata)
_Checks = Schema.from_dict({f.name: f.metadata["check"] for f in dataclasses.fields(Settings) if "check" in f.metadata})


def load(overrides: Mapping[str, Any] | None = None) -> Settings:
    """Defaults, then the environment, then ``overrides`` (``{"WORKERS": 2}``); every value checked,
    derived values filled in. A bad value raises ``BadSetting``, naming the variable."""
    overrides = dict(overrides or {})
    unknown = sorted(name for name in overrides if name.lower() not in NAMES)
    if unknown:
        raise BadSetting(f"no such setting: {', '.join(unknown)}")
    given = {**_environment(), **{name.lower(): value for name, value in overrides.items()}}
    try:
        values = _Checks().load(given)
    except ValidationError as error:
        problems = error.normalized_messages()
        # the value itself is not repeated: it may be a secret
        raise BadSetting("; ".join(f"{PREFIX}{name.upper()}: {_flat(text)}"
                                   for name, text in sorted(problems.items()))) from None
    return _finish(dataclasses.replace(Settings(), **values))


def _environment() -> dict[str, str]:
    """The ``DOCSHIFT_*`` variables that name a setting (others, like the client's DOCSHIFT_URL, are not
    ours); an empty one is unset, so its default holds."""
    values = {}
    for variable, value in os.environ.items():
        name = variable.removeprefix(PREFIX).lower()
        if variable.startswith(PREFIX) and name in NAMES and value.strip():
            values[name] = value
    return values


def _flat(messages: Any) -> str:
    if isinstance(messages, dict):
        return "; ".join(f"{key}: {_flat(value)}" for key, value in messages.items())
    if isinstance(messages, list):
        return " ".join(_flat(message) for message in messages)
    return str(messages)


def _finish(config: Settings) -> Settings:
    """Fill in what derives from other settings (data dir files, embedded store, the silences from
    their beats, the request deadline and the scratch space from the upload limit) and check what only the settings
    together say."""
    data_dir = Path(config.data_dir).resolve()
    # keys' hashes, tasks, secrets: for the service's user only, whatever the umask says
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    derived: dict[str, Any] = {"data_dir": str(data_dir),
                               "database": config.database or str(data_dir / "docshift.db"),
                               "queue_database": config.queue_database or str(data_dir / "queue.db")}
    for database in (derived["database"], derived["queue_database"]):
        _private_file(database)  # SQLite gives its -wal and -shm files the database's mode
    derived["secret_key"] = config.secret_key or _generated_once(data_dir / "secret_key",
                                                                 lambda: secrets.token_hex(32))
    endpoint = config.s3_endpoint
    if not endpoint:
        endpoint = derived["s3_endpoint"] = f"127.0.0.1:{config.s3_port}"
        derived["embedded_store"] = True
        # the web and the worker skip the port and its relay (storage.seaweed)
        derived["s3_socket"] = config.s3_socket or str(data_dir / "objects" / "s3.sock")
        creds = json.loads(_generated_once(data_dir / "s3-credentials.json", _new_s3_credentials))
        derived["s3_access_key"] = config.s3_access_key or creds["access_key"]
        derived["s3_secret_key"] = config.s3_secret_key or creds["secret_key"]
    if not config.s3_public_url:
        derived["s3_public_url"] = f"{'https' if config.s3_secure else 'http'}://{endpoint}"
    derived["plan_quotas"] = {**PLANS, **config.plan_quotas}
    derived["queue_key"] = _queue_key(config, derived["secret_key"])
    if config.workers == 0 and not on_redis(config):
        raise BadSetting(f"{PREFIX}WORKERS is 0, which leaves the conversions to nodes, and nodes take them only from "
                         f"the queue on Redis ({PREFIX}QUEUE_URL): on the SQLite queue every file would wait forever. "
                         "Give it 1 or more, or unset it (one a core)")
    derived["request_seconds"] = config.request_seconds or float(max(
        MIN_REQUEST_SECONDS, math.ceil(config.max_upload_bytes / SLOW_CLIENT_BYTES_PER_SECOND)))
    derived["office_scratch_limit_mb"] = config.office_scratch_limit_mb or max(
        SCRATCH_MB, math.ceil(SCRATCH_PER_UPLOAD * config.max_upload_bytes / MIB))
    for beat, silence, beats in (("heartbeat_seconds", "worker_silence_seconds", SILENT_BEATS),
                                 ("node_heartbeat_seconds", "node_silence_seconds", NODE_SILENT_BEATS)):
        given = getattr(config, silence)
        if given is None:
            derived[silence] = float(getattr(config, beat) * beats)
        elif given <= getattr(config, beat):
            raise BadSetting(f"{PREFIX}{silence.upper()} ({given}) must be longer than "
                             f"{PREFIX}{beat.upper()} ({getattr(config, beat)}): a beat must come before silence")
    return dataclasses.replace(config, **derived)


def on_redis(config: Settings) -> bool:
    """The queue is on Redis: conversion nodes may take its jobs (else it is SQLite's, on this box)."""
    return (config.queue_url or "").startswith(("redis://", "rediss://", "unix://"))


def _queue_key(config: Settings, secret_key: str) -> str:
    """The queue key, and a Redis that is not open to anyone who reaches it."""
    url = config.queue_url or ""
    keys = [key.strip() for key in (config.queue_key or "").split(",") if key.strip()]
    if not on_redis(config):
        # the SQLite queue, beside the secret key: its key needs no sharing
        return ",".join(keys) or hmac.new(secret_key.encode(), b"docshift queue messages", hashlib.sha256).hexdigest()
    if not keys or any(len(key) < MIN_QUEUE_KEY for key in keys):
        raise BadSetting(f"DOCSHIFT_QUEUE_KEY must be set, at least {MIN_QUEUE_KEY} characters (each of them, "
                         "when comma-separated keys rotate), the same on the coordinator, the web and every node "
                         "(e.g. `openssl rand -hex 32`): it seals what goes through Redis")
    parts = urlsplit(url)
    if parts.scheme == "unix" or _loopback(parts.hostname) or parts.password or "password" in parse_qs(parts.query):
        return ",".join(keys)
    raise BadSetting(f"DOCSHIFT_QUEUE_URL names Redis at {parts.hostname} without a password: anyone who reaches "
                     "it could drop or flood the queue. Give it one (redis://:password@host:port/db, or rediss:// "
                     "for TLS), or run Redis on loopback")


def _loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def _new_s3_credentials() -> str:
    return json.dumps({"access_key": "ds" + secrets.token_hex(8), "secret_key": secrets.token_hex(20)})


def _private_file(path: str) -> None:
    """Create ``path`` empty with mode 0600 if it does not exist (an empty file is an empty database)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass


def _generated_once(path: Path, make: Callable[[], str]) -> str:
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
