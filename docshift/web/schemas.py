"""Marshmallow schemas: what the API validates on the way in and sends on the way out."""

from marshmallow import Schema, ValidationError, fields, validate

STATUSES = ["QUEUED", "PROCESSING", "SUCCEEDED", "FAILED", "EXPIRED"]
IDEMPOTENCY_KEY_RULE = "Idempotency-Key must be 8 to 128 printable ASCII characters (0x21-0x7E)."


def _no_line_break(value):
    # "$" in the documented pattern also matches before a final newline
    if "\n" in value:
        raise ValidationError(IDEMPOTENCY_KEY_RULE)


class SubmissionHeaders(Schema):
    idempotency_key = fields.String(
        data_key="Idempotency-Key",
        validate=[validate.Regexp(r"^[\x21-\x7e]{8,128}$", error=IDEMPOTENCY_KEY_RULE), _no_line_break],
        metadata={"description": "Optional. 8-128 printable ASCII characters (0x21-0x7E), scoped to the "
                                 "account, kept 24 hours; one value per source file."})


class Submission(Schema):
    task_id = fields.String(required=True)
    status = fields.String(required=True, validate=validate.OneOf(STATUSES))
    status_url = fields.Url(required=True)
    idempotent_replay = fields.Boolean(required=True)


class TaskError(Schema):
    code = fields.String(required=True)
    message = fields.String(required=True)


class Task(Schema):
    task_id = fields.String(required=True)
    status = fields.String(required=True, validate=validate.OneOf(STATUSES))
    source_filename = fields.String(required=True)
    created_at = fields.String(required=True)
    billing_class = fields.String(validate=validate.OneOf(["INCLUDED", "OVERAGE"]))
    result_size = fields.Integer()
    download_url = fields.Url()
    download_expires_in = fields.Integer()
    result_expires_at = fields.String()
    error = fields.Nested(TaskError)
    detected_format = fields.String(metadata={
        "description": "What LibreOffice's type detection recognised in the upload, as a stable short name "
                       "(word-97, word-6-95, rtf, html, excel-biff8, excel-biff5, excel-biff2-4, "
                       "spreadsheetml-2003, powerpoint-97, ooxml, text, pdf, image, ...). On SUCCEEDED and "
                       "EXPIRED tasks and on FAILED unsupported_content.",
        "example": "rtf"})


class Usage(Schema):
    plan = fields.String(required=True, validate=validate.OneOf(["starter", "team", "business"]))
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
