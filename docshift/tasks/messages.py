"""What docshift puts into its queues and into Redis, and how it takes it back: plain JSON fields,
sealed with the queue key (signed and encrypted), never a pickle.

Whoever can reach the queue (the Redis that nodes reach) must not make the coordinator or a node
run anything, nor count a conversion, nor read a job's links: a message is opened only once its
signature checks out, then only as data, and the values of a job or an outcome are checked before
any reaches a path, a URL or the database. What is not ours raises ``ForgedMessage``; the queue
drops it and logs it. On Redis a message also lives only so long: one sealed longer ago is refused
the same way, so a job captured and replayed later runs nothing.

``DOCSHIFT_QUEUE_KEY`` may hold several keys, comma-separated, so that they can be rotated: each
process seals with the first and opens with any.
"""

import base64
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import fields as dataclass_fields
from datetime import datetime
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from huey.registry import Message
from huey.serializer import Serializer

from docshift.contract import TASK_ID, Macros, Protection, TaskErrorCode, Verdict
from docshift.errors import ForgedMessage
from docshift.formats import FORMATS, MEDIA_TYPES
from docshift.settings import Settings

HOLDER = re.compile(r"job:[0-9a-f]{16}")
ACCOUNT_ID = re.compile(r"acc_[0-9a-f]{24}")  # the tenant a job from an older coordinator names (unused)
DETECTED_FORMAT = re.compile(r"[\w-]{1,100}")
LINK = re.compile(r"https?://[^\s]{1,4000}")
MAX_MESSAGE = 2000            # characters of a failure's message
MAX_FILENAME = 1024           # characters of a job's file name (the API takes no longer)
MAX_PASSWORD = 255            # characters of a job's Document-Password (the API takes no longer)
MAX_FIDELITY = 256 * 1024     # bytes of a fidelity report, as JSON
MAX_RESTARTS = 100

log = logging.getLogger("docshift.queue")


def queue_keys(config: Settings) -> list[bytes]:
    """The keys every message and Redis entry is sealed with (the first) and opened with (any):
    ``DOCSHIFT_QUEUE_KEY``, comma-separated, the one secret a node shares with its coordinator."""
    return [key.strip().encode() for key in config.queue_key.split(",") if key.strip()]


def fingerprint(key: bytes) -> str:
    """A name for one queue key that gives nothing of it away, so that two processes can tell
    whether they hold the same one."""
    return hmac.new(key, b"docshift queue key fingerprint", hashlib.sha256).hexdigest()[:16]


class Seal:
    """Seals dicts as JSON in a Fernet token (AES-CBC, authenticated with HMAC-SHA256): only the
    holders of the queue key can make one or read one (a job carries links to a customer's
    input). ``purpose`` derives a key of its own per use, so that a sealed entry of one kind is
    never taken for another. Sealed with the first of ``keys``, opened with any; with ``ttl``,
    one sealed more than ``ttl`` seconds ago is refused (by the time in the token, signed with it)."""

    def __init__(self, keys: bytes | Sequence[bytes], purpose: str, ttl: float | None = None) -> None:
        keys = [keys] if isinstance(keys, bytes) else list(keys)
        if not keys:
            raise ValueError("no queue key")
        self._fernet = MultiFernet([Fernet(base64.urlsafe_b64encode(hmac.new(key, purpose.encode(),
                                                                             hashlib.sha256).digest()))
                                    for key in keys])
        self.ttl = ttl

    def wrap(self, fields: dict[str, Any]) -> bytes:
        return self._fernet.encrypt(json.dumps(fields, separators=(",", ":")).encode())

    def unwrap(self, blob: bytes) -> dict[str, Any]:
        try:
            plain = self._fernet.decrypt(bytes(blob))
            sealed_at = self._fernet.extract_timestamp(bytes(blob)) if self.ttl is not None else None
        except (InvalidToken, TypeError):
            raise ForgedMessage("not sealed with the queue key") from None
        # Fernet's own ttl would also refuse a token a minute "from the future": a node whose clock
        # runs behind would drop every job, so only the age is checked
        age = None if sealed_at is None else time.time() - sealed_at
        if age is not None and self.ttl is not None and age > self.ttl:
            raise ForgedMessage(f"sealed {age:.0f} s ago, older than the {self.ttl:.0f} s a message lives: "
                                "replayed or left behind")
        try:
            fields = json.loads(plain)
        except ValueError as error:
            raise ForgedMessage(f"sealed, but not JSON: {error}") from error
        if not isinstance(fields, dict):
            raise ForgedMessage("sealed, but not a JSON object")
        return fields


# huey's Message fields that are plain values; pipelines, error handlers and chords are never used
_PLAIN = ("id", "name", "retries", "retry_delay", "priority", "expires", "timeout", "retry_backoff")
_TIMES = ("eta", "expires_resolved")


class SealedJSON(Serializer):
    """huey's serializer for the queue named ``queue``: each Message as its plain fields in JSON,
    sealed. Refuses to write what it could not read back as plain data. What it cannot read as a
    message of ours it logs and raises ``ForgedMessage`` for: huey has taken it off the queue by
    then, and drops it (its consumer and scheduler log the error and go on), so it never runs."""

    def __init__(self, keys: bytes | Sequence[bytes], queue: str | None, ttl: float | None = None) -> None:
        super().__init__()
        self.queue = queue
        self.seal = Seal(keys, f"queue:{queue}", ttl)

    def _serialize(self, message: Any) -> bytes:
        if not isinstance(message, Message) or message.on_complete or message.on_error or message.chord_config:
            raise TypeError("only plain task messages go through docshift's queues")
        fields = {name: getattr(message, name) for name in _PLAIN}
        fields.update({name: getattr(message, name) and getattr(message, name).isoformat() for name in _TIMES})
        fields.update(args=list(message.args), kwargs=message.kwargs)
        return self.seal.wrap(fields)

    def _deserialize(self, data: bytes) -> Any:
        try:
            return self._message(self.seal.unwrap(data))
        except ForgedMessage as error:
            log.warning("queue message dropped (%s): %s", self.queue, error)
            raise

    @staticmethod
    def _message(fields: dict[str, Any]) -> Message:
        try:
            plain = {name: _scalar(fields[name]) for name in _PLAIN}
            times = {name: fields[name] and datetime.fromisoformat(fields[name]) for name in _TIMES}
            args, kwargs = fields["args"], fields["kwargs"]
            if not isinstance(args, list) or not isinstance(kwargs, dict) or not isinstance(plain["name"], str):
                raise TypeError("args, kwargs or name of the wrong type")
        except (KeyError, TypeError, ValueError) as error:
            raise ForgedMessage(f"sealed, but not a message of ours: {error!r}") from error
        return Message(args=tuple(args), kwargs=kwargs, on_complete=None, on_error=None, chord_config=None,
                       **plain, **times)


def _scalar(value: Any) -> Any:
    if value is not None and not isinstance(value, (str, int, float)):
        raise TypeError(f"{type(value).__name__} where a plain value belongs")
    return value


def job(fields: Any) -> dict[str, Any]:
    """A conversion job as a node takes it (see ``nodes.Coordinator.dispatch``), each value checked."""
    checks: dict[str, Callable[[Any], bool]] = {
        "task_id": _match(TASK_ID), "kind": lambda v: v in FORMATS, "macros": lambda v: v in list(Macros),
        "holder": _match(HOLDER), "attempt": _count, "input": _match(LINK), "result": _match(LINK),
        "tenant": _match(ACCOUNT_ID),
        # the customer's file name: made safe again where it becomes a path (``formats.source_name``)
        "filename": lambda v: isinstance(v, str) and len(v) <= MAX_FILENAME,
        "protection": lambda v: v in list(Protection),
        "password": lambda v: isinstance(v, str) and 1 <= len(v) <= MAX_PASSWORD}
    # a job without a Document-Password has none; one from a coordinator before passwords keeps protection
    # nor a tenant: each file has a LibreOffice process of its own, whoever's it is
    return _checked("job", fields, checks,
                    required=[name for name in checks if name not in ("protection", "password", "tenant")])


def outcome(fields: Any, known: Iterable[str]) -> dict[str, Any]:
    """A node's outcome as the coordinator takes it: the lease it claims, and the ``known`` fields
    of an Outcome, checked where they reach the database, a link or a log, its status and code as their
    enums. Other fields are left out."""
    checks: dict[str, Callable[[Any], bool]] = {
        "task_id": _match(TASK_ID), "holder": _match(HOLDER), "attempt": _count,
        "status": lambda v: v in list(Verdict),
        "size": lambda v: v is None or (type(v) is int and 0 <= v <= 2**40),
        "code": lambda v: v is None or v in list(TaskErrorCode),
        "message": lambda v: v is None or (isinstance(v, str) and len(v) <= MAX_MESSAGE),
        "detected_format": lambda v: v is None or _match(DETECTED_FORMAT)(v),
        "extension": lambda v: v is None or v in MEDIA_TYPES,
        "fidelity": lambda v: v is None or (isinstance(v, dict) and len(json.dumps(v)) <= MAX_FIDELITY),
        "outage": lambda v: isinstance(v, bool),
        "preempted": lambda v: isinstance(v, bool),
        "restarts": lambda v: type(v) is int and 0 <= v <= MAX_RESTARTS,
        "fault": lambda v: v is None or (isinstance(v, str) and len(v) <= MAX_MESSAGE),
    }
    kept = {name: value for name, value in fields.items() if name in ("task_id", "holder", "attempt", *known)}
    checked = _checked("outcome", kept, checks, required=("task_id", "holder", "attempt", "status"))
    if checked["status"] == Verdict.SUCCEEDED and (checked.get("size") is None or checked.get("extension") is None):
        raise ForgedMessage("outcome: SUCCEEDED without the result's size and type")
    checked["status"] = Verdict(checked["status"])
    if checked.get("code") is not None:
        checked["code"] = TaskErrorCode(checked["code"])
    return checked


def outcome_fields(outcome_class: Any) -> tuple[str, ...]:
    return tuple(field.name for field in dataclass_fields(outcome_class))


def _checked(what: str, fields: Any, checks: dict[str, Callable[[Any], bool]],
             required: Collection[str]) -> dict[str, Any]:
    if not isinstance(fields, dict):
        raise ForgedMessage(f"{what}: not a JSON object")
    missing = [name for name in required if name not in fields]
    wrong = [name for name, value in fields.items() if name in checks and not checks[name](value)]
    if missing or wrong:
        raise ForgedMessage(f"{what}: missing {missing}, out of bounds {wrong}")
    return fields


def _match(pattern: re.Pattern[str]) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, str) and pattern.fullmatch(value) is not None


def _count(value: Any) -> bool:
    return type(value) is int and 1 <= value <= 2**31
