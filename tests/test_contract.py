"""The API's words and limits are written once: statuses, problem codes and task error codes are
one enumeration each (docshift.contract) that the schema, the web, the OpenAPI document and the
client use; every limit a message or the document states comes from the settings; every
exception lives in docshift.errors under one root, and only the web knows HTTP statuses."""

import importlib
import inspect
import pkgutil
import re

import pytest
import requests
from conftest import ROOT, Service

import docshift
import docshift.storage
from docshift import client as docshift_client
from docshift import errors, settings
from docshift.contract import TASK_ERROR_MEANINGS, BillingClass, ProblemCode, Status, TaskErrorCode
from docshift.web import problems


def modules():
    """Every module the host imports (engine/uno/ is files under LibreOffice's Python, no package)."""
    return [importlib.import_module(module.name) for package in (docshift, docshift.storage)
            for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")]


def schema_choices(table, column):
    """The values the CHECK constraint of ``table.column`` in schema.sql allows."""
    text = (ROOT / "schema.sql").read_text()
    body = text[text.index(f"CREATE TABLE IF NOT EXISTS {table} ("):]
    found = re.search(rf"\n\s+{column} TEXT[^\n]*CHECK \({column} IN \(([^)]*)\)\)", body)
    return [value.strip().strip("'") for value in found.group(1).split(",")]


def test_the_schema_allows_exactly_the_enumerated_statuses_and_billing_classes():
    assert schema_choices("conversions", "status") == list(Status)
    assert schema_choices("conversions", "billing_class") == list(BillingClass)


def test_the_openapi_document_states_the_enumerations(client):
    document = client.get("/v1/openapi.json").get_json()
    schemas = document["components"]["schemas"]
    assert schemas["Task"]["properties"]["status"]["enum"] == list(Status)
    assert schemas["Submission"]["properties"]["status"]["enum"] == list(Status)
    assert schemas["Task"]["properties"]["billing_class"]["enum"] == list(BillingClass)
    assert schemas["TaskError"]["properties"]["code"]["enum"] == list(TaskErrorCode)
    assert schemas["Usage"]["properties"]["plan"]["enum"] == list(settings.PLANS)
    described = {code for path in document["paths"].values() for operation in path.values()
                 for status, answer in operation["responses"].items() if status >= "400"
                 for code in re.match(r"`([^`]*)`", answer["description"]).group(1).split(", ")}
    assert described and described <= set(ProblemCode)


def test_every_code_has_its_status_meaning_and_hint():
    assert set(problems.STATUS) == set(ProblemCode)
    assert set(TASK_ERROR_MEANINGS) == set(TaskErrorCode)
    assert set(ProblemCode) <= set(docshift_client.HINTS)
    assert set(docshift_client.FAILURE_HINTS) == set(TaskErrorCode)
    api_errors = [kind for kind in vars(errors).values()
                  if inspect.isclass(kind) and issubclass(kind, errors.ApiError) and kind is not errors.ApiError]
    assert sorted(kind.code for kind in api_errors) == sorted(set(ProblemCode) - {ProblemCode.INTERNAL_ERROR})


def test_every_exception_lives_in_errors_under_one_root():
    outside = [f"{module.__name__}.{name}" for module in modules() for name, kind in vars(module).items()
               if inspect.isclass(kind) and issubclass(kind, BaseException) and kind.__module__ == module.__name__
               and module is not errors]
    assert outside == []
    ours = [kind for kind in vars(errors).values()
            if inspect.isclass(kind) and issubclass(kind, BaseException) and kind.__module__ == errors.__name__]
    assert len(ours) > 20 and all(issubclass(kind, errors.DocshiftError) for kind in ours)
    # which HTTP status an error answers with is the web's to say (docshift.web.problems)
    assert [kind.__name__ for kind in ours if hasattr(kind, "status")] == []


def test_the_limits_the_api_states_are_the_configured_ones(s3, tmp_path, monkeypatch, capsys):
    limit, ttl = 1024 * 1024, 2 * settings.MIN_IDEMPOTENCY_KEY_TTL
    service = Service(tmp_path / "small", s3["env"], MAX_UPLOAD_BYTES=limit, MAX_PENDING_TASKS=7,
                      IDEMPOTENCY_KEY_TTL_SECONDS=ttl, DOWNLOAD_EXPIRES_IN=120)
    try:
        service.start_web()
        service.wait_healthy_web()
        stated = "1 MiB (1,048,576 bytes)"
        document = requests.get(f"{service.base_url}/v1/openapi.json", timeout=10).json()
        post = document["paths"]["/v1/conversions"]["post"]
        assert stated in post["responses"]["413"]["description"]
        assert "7 tasks" in post["responses"]["429"]["description"]
        assert f"{ttl // settings.HOUR} hours" in post["description"]
        part = post["requestBody"]["content"]["multipart/form-data"]["schema"]["properties"]["file"]
        assert stated in part["description"]
        assert "120" in document["paths"]["/v1/conversions/{task_id}"]["get"]["description"]
        assert re.findall(r"4 MiB|24 hours|\b300\b", str(document)) == []

        key = service.register("small-limits")
        for size in (limit + 1, 2 * limit):  # refused by the view, and by werkzeug from the length
            answer = requests.post(f"{service.base_url}/v1/conversions", headers={"Authorization": f"Bearer {key}"},
                                   files={"file": ("big.doc", b"\0" * size)}, timeout=30)
            assert answer.status_code == 413 and stated in answer.json()["detail"], answer.text

        # the client has no settings of the service: it states what the service answered
        big = tmp_path / "big.doc"
        big.write_bytes(b"\0" * (limit + 1))
        monkeypatch.setenv("DOCSHIFT_URL", service.base_url)
        monkeypatch.setenv("DOCSHIFT_API_KEY", key)
        assert docshift_client.main(["convert", str(big), "--out", str(tmp_path / "out")]) == 1
        said = capsys.readouterr().err
        assert "file_too_large" in said and stated in said and "4 MiB" not in said
    finally:
        service.stop()


@pytest.mark.parametrize("name", ["client/__init__.py", "client/http.py", "web/openapi.py", "web/problems.py",
                                  "web/schemas.py"])
def test_no_limit_is_restated_as_a_literal(name):
    text = (ROOT / "docshift" / name).read_text()
    assert re.findall(r"4 MiB|4,194,304|24 hours|24 h\b|\b300\b|\(default 100\)", text) == []


def test_only_formats_names_libreoffice_filters():
    """The self-test's filters come from formats.py too (office.py sends them to the bridge)."""
    from docshift.formats import FORMATS

    filters = {name for f in FORMATS.values() for name in (f.legacy_filter, f.export_filter,
                                                             f.macro_enabled.export_filter)}
    offenders = [f"{path.relative_to(ROOT)}: {name}" for path in ROOT.glob("docshift/**/*.py")
                 if path.name != "formats.py" for name in filters if f'"{name}"' in path.read_text()]
    assert offenders == []


def test_every_part_the_report_counts_is_one_the_api_names():
    """The fidelity report's parts are the inventory's, for every kind; the API's schema validates ``what`` and the
    keys of ``counts`` against its own list, so a part counted but not named there would fail the response."""
    from docshift.engine.inventory.common import KINDS
    from docshift.web.schemas import FIDELITY_PARTS

    assert {what for parts in KINDS.values() for what in parts} == set(FIDELITY_PARTS)
