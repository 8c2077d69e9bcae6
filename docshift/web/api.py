"""API v1: submit a conversion, poll it, check usage."""

import hashlib
import json
import logging
import unicodedata
from pathlib import PurePosixPath
from typing import Any, cast
from urllib.parse import quote

from flask import Blueprint, g, request
from flask.typing import ResponseReturnValue
from marshmallow import EXCLUDE, ValidationError

from docshift import formats, passwords, storage
from docshift.accounts import keys
from docshift.contract import TASK_ID, UNFINISHED, WITH_RESULT, Macros, Protection, Status, TaskErrorCode
from docshift.errors import (
    FileTooLarge,
    IdempotencyConflict,
    IdempotencyKeyTaken,
    InvalidApiKey,
    InvalidRequest,
    MissingApiKey,
    SubscriptionInactive,
    TaskNotFound,
    TooManyTasks,
    TooManyUnfinished,
    UnsupportedFileType,
)
from docshift.storage import accounts, connection, periods, tasks
from docshift.storage.connection import Row
from docshift.storage.tasks import Task
from docshift.web import schemas
from docshift.web.context import get_db, get_queue, get_settings, get_store
from docshift.web.forms import sent_filename
from docshift.web.problems import upload_limit

log = logging.getLogger("docshift.api")
bp = Blueprint("v1", __name__, url_prefix="/v1")

RETRY_AFTER = 2  # seconds a client should wait before polling again, or before resubmitting after a 429
# made once: a schema's construction deep-copies its fields, a fifth of a status read's CPU when made per request
SUBMISSION_HEADERS, SUBMISSION_QUERY = schemas.SubmissionHeaders(), schemas.SubmissionQuery()
SUBMISSION, TASK, USAGE = schemas.Submission(), schemas.Task(), schemas.Usage()


@bp.before_request
def authenticate() -> None:
    g.account = authenticated_account()


def authenticated_account() -> Row:
    """The active account behind the request's Bearer key, or the matching ApiError."""
    scheme, _, key = request.headers.get("Authorization", "").partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        raise MissingApiKey("Send the header Authorization: Bearer <API_KEY>.")
    if not keys.well_formed(key):  # a mistyped key never reaches the database
        raise InvalidApiKey("The API key is not valid.")
    account = accounts.account_for_key(get_db(), keys.digest(key))
    if account is None:
        raise InvalidApiKey("The API key is not valid.")
    if account["status"] != "active":
        raise SubscriptionInactive(
            f"The subscription is {account['status']}; wait briefly and retry, then check the agreement.")
    if not account["plan"]:  # active without an entitlement: nothing to count conversions against
        raise SubscriptionInactive("The account has no plan yet; check the agreement with the marketplace.")
    return account


@bp.post("/conversions")
def submit() -> ResponseReturnValue:
    idempotency_key = _idempotency_key()
    macros, protection = _options()
    password = _document_password()
    cap = int(get_settings().max_pending_tasks)
    # from the headers, before the body is read (or waited for): an account at its cap costs a query, not an
    # upload; a retry of a task already accepted (its Idempotency-Key) is still answered with that task
    if tasks.unfinished_count(get_db(), g.account["id"]) >= cap and not (
            idempotency_key and tasks.task_by_idempotency_key(get_db(), g.account["id"], idempotency_key)):
        raise _too_many(cap)
    _plain_body()
    upload = _single_file()
    sent = sent_filename(upload)
    filename = clean_filename(sent)
    found = formats.by_filename(filename)
    if found is None:
        raise UnsupportedFileType("The file name must end in .doc, .xls or .ppt.")
    limit = get_settings().max_upload_bytes
    data = upload.stream.read(limit + 1)
    if len(data) > limit:
        raise FileTooLarge(f"The file is larger than the {upload_limit(limit)} limit.")
    if not data:
        raise InvalidRequest("The file is empty.")
    digest = hashlib.sha256(data).hexdigest()
    account = g.account
    conn = get_db()
    # what a replay compares: the payload, and of the password only its keyed hash
    # and of the name the one sent, not the one kept: cleaning and shortening can make two names one
    payload = {"source_sha256": digest, "source_filename": filename, "macros": macros, "protection": protection,
               "password_digest": passwords.digest(get_settings(), password),
               "filename_digest": hashlib.sha256(sent.encode("utf-8", "surrogatepass")).hexdigest()}

    if idempotency_key:
        existing = tasks.task_by_idempotency_key(conn, account["id"], idempotency_key)
        if existing:
            return _replay(existing, payload)

    # reached while the body came: nothing is stored. A keyed request leaves the cap to its row's transaction, where
    # an identical request that committed meanwhile is its answer, not a 429
    if not idempotency_key and tasks.unfinished_count(conn, account["id"]) >= cap:
        raise _too_many(cap)
    try:
        task = storage.submit_task(conn, get_store(), account_id=account["id"], filename=filename,
                                   kind=found.kind, data=data, sha256=digest, idempotency_key=idempotency_key,
                                   max_unfinished=cap, macros=macros, protection=protection,
                                   sealed_password=password and passwords.seal(get_settings(), password),
                                   password_digest=payload["password_digest"],
                                   filename_digest=payload["filename_digest"])
    except IdempotencyKeyTaken:
        # an identical request committed first: ours is undone, theirs is the answer
        # taken: the key is set, and the row that took it committed
        return _replay(tasks.task_by_idempotency_key(conn, account["id"], idempotency_key),  # type: ignore[arg-type]
                       payload)
    except TooManyUnfinished:
        raise _too_many(cap) from None  # a racing submission took the last place; ours is undone

    # row first, enqueue second: a lost enqueue is recovered by the worker's sweep
    try:
        get_queue().enqueue(task.id)
    except Exception:
        log.exception("enqueue of %s failed; the sweep will pick it up", task.id)
    log.info("task %s queued for account %s (%s, %d bytes)", task.id, account["id"], found.kind, len(data))
    return _submission(task, replay=False)


def _too_many(cap: int) -> TooManyTasks:
    return TooManyTasks(f"This account already has {cap} tasks queued or processing; retry when some have "
                        "finished.", headers={"Retry-After": str(RETRY_AFTER)})


def _idempotency_key() -> str | None:
    raw = request.headers.get("Idempotency-Key")
    if raw is None:
        return None
    try:
        return SUBMISSION_HEADERS.load({"Idempotency-Key": raw})["idempotency_key"]
    except ValidationError as error:
        raise InvalidRequest(schemas.IDEMPOTENCY_KEY_RULE) from error


def _options() -> tuple[Macros, Protection]:
    """The query's ``macros`` and ``protection``, each given at most once: of ``?macros=keep&macros=remove`` no
    value is more the client's than the other."""
    for name, rule in (("macros", schemas.MACROS_RULE), ("protection", schemas.PROTECTION_RULE)):
        if len(request.args.getlist(name)) > 1:
            raise InvalidRequest(f"{rule} Give it once.")
    try:
        options = SUBMISSION_QUERY.load(request.args.to_dict(), unknown=EXCLUDE)
    except ValidationError as error:
        rule = schemas.MACROS_RULE if "macros" in error.messages else schemas.PROTECTION_RULE
        raise InvalidRequest(rule) from error
    return options["macros"], options["protection"]


def _document_password() -> str | None:
    """The ``Document-Password`` header's password; never logged, and no message repeats it."""
    raw = request.headers.get(passwords.HEADER)
    if raw is None:
        return None
    try:
        return passwords.from_header(raw)
    except ValueError:
        raise InvalidRequest(passwords.RULE) from None


def _plain_body() -> None:
    """A body coded in a way it would have to be undone (gzip) is refused before it is read: read as it is, it held
    no form part, and the client was told to send one."""
    codings = [coding.strip().lower() for header in ("Content-Encoding", "Transfer-Encoding")
               for coding in request.headers.get(header, "").split(",") if coding.strip()]
    if coded := [coding for coding in codings if coding not in ("identity", "chunked")]:
        raise InvalidRequest(f"The body is sent {', '.join(coded)}-coded: send it as it is, with a Content-Length "
                             "or in chunks.")


def _single_file() -> Any:
    if request.mimetype != "multipart/form-data":
        raise InvalidRequest("Send the file as multipart/form-data with one part named 'file'.")
    files, form = request.files, request.form
    if form or list(files.keys()) != ["file"] or len(files.getlist("file")) != 1:
        raise InvalidRequest("Send exactly one form part, named 'file', holding the file.")
    return files["file"]


def _replay(task: Task, payload: dict[str, Any]) -> ResponseReturnValue:
    if task.source_sha256 != payload["source_sha256"] or task.source_filename != payload["source_filename"] or \
            task.filename_digest not in (None, payload["filename_digest"]):  # None: a task stored before it was kept
        raise IdempotencyConflict(
            "This Idempotency-Key was already used with another file; use a new key per file.")
    for option, value in (("macros", task.macros), ("protection", task.protection)):
        if value != payload[option]:
            raise IdempotencyConflict(f"This Idempotency-Key was already used with {option}={value}; use a "
                                      "new key to change it.")
    if task.password_digest != payload["password_digest"]:
        raise IdempotencyConflict(f"This Idempotency-Key was already used with another {passwords.HEADER}; use a "
                                  "new key to change it.")
    return _submission(task, replay=True)


def _submission(task: Task, replay: bool) -> tuple[dict[str, Any], int, dict[str, str]]:
    status_url = task_url(task.id)
    body = SUBMISSION.dump({"task_id": task.id, "status": task.status, "status_url": status_url,
                            "idempotent_replay": replay})
    headers = {"Location": status_url}
    if replay:
        headers["Idempotent-Replayed"] = "true"
    return body, 202, headers


@bp.get("/conversions/<task_id>")
def task(task_id: str) -> ResponseReturnValue:
    row = tasks.get_task(get_db(), task_id, g.account["id"]) if TASK_ID.fullmatch(task_id) else None
    if row is None:
        raise TaskNotFound("No task with this id exists for this account.")
    view = task_view(row)
    headers = {"Retry-After": str(RETRY_AFTER)} if view["status"] in UNFINISHED else {}
    return TASK.dump(view), 200, headers


def task_view(task: Task) -> dict[str, Any]:
    # a result past its retention is EXPIRED from that moment, whether or not the sweep has run;
    # so is one in its last second, for which no link can be signed (S3 signs to the second)
    status, signed_at = task.status, connection.now().replace(microsecond=0)
    if status == Status.SUCCEEDED:
        left = int((connection.parse(cast(str, task.result_expires_at)) - signed_at).total_seconds())
        if left < 1:
            status = Status.EXPIRED
    view: dict[str, Any] = {"task_id": task.id, "status": status, "source_filename": task.source_filename,
                            "created_at": task.created_at}
    if status in WITH_RESULT:
        extension = task.result_extension or formats.FORMATS[task.source_type].target
        view.update(billing_class=task.billing_class, result_size=task.result_size,
                    result_filename=formats.target_name(task.source_filename, extension),
                    result_expires_at=task.result_expires_at)
        if task.fidelity:
            view["fidelity"] = json.loads(task.fidelity)
    if status == Status.SUCCEEDED:
        # a link never outlives the result: one handed out late would download it until the sweep
        expires_in = min(get_settings().download_expires_in, left)
        view["download_url"] = get_store().presign_result(
            cast(str, task.result_key), content_disposition(task.source_filename, extension), extension, expires_in,
            signed_at)
        view["download_expires_in"] = expires_in
    if status == Status.FAILED:
        view["error"] = {"code": task.error_code, "message": task.error_message}
    if task.detected_format and (task.status in WITH_RESULT or task.error_code == TaskErrorCode.UNSUPPORTED_CONTENT):
        view["detected_format"] = task.detected_format
    return view


@bp.get("/account/usage")
def usage() -> ResponseReturnValue:
    account = g.account
    period = periods.usage_period(get_db(), account)
    quota = get_settings().plan_quotas[account["plan"]]
    return USAGE.dump({
        "plan": account["plan"], "subscription_status": account["status"],
        "included_quota": quota, "included_used": period["included_used"],
        "remaining": max(0, quota - period["included_used"]),
        "overage_used": period["overage_used"],
        "period_started_at": period["started_at"], "period_ends_at": period["ends_at"],
    })


# Unicode's Bidi_Control characters: the marks, embeddings, overrides and isolates that reorder what a name shows
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def public_base_url() -> str:
    """``DOCSHIFT_BASE_URL``, or the scheme and host the request came to (one the web answers to:
    ``TRUSTED_HOSTS``, else the request is a 400 before this)."""
    return (get_settings().base_url or request.host_url).rstrip("/")


def task_url(task_id: str) -> str:
    return f"{public_base_url()}/v1/conversions/{task_id}"


def clean_filename(name: str) -> str:
    """The last path component, without control characters or the marks that reorder text (a right-to-left
    override makes ``abc<RLO>cod.exe`` show as ``abcexe.doc``); what the client named its file. Other invisible
    characters stay: a zero-width joiner is part of an emoji's or a Persian word's spelling. Dots and spaces that end
    it go, as Windows drops them from a name it saves: ``report.doc.`` is ``report.doc``."""
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(c for c in name if unicodedata.category(c) not in ("Cc", "Cs") and c not in BIDI_CONTROLS).strip()
    name = name.rstrip(". ") or name
    if len(name) > 255:  # shorten the stem, keep the extension
        path = PurePosixPath(name)
        name = path.stem[:255 - len(path.suffix)] + path.suffix
    return name


def content_disposition(source_filename: str, extension: str) -> str:
    """``attachment; filename="<result_filename>"``; non-ASCII names add an RFC 6266 ``filename*``."""
    name = cast(str, formats.target_name(source_filename, extension))  # a task's source is of a type converted
    ascii_name = name.encode("ascii", "replace").decode().replace('"', "'").replace("\\", "_")
    value = f'attachment; filename="{ascii_name}"'
    if ascii_name != name:
        value += f"; filename*=UTF-8''{quote(name)}"
    return value
