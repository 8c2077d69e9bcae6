"""The API's words, one enumeration each: task statuses, billing classes, the options of a submission,
the codes of a FAILED task, and problem codes (problem+json ``code``, and ``type`` as ``/problems/<code>``);
and the one word a conversion node adds for its coordinator, what a run came to (``Verdict``); what a task id
looks like; and the problem+json document every error is.

The web, the OpenAPI document, storage and the client take them from here. A ``StrEnum`` member
is its value: it goes into JSON, SQL parameters and comparisons with a row's text as it is.
"""

import re
from enum import StrEnum
from typing import Any

# a task's id, as the service makes it (``docshift.storage.connection.new_id("tsk")``)
TASK_ID = re.compile(r"tsk_[0-9a-f]{24}")


def problem_document(code: str, title: str, status: int, detail: str | None) -> dict[str, Any]:
    """The body of an error (RFC 9457), ``code`` its extension member."""
    return {"type": f"/problems/{code}", "title": title, "status": status, "detail": detail, "code": str(code)}


class Status(StrEnum):
    """A task's state: QUEUED -> PROCESSING -> SUCCEEDED | FAILED, SUCCEEDED -> EXPIRED."""

    QUEUED = "QUEUED"
    PROCESSING = "PROCESSING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    EXPIRED = "EXPIRED"


# waiting or running: what the account's cap counts and what a client polls
UNFINISHED = (Status.QUEUED, Status.PROCESSING)
FINAL = (Status.SUCCEEDED, Status.FAILED, Status.EXPIRED)
# a task that made a result, retained or not: it carries its billing, size and fidelity
WITH_RESULT = (Status.SUCCEEDED, Status.EXPIRED)


class Verdict(StrEnum):
    """What one conversion run came to: a final state of the task, or RETRY (a transient failure:
    the task is queued again). A node reports it to its coordinator; no client ever sees RETRY."""

    SUCCEEDED = Status.SUCCEEDED.value
    FAILED = Status.FAILED.value
    RETRY = "RETRY"


class BillingClass(StrEnum):
    """How a success was counted: within the plan's quota, or beyond it."""

    INCLUDED = "INCLUDED"
    OVERAGE = "OVERAGE"


class Macros(StrEnum):
    """The ``macros`` option: what becomes of a source's VBA project. KEEP gives the macro-enabled type
    with every module; REMOVE the plain type, and the fidelity report says so."""

    KEEP = "keep"
    REMOVE = "remove"


class Protection(StrEnum):
    """The ``protection`` option: what becomes of a source's password protection once its
    Document-Password opened it. KEEP protects the result with the same password; REMOVE does not."""

    KEEP = "keep"
    REMOVE = "remove"


class TaskErrorCode(StrEnum):
    """Why a task is FAILED (``error.code``); a FAILED task is never billed."""

    UNSUPPORTED_CONTENT = "unsupported_content"
    ENCRYPTED_DOCUMENT = "encrypted_document"
    WRONG_PASSWORD = "wrong_password"
    ENCRYPTION_UNSUPPORTED = "encryption_unsupported"
    CONVERSION_FAILED = "conversion_failed"
    CONVERSION_TIMEOUT = "conversion_timeout"
    OUTPUT_INVALID = "output_invalid"
    SUBSCRIPTION_INACTIVE = "subscription_inactive"
    INPUT_MISSING = "input_missing"


# what each code means, for the OpenAPI document
TASK_ERROR_MEANINGS = {
    TaskErrorCode.UNSUPPORTED_CONTENT: "LibreOffice's type detection finds no document of the extension's family "
                                       "in the file (plain text, an image, another family); `detected_format` says "
                                       "what it found.",
    TaskErrorCode.ENCRYPTED_DOCUMENT: "The file is password-protected, and no `Document-Password` was given.",
    TaskErrorCode.WRONG_PASSWORD: "The `Document-Password` does not open the file.",
    TaskErrorCode.ENCRYPTION_UNSUPPORTED: "The file is protected in a way nothing here opens, even with the "
                                          "password (a key that would take more rounds to derive than Office's "
                                          "100,000, an unknown encryption).",
    TaskErrorCode.CONVERSION_FAILED: "LibreOffice could not read or convert the file, or crashed on it twice.",
    TaskErrorCode.CONVERSION_TIMEOUT: "The conversion took longer than the service's conversion timeout.",
    TaskErrorCode.OUTPUT_INVALID: "The result failed the checks against what LibreOffice loaded from the source.",
    TaskErrorCode.SUBSCRIPTION_INACTIVE: "The subscription became inactive before the conversion ran.",
    TaskErrorCode.INPUT_MISSING: "The stored upload was gone before the conversion ran (inputs are kept at most a "
                                 "day, for example after a long outage); submit the file again.",
}


class ProblemCode(StrEnum):
    """The ``code`` of every problem+json answer (its HTTP status: ``docshift.web.problems``)."""

    INVALID_REQUEST = "invalid_request"
    MISSING_API_KEY = "missing_api_key"
    INVALID_API_KEY = "invalid_api_key"
    SUBSCRIPTION_PENDING_OR_INACTIVE = "subscription_pending_or_inactive"
    TASK_NOT_FOUND = "task_not_found"
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    FILE_TOO_LARGE = "file_too_large"
    UNSUPPORTED_FILE_TYPE = "unsupported_file_type"
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    TOO_MANY_TASKS = "too_many_tasks"
    INTERNAL_ERROR = "internal_error"
    SERVICE_UNAVAILABLE = "service_unavailable"
