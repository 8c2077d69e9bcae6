"""The OpenAPI 3.0 document of API v1, built by apispec from the marshmallow schemas
that the views really use, ``/docs``, which renders it with Swagger UI's assets
from the swagger-ui-bundle package (served by the app, no CDN), and ``/problems/<code>``,
the page each problem's ``type`` names (RFC 9457: its documentation, for people)."""

import html
from typing import Any

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Blueprint, Response, current_app, send_from_directory
from swagger_ui_bundle import swagger_ui_path

from docshift.contract import ProblemCode
from docshift.errors import ApiError, NotFound
from docshift.settings import HOUR, Settings
from docshift.web import schemas
from docshift.web.context import get_settings
from docshift.web.problems import STATUS, upload_limit

bp = Blueprint("openapi", __name__)


def problems(config: Settings) -> dict[int, str]:
    """What each documented error status of the API means, with the limits ``config`` sets."""
    return {
        400: "No or extra form parts, an empty file, a malformed Idempotency-Key, not multipart, "
             "`macros` or `protection` other than keep or remove, or given twice, a Document-Password that is not "
             "1-255 characters of UTF-8, a body that took over "
             f"{config.request_seconds:g} seconds to arrive, a Host header that names no host of the service.",
        401: "No or malformed Authorization; an unknown, mistyped or rotated key.",
        403: "The subscription is pending or inactive.",
        404: "No such task for this account (another account's task is not revealed).",
        413: f"The file is over {upload_limit(config.max_upload_bytes)}.",
        415: "The file name does not end in .doc, .xls or .ppt.",
        422: "The Idempotency-Key was used with another file, name, `macros`, `protection` or Document-Password.",
        429: f"The account already has {config.max_pending_tasks} tasks queued or processing "
             "(`DOCSHIFT_MAX_PENDING_TASKS`); nothing was stored. Retry after `Retry-After` seconds.",
        500: "The service failed to handle the request; it logged why. Retry, or give its operator the answer's "
             "X-Request-Id.",
        503: "The object store or the database is not answering; retry.",
    }


# where one status has several codes, what each of them means
CODE_MEANINGS = {
    ProblemCode.MISSING_API_KEY: "No Authorization header, or not `Bearer <key>`.",
    ProblemCode.INVALID_API_KEY: "An unknown, mistyped or rotated key.",
    ProblemCode.NOT_FOUND: "No such endpoint.",
    ProblemCode.METHOD_NOT_ALLOWED: "The endpoint does not take this method; the `Allow` header says which it takes.",
}


AUTH_ERRORS = (401, 403)


def problem(status: int, config: Settings) -> dict[str, Any]:
    # the codes of a status in the order ProblemCode lists them; 404 for a task is task_not_found
    codes = ", ".join(code for code in ProblemCode if STATUS[code] == status and code != ProblemCode.NOT_FOUND)
    answer = {"description": f"`{codes}`: {problems(config)[status]}",
              "content": {"application/problem+json": {"schema": "Problem"}}}
    if status in (429, 503):
        answer["headers"] = {"Retry-After": {"description": "Seconds to wait before trying again.",
                                             "schema": {"type": "integer"}}}
    return answer


def document(base_url: str, config: Settings) -> dict[str, Any]:
    spec = APISpec(
        title="docshift", version="1.0.0", openapi_version="3.0.3",
        info={"description": "Converts legacy Office files (.doc, .xls, .ppt) to OOXML, asynchronously: "
                             "submit one file, poll the task, download the result from a presigned link."},
        servers=[{"url": base_url}], plugins=[MarshmallowPlugin()])
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer",
                                                "description": "An API key, `dsk_...`, shown once at registration."})
    for name, schema in (("Submission", schemas.Submission), ("Task", schemas.Task), ("Usage", schemas.Usage),
                         ("Problem", schemas.Problem)):
        spec.components.schema(name, schema=schema)
    location = {"description": "The task's status URL.", "schema": {"type": "string", "format": "uri"}}

    spec.path("/v1/conversions", operations={"post": {
        "operationId": "submitConversion",
        "summary": "Submit one legacy file for conversion",
        "description": "202 means the input is stored and the task committed. With an `Idempotency-Key`, "
                       "the same key with the same file bytes and name returns the original task "
                       "(`idempotent_replay: true`, header `Idempotent-Replayed: true`) and is never "
                       f"charged twice; keys are kept {_duration(config.idempotency_key_ttl_seconds)}.",
        "parameters": [{"in": "header", "schema": schemas.SubmissionHeaders},
                       {"in": "query", "schema": schemas.SubmissionQuery}],
        "requestBody": {"required": True, "content": {"multipart/form-data": {
            "schema": {"type": "object", "required": ["file"], "additionalProperties": False,
                       "properties": {"file": {"type": "string", "format": "binary",
                                               # the limit for programs: the client checks it before sending
                                               "x-max-bytes": config.max_upload_bytes,
                                               "description": "Exactly one part, named `file`; its filename "
                                                              f"ends in .doc, .xls or .ppt; at most "
                                                              f"{upload_limit(config.max_upload_bytes)}."}}}}}},
        "responses": {
            "202": {"description": "Accepted (or replayed).", "content": {"application/json": {"schema": "Submission"}},
                    "links": {"GetTask": {"operationId": "getConversion",
                                          "parameters": {"task_id": "$response.body#/task_id"}}},
                    "headers": {"Location": location, "Idempotent-Replayed": {
                        "description": "`true` when this answers a replay.",
                        "schema": {"type": "string", "enum": ["true"]}}}},
            **{str(status): problem(status, config) for status in (400, *AUTH_ERRORS, 413, 415, 422, 429, 500, 503)},
        }}})
    spec.path("/v1/conversions/{task_id}", operations={"get": {
        "operationId": "getConversion",
        "summary": "Query a task",
        "description": "Poll while QUEUED or PROCESSING (every `Retry-After` seconds). A SUCCEEDED task "
                       "carries a fresh presigned `download_url`, valid `download_expires_in` seconds, on every "
                       f"query while the result is retained: {config.download_expires_in}, or the time left until "
                       "`result_expires_at` when that is less (a link never outlives the result).",
        "parameters": [{"in": "path", "name": "task_id", "required": True, "schema": {"type": "string"}}],
        "responses": {
            "200": {"description": "The task.", "content": {"application/json": {"schema": "Task"}},
                    "headers": {"Retry-After": {"description": "Seconds to wait before polling again; "
                                                               "only while QUEUED or PROCESSING.",
                                                "schema": {"type": "integer"}}}},
            **{str(status): problem(status, config) for status in (*AUTH_ERRORS, 404, 500, 503)},
        }}})
    spec.path("/v1/account/usage", operations={"get": {
        "operationId": "getUsage",
        "summary": "Plan and allowance of the current contract period",
        "responses": {"200": {"description": "Usage.", "content": {"application/json": {"schema": "Usage"}}},
                      **{str(status): problem(status, config) for status in (*AUTH_ERRORS, 500, 503)}}}})
    spec.path("/v1/openapi.json", operations={"get": {
        "operationId": "getOpenAPI", "summary": "This document", "security": [],
        "responses": {"200": {"description": "OpenAPI 3.0 document.",
                              "content": {"application/json": {"schema": {"type": "object"}}}}}}})
    result = spec.to_dict()
    result["security"] = [{"bearer": []}]
    return result


@bp.get("/v1/openapi.json")
def openapi_json() -> dict[str, Any]:
    from docshift.web.api import public_base_url

    return document(public_base_url(), get_settings())


def _duration(seconds: int) -> str:
    hours, rest = divmod(seconds, HOUR)
    return f"{hours} hours" if hours and not rest else f"{seconds} seconds"


DOCS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>docshift API v1</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/ui.js"></script>
</body></html>
"""


@bp.get("/docs")
@bp.get("/docs/")
def docs() -> Response:
    return Response(DOCS_PAGE, mimetype="text/html")


@bp.get("/docs/ui.js")
def docs_script() -> Response:
    # a file of its own, so that the page needs no inline script
    return Response('SwaggerUIBundle({url: "/v1/openapi.json", dom_id: "#ui"});\n', mimetype="text/javascript")


@bp.get("/docs/assets/<path:name>")
def docs_assets(name: str) -> Response:
    return send_from_directory(swagger_ui_path, name, max_age=current_app.config.get("SEND_FILE_MAX_AGE_DEFAULT"))


PROBLEM_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}: docshift API v1</title></head>
<body><h1>{title}</h1>
<p>HTTP {status}, <code>{code}</code> in the problem's <code>code</code> member.</p>
<p>{meaning}</p>
<p>Every error of the API: <a href="/docs">the API's documentation</a>.</p>
</body></html>
"""


@bp.get("/problems/<code>")
def problem_page(code: str) -> Response:
    """What a problem ``type`` (``/problems/<code>``) means, for the person who follows it."""
    if code not in set(ProblemCode):
        raise NotFound("No such problem type.")
    kinds: list[type[ApiError]] = [ApiError]
    for kind in kinds:  # every subclass, however deep
        kinds += kind.__subclasses__()
    titles = {kind.code: kind.title for kind in kinds}
    status = STATUS[ProblemCode(code)]
    meaning = CODE_MEANINGS.get(ProblemCode(code)) or problems(get_settings())[status]
    return Response(PROBLEM_PAGE.format(title=html.escape(titles[ProblemCode(code)]), status=status, code=code,
                                        meaning=html.escape(meaning).replace("`", "")), mimetype="text/html")
