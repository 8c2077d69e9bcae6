"""Marshmallow schemas: what the API validates on the way in and sends on the way out."""

from marshmallow import Schema, ValidationError, fields, validate

from docshift.contract import TASK_ERROR_MEANINGS, BillingClass, Macros, Protection, Status, TaskErrorCode
from docshift.settings import PLANS

STATUSES = list(Status)
IDEMPOTENCY_KEY_RULE = "Idempotency-Key must be 8 to 128 printable ASCII characters (0x21-0x7E)."


def _no_line_break(value: str) -> None:
    # "$" in the documented pattern also matches before a final newline
    if "\n" in value:
        raise ValidationError(IDEMPOTENCY_KEY_RULE)


class SubmissionHeaders(Schema):
    idempotency_key = fields.String(
        data_key="Idempotency-Key",
        validate=[validate.Regexp(r"^[\x21-\x7e]{8,128}$", error=IDEMPOTENCY_KEY_RULE), _no_line_break],
        metadata={"description": "Optional. 8-128 printable ASCII characters (0x21-0x7E), scoped to the "
                                 "account, kept as long as the operation says; one value per source file."})


    document_password = fields.String(
        data_key="Document-Password", load_only=True,
        metadata={"description": "Optional. 1-255 characters of UTF-8: the password that opens a protected source "
                                 "(Word XOR, RC4 and CryptoAPI, Excel XOR, RC4 and CryptoAPI of any provider, "
                                 "PowerPoint CryptoAPI, an encrypted OOXML package). Never logged, never stored or "
                                 "queued in clear: sealed while the task waits, erased when it ends. Ignored for a "
                                 "file that is not protected. Part of what an Idempotency-Key replays (as a keyed "
                                 "hash)."})


MACROS_RULE = "macros must be 'keep' (the default) or 'remove'."
PROTECTION_RULE = "protection must be 'keep' (the default) or 'remove'."


class SubmissionQuery(Schema):
    macros = fields.Enum(
        Macros, by_value=fields.String, load_default=Macros.KEEP, error_messages={"unknown": MACROS_RULE},
        metadata={"description": "What becomes of a VBA project in the source: `keep` (the default) converts it to "
                                 "the macro-enabled type (.docm, .xlsm, .pptm) with every module; `remove` gives "
                                 "the plain type and the fidelity report says so. Macros are never run. Part of "
                                 "what an Idempotency-Key replays."})


    protection = fields.Enum(
        Protection, by_value=fields.String, load_default=Protection.KEEP, error_messages={"unknown": PROTECTION_RULE},
        metadata={"description": "What becomes of a source's password protection, when a Document-Password opened "
                                 "it: `keep` (the default) protects the result with the same password (OOXML agile "
                                 "encryption: Office asks for it); `remove` gives an unprotected result. Part of what "
                                 "an Idempotency-Key replays."})


class Submission(Schema):
    task_id = fields.String(required=True)
    status = fields.String(required=True, validate=validate.OneOf(STATUSES))
    status_url = fields.Url(required=True, metadata={"format": "uri"})
    idempotent_replay = fields.Boolean(required=True)


class TaskError(Schema):
    code = fields.String(required=True, validate=validate.OneOf(list(TaskErrorCode)), metadata={
        "description": "Why the task FAILED (a failure is never billed):\n\n"
                       + "".join(f"- `{code}`: {TASK_ERROR_MEANINGS[code]}\n" for code in TaskErrorCode)
                       + "\nA fault of the service (a full disk, an engine that cannot start) never fails a task: "
                         "it stays QUEUED or PROCESSING and is retried."})
    message = fields.String(required=True)


FIDELITY_PARTS = ["sheets", "cells", "slides", "notes", "characters", "images", "embedded_objects", "charts",
                  "shapes", "sounds", "comments", "headers_footers", "hyperlinks", "actions", "controls",
                  "macros", "macro_sheets", "dde_links"]


class PartCount(Schema):
    source = fields.Integer(required=True, allow_none=True, metadata={
        "description": "How many the legacy file holds, counted from the file itself; null where it could not be "
                       "read."})
    result = fields.Integer(required=True, allow_none=True, metadata={
        "description": "How many of them the result holds (for cells: how many are equal in the result)."})


class Loss(Schema):
    what = fields.String(required=True, validate=validate.OneOf([*FIDELITY_PARTS, "streams"]), metadata={
        "description": "The part missing or changed; `streams`: the file is damaged (its compound file structure "
                       "broken, as in a file cut short), and the result was made from the streams that could be "
                       "read, `count` of them left out."})
    count = fields.Integer(required=True)
    detail = fields.String(required=True, metadata={
        "example": "14 formula results differ from the source; first: sheet 'b' B1"})


class Fidelity(Schema):
    complete = fields.Boolean(required=True, metadata={
        "description": "False whenever anything the source holds is missing or changed in the result."})
    counts = fields.Dict(keys=fields.String(validate=validate.OneOf(FIDELITY_PARTS)), values=fields.Nested(PartCount),
                         required=True, metadata={"description": f"Per part ({', '.join(FIDELITY_PARTS)}), those "
                                                                 "that apply to the file's type."})
    lost = fields.List(fields.Nested(Loss), required=True, metadata={
        "description": "Each part missing or changed, how many, and where. Macros removed on request are listed "
                       "here too, without making the result incomplete."})


class Task(Schema):
    task_id = fields.String(required=True)
    status = fields.String(required=True, validate=validate.OneOf(STATUSES))
    source_filename = fields.String(required=True)
    created_at = fields.String(required=True)
    billing_class = fields.String(validate=validate.OneOf(list(BillingClass)))
    result_size = fields.Integer()
    result_filename = fields.String(metadata={
        "description": "`<source stem>.<docx|xlsx|pptx|docm|xlsm|pptm>`: the macro-enabled type when the source "
                       "carries a VBA project kept in the result.", "example": "report.docm"})
    fidelity = fields.Nested(Fidelity, metadata={
        "description": "SUCCEEDED and EXPIRED: what the source holds against what the result holds."})
    download_url = fields.Url(metadata={"format": "uri"})
    download_expires_in = fields.Integer(metadata={
        "description": "Seconds the `download_url` is valid: the service's link life (see getConversion), or "
                       "fewer when the result expires sooner."})
    result_expires_at = fields.String()
    error = fields.Nested(TaskError)
    detected_format = fields.String(metadata={
        "description": "What LibreOffice's type detection recognised in the upload, as a stable short name "
                       "(word-97, word-6-95, rtf, html, excel-biff8, excel-biff5, excel-biff2-4, "
                       "spreadsheetml-2003, powerpoint-97, ooxml, text, pdf, image, ...). On SUCCEEDED and "
                       "EXPIRED tasks and on FAILED unsupported_content.",
        "example": "rtf"})


class Usage(Schema):
    plan = fields.String(required=True, validate=validate.OneOf(list(PLANS)))
    subscription_status = fields.String(required=True)
    included_quota = fields.Integer(required=True)
    included_used = fields.Integer(required=True)
    remaining = fields.Integer(required=True)
    overage_used = fields.Integer(required=True)
    period_started_at = fields.String(required=True)
    period_ends_at = fields.String(required=True)


class Problem(Schema):
    type = fields.String(required=True)
    title = fields.String(required=True)
    status = fields.Integer(required=True)
    detail = fields.String(required=True)
    code = fields.String(required=True)
