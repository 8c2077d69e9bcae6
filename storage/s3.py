"""Inputs and results in an S3-compatible bucket, through the minio SDK.

Download links are signed by a second client built for the public host
(``S3_PUBLIC_URL``): signing is local when the region is given, and a link's
host is part of its signature, so it must be signed for the host the client
will call rather than rewritten afterwards.
"""

import errno
import functools
import hashlib
import io
import logging
import os
import shutil
import socket
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ParamSpec, TypeVar
from urllib.parse import urlsplit

import urllib3
from minio import Minio
from minio.commonconfig import ENABLED, Filter
from minio.error import MinioException, S3Error
from minio.lifecycleconfig import Expiration, LifecycleConfig, Rule
from urllib3.connection import HTTPConnection
from urllib3.connectionpool import HTTPConnectionPool
from urllib3.exceptions import NewConnectionError

from docshift.errors import DiskFull, InputMissing, StoreUnavailable
from docshift.formats import MEDIA_TYPES
from docshift.settings import Settings, on_redis
from docshift.storage.spool import InputSpool

log = logging.getLogger("docshift.objects")
# the run that holds a task: (holder, attempt) (``storage.tasks.lease_of``)
Lease = tuple[str | None, int]
_P = ParamSpec("_P")
_R = TypeVar("_R")

# The sweep deletes inputs and results within minutes; this only catches what it would miss.
# The bucket's other rules (an operator's, another application's) are kept: only these ids are ours.
BACKSTOP = [
    Rule(ENABLED, rule_filter=Filter(prefix=prefix), rule_id=f"backstop-{prefix.rstrip('/')}",
         expiration=Expiration(days=1))
    for prefix in ("inputs/", "results/")
]

# what S3 servers answer for an object that is not there
MISSING = ("NoSuchKey", "NoSuchObject", "ResourceNotFound")
CONNECT_TIMEOUT, READ_TIMEOUT, RETRIES = 3, 60, 2
PING_SECONDS = 3.0
MISSING = ("NoSuchKey", "NoSuchObject", "ResourceNotFound")
# the longest one call can take before it answers or raises: every try waits its full timeouts
LONGEST_CALL = (RETRIES + 1) * (CONNECT_TIMEOUT + READ_TIMEOUT) + 5


def _domain_errors(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """A store that refuses or does not answer is StoreUnavailable: callers never see the SDK's
    or urllib3's exceptions."""
    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except (MinioException, urllib3.exceptions.HTTPError, OSError) as error:
            if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskFull(f"no room for a fetched file: {error}") from error  # our disk, not the store
            raise StoreUnavailable(f"{type(error).__name__}: {error}") from error
    return wrapper


class ObjectStore:
    def __init__(self, config: Settings) -> None:
        self.bucket = config.s3_bucket
        credentials: dict[str, Any] = {"access_key": config.s3_access_key, "secret_key": config.s3_secret_key,
                       "region": config.s3_region}
        # the SDK's default waits 5 minutes to connect and retries 5 times: an outage must
        # reach a client as a prompt 503, and the worker has its own retries
        http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT, read=READ_TIMEOUT), maxsize=10,
            retries=urllib3.Retry(total=RETRIES, backoff_factor=0.2, status_forcelist=[500, 502, 503, 504]))
        if config.s3_socket:
            _through_socket(http, config.s3_socket)
        self.client = Minio(config.s3_endpoint, secure=config.s3_secure, http_client=http,
                            **credentials)
        # /healthz's question, answered within PING_SECONDS or not at all: a store stopped mid-answer held a health
        # check for the minutes the read timeout and its retries take
        quick = urllib3.PoolManager(timeout=urllib3.Timeout(connect=PING_SECONDS, read=PING_SECONDS), maxsize=2,
                                    retries=False)
        if config.s3_socket:
            _through_socket(quick, config.s3_socket)
        self.pinger = Minio(config.s3_endpoint, secure=config.s3_secure, http_client=quick, **credentials)
        public = urlsplit(config.s3_public_url)
        self.signer = Minio(public.netloc, secure=public.scheme == "https", **credentials)
        # a job's links are signed for the store as conversion nodes reach it (another host than ours)
        nodes = urlsplit(config.s3_node_url or "")
        self.node_signer = Minio(nodes.netloc, secure=nodes.scheme == "https", **credentials) \
            if nodes.netloc else self.client
        # one box: an upload waits beside the database (``storage.spool``); a node fetches its input from the
        # bucket. Both are looked in whichever this is, so that a switch leaves no waiting upload behind.
        self.spool = InputSpool(Path(config.data_dir) / "inputs")
        self.inputs_in_bucket = on_redis(config)

    @_domain_errors
    def ensure_bucket(self) -> None:
        """Create the bucket if needed, with a lifecycle rule as a backstop to the worker's sweep."""
        if not self.client.bucket_exists(self.bucket):
            try:
                self.client.make_bucket(self.bucket)
            except S3Error as error:
                if error.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    raise
        try:
            current = self.client.get_bucket_lifecycle(self.bucket)
            rules = current.rules if current else []
            if any(_rule_key(ours) not in map(_rule_key, rules) for ours in BACKSTOP):
                ids = {rule.rule_id for rule in BACKSTOP}
                others = [rule for rule in rules if rule.rule_id not in ids]
                self.client.set_bucket_lifecycle(self.bucket, LifecycleConfig(others + BACKSTOP))
        except S3Error as error:  # not every S3 server knows lifecycle rules; the sweep suffices
            log.warning("bucket lifecycle backstop not set: %s", error.code)

    @_domain_errors
    def ping(self) -> None:
        """Raise if the store does not answer for our bucket within PING_SECONDS."""
        self.pinger.bucket_exists(self.bucket)

    # inputs

    @_domain_errors
    def put_input(self, task_id: str, data: bytes) -> None:
        """Store an upload: in the spool on one box, else in the bucket."""
        if not self.inputs_in_bucket:
            self.spool.put(task_id, data)
            return
        self._with_bucket(self._put, _input_key(task_id), data)

    def _with_bucket(self, action: Callable[..., object], *args: Any) -> None:
        """``action(*args)``, the bucket created first if it is not there (the store may start after us)."""
        try:
            action(*args)
        except S3Error as error:
            if error.code != "NoSuchBucket":
                raise
            self.ensure_bucket()
            action(*args)

    def _put(self, key: str, data: bytes) -> None:
        self.client.put_object(self.bucket, key, io.BytesIO(data), len(data),
                               content_type="application/octet-stream")

    @_domain_errors
    def fetch_input(self, task_id: str, path: str | Path) -> None:
        """Fetch the input into ``path``; InputMissing when neither the spool nor the bucket has it (on one box,
        the bucket holds only what was submitted before: missing there too, it is gone)."""
        if self.spool.fetch(task_id, path):
            return
        try:
            self.client.fget_object(self.bucket, _input_key(task_id), str(path))
        except S3Error as error:
            # a HEAD names any 404 NoSuchKey: with the queue on Redis, a missing bucket (a wrong setting) is no
            # missing input
            if error.code in MISSING + ("NoSuchBucket",) and (
                    not self.inputs_in_bucket or self.client.bucket_exists(self.bucket)):
                raise InputMissing(f"no stored input for {task_id}") from error
            raise

    @_domain_errors
    def delete_input(self, task_id: str) -> None:
        if not self.spool.delete(task_id):
            self.client.remove_object(self.bucket, _input_key(task_id))

    # results: each under the key its run's lease names (``result_key``); the task's row keeps it

    @_domain_errors
    def put_result(self, key: str, path: str | Path, extension: str) -> None:
        self._with_bucket(self.client.fput_object, self.bucket, key, str(path), MEDIA_TYPES[extension])

    def presign_result(self, key: str, disposition: str, extension: str, expires_in: float,
                       signed_at: datetime | None = None) -> str:
        """A fresh GET link for the result (under ``key``), served with ``disposition`` and the OOXML type,
        valid ``expires_in`` seconds from ``signed_at`` (now)."""
        return self.signer.presigned_get_object(
            self.bucket, key, expires=timedelta(seconds=expires_in), request_date=signed_at,
            response_headers={
                "response-content-disposition": disposition,
                "response-content-type": MEDIA_TYPES[extension],
            })

    @_domain_errors
    def delete_result(self, key: str) -> None:
        self.client.remove_object(self.bucket, key)

    @_domain_errors
    def result_size(self, key: str) -> int | None:
        """Bytes of the result stored under ``key``; None when there is none."""
        try:
            return self.client.stat_object(self.bucket, key).size
        except S3Error as error:
            if error.code in MISSING:
                return None
            raise

    @_domain_errors
    def _to_bucket(self, task_id: str) -> None:
        """An upload that waits in the spool (submitted before the queue moved to Redis) moved to the bucket."""
        data = self.spool.read(task_id)
        if data is not None:
            self._put(_input_key(task_id), data)
            self.spool.delete(task_id)

    def job_links(self, task_id: str, result_key: str, expires_in: float) -> dict[str, str]:
        """What a conversion node may do in the store for one job, and nothing else: GET the task's
        input, PUT its result under ``result_key``. Signed here, for the endpoint the nodes reach; no request is
        made unless the input waits in the spool."""
        expires = timedelta(seconds=expires_in)
        self._to_bucket(task_id)
        return {"input": self.node_signer.presigned_get_object(self.bucket, _input_key(task_id), expires=expires),
                "result": self.node_signer.presigned_put_object(self.bucket, result_key, expires=expires)}


class _UnixConnection(HTTPConnection):
    """HTTP to the embedded store's own Unix socket: no loopback TCP, no relay through the
    ``objects`` process. Requests still name the S3 port's host, which their signature covers."""
    socket_path: str  # each subclass's own (``_through_socket``)

    def _new_conn(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.socket_path)
        except OSError as error:
            sock.close()
            raise NewConnectionError(self, f"Failed to connect to {self.socket_path}: {error}") from error
        return sock


def _through_socket(http: urllib3.PoolManager, path: str) -> None:
    """Make the pool manager ``http`` connect to the Unix socket ``path`` whatever the URL's host."""
    connection = type("UnixConnection", (_UnixConnection,), {"socket_path": path})
    pool = type("UnixConnectionPool", (HTTPConnectionPool,), {"ConnectionCls": connection})
    http.pool_classes_by_scheme = {"http": pool}


def _rule_key(rule: Rule) -> tuple[Any, ...]:
    expiration = rule.expiration.days if rule.expiration else None
    return rule.rule_id, rule.status, rule.rule_filter.prefix if rule.rule_filter else None, expiration


def _input_key(task_id: str) -> str:
    return f"inputs/{task_id}"


def result_key(task_id: str, lease: Sequence[Any]) -> str:
    """Where the run holding ``lease`` (holder, attempt) stores the task's result: a key of its own,
    so that a run that lost its lease never writes where the current result is read from."""
    holder, attempt = lease
    return f"results/{task_id}/{attempt}-{hashlib.sha256(str(holder).encode()).hexdigest()[:16]}"


class Links:
    """A conversion node's way to the store: one job's presigned links (``ObjectStore.job_links``),
    no credential. The same timeouts and retries as ``ObjectStore``'s client."""

    def __init__(self) -> None:
        self.http = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=CONNECT_TIMEOUT, read=READ_TIMEOUT),
            retries=urllib3.Retry(total=RETRIES, backoff_factor=0.2, status_forcelist=[500, 502, 503, 504],
                                  allowed_methods=None, raise_on_status=False))

    @_domain_errors
    def fetch(self, url: str, path: str | Path) -> None:
        response = self.http.request("GET", url, preload_content=False)
        try:
            if response.status == 404 and b"NoSuchKey" in response.read(4096):
                raise InputMissing("the input link's object is gone")  # a missing bucket says NoSuchBucket
            if response.status != 200:
                raise StoreUnavailable(f"the input link answered {response.status}")
            with open(path, "wb") as out:
                shutil.copyfileobj(response, out)
        finally:
            response.release_conn()

    @_domain_errors
    def put(self, url: str, path: str | Path, extension: str) -> None:
        with open(path, "rb") as body:
            response = self.http.request("PUT", url, body=body, headers={
                "Content-Type": MEDIA_TYPES[extension], "Content-Length": str(os.path.getsize(path))})
        if response.status != 200:
            raise StoreUnavailable(f"the result link answered {response.status}")

