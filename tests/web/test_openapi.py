"""The published OpenAPI document: valid, complete, served with its docs page, and
honoured by the live service under schemathesis."""

import os
import re
import subprocess
import sys
from pathlib import Path

import requests
from openapi_spec_validator import validate


def test_document_is_valid_openapi_3(client):
    response = client.get("/v1/openapi.json")  # public: no Authorization
    assert response.status_code == 200
    document = response.get_json()
    validate(document)
    assert document["openapi"].startswith("3.0")


def test_document_covers_every_endpoint_header_and_error(app, client):
    document = client.get("/v1/openapi.json").get_json()
    post = document["paths"]["/v1/conversions"]["post"]
    # the limit for programs (the client checks a file against it before sending), and in words
    part = post["requestBody"]["content"]["multipart/form-data"]["schema"]["properties"]["file"]
    assert part["x-max-bytes"] == app.config["DOCSHIFT"].max_upload_bytes and "MiB" in part["description"]
    assert [(p["in"], p["name"]) for p in post["parameters"]] == [
        ("header", "Idempotency-Key"), ("header", "Document-Password"), ("query", "macros"), ("query", "protection")]
    assert "0x21-0x7E" in post["parameters"][0]["description"]
    assert post["parameters"][2]["schema"]["enum"] == post["parameters"][3]["schema"]["enum"] == ["keep", "remove"]
    assert "sealed" in post["parameters"][1]["description"]
    assert set(post["responses"]["202"]["headers"]) == {"Location", "Idempotent-Replayed"}
    assert set(post["responses"]) == {"202", "400", "401", "403", "413", "415", "422", "429", "500", "503"}
    assert "Retry-After" in post["responses"]["429"]["headers"]
    get = document["paths"]["/v1/conversions/{task_id}"]["get"]
    assert "Retry-After" in get["responses"]["200"]["headers"]
    assert set(get["responses"]) == {"200", "401", "403", "404", "500", "503"}
    assert set(document["paths"]["/v1/account/usage"]["get"]["responses"]) == {"200", "401", "403", "500", "503"}
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert document["paths"]["/v1/openapi.json"]["get"]["security"] == []
    # the schemas are the ones the views serialise with
    task = document["components"]["schemas"]["Task"]["properties"]
    assert {"task_id", "status", "download_url", "download_expires_in", "billing_class", "error", "result_filename",
            "fidelity"} <= set(task)
    fidelity = document["components"]["schemas"]["Fidelity"]
    assert set(fidelity["required"]) == {"complete", "counts", "lost"}
    # OpenAPI's format for a link is uri (apispec says "url" for marshmallow's Url)
    assert task["download_url"]["format"] == "uri"
    assert document["components"]["schemas"]["Submission"]["properties"]["status_url"]["format"] == "uri"


def test_every_problem_type_is_a_page_that_says_what_it_means(client):
    """A problem's ``type`` (``/problems/missing_api_key``) answered 404: RFC 9457 would have it lead to its
    documentation. Each code's page names its title and status; a code that is none is a 404 problem."""
    from docshift.contract import ProblemCode
    from docshift.web.problems import STATUS

    answered = client.get("/v1/account/usage")
    assert answered.status_code == 401
    page = client.get(answered.get_json()["type"])
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert "<h1>Missing API key</h1>" in page.get_data(as_text=True)
    for code in ProblemCode:
        page = client.get(f"/problems/{code}")
        text = page.get_data(as_text=True)
        assert page.status_code == 200 and f"HTTP {STATUS[code]}, <code>{code}</code>" in text, code
        assert "`" not in text and "<p></p>" not in text
    unknown = client.get("/problems/no_such_code")
    assert unknown.status_code == 404 and unknown.get_json()["code"] == "not_found"


def test_docs_page_serves_its_own_assets(client):
    page = client.get("/docs").get_data(as_text=True)
    assert "/docs/assets/swagger-ui-bundle.js" in page and "http" not in page.split("<body>")[1]
    for asset in ("/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css", "/docs/ui.js"):
        response = client.get(asset)
        assert (response.status_code == 200 and response.content_length) or response.get_data()
        response.close()


def test_schemathesis_finds_no_server_error_and_no_undocumented_response(live, tmp_path):
    key = live.register("schemathesis")
    st = Path(sys.executable).parent / "st"
    run = subprocess.run(
        [str(st), "run", f"{live.base_url}/v1/openapi.json", "--url", live.base_url,
         "-H", f"Authorization: Bearer {key}", "--max-examples", "25", "--seed", "1",
         "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,"
                     "response_schema_conformance,response_headers_conformance",
         "--request-timeout", "30"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path, env={**os.environ, "NO_COLOR": "1"})
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    generated, passed = re.search(r"(\d+) generated, (\d+) passed", run.stdout).groups()
    assert int(generated) >= 50 and passed == generated
    assert requests.get(f"{live.base_url}/healthz", timeout=5).status_code == 200
