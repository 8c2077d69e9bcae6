"""Metrics in Prometheus format and JSON logs with a request id; never a key, a token or content."""

import json
import subprocess
import sys
import time
from dataclasses import replace

import pytest
import requests
from conftest import ROOT, post_file

from docshift.accounts import marketplace


def metric(text, name, labels=""):
    for line in text.splitlines():
        if line.startswith(f"{name}{labels} ") or (not labels and line.startswith(f"{name} ")):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_metrics_of_a_live_service(live, legacy):
    key = live.register("metrics")
    task_id = live.submit(key, legacy["doc"]).json()["task_id"]
    live.wait(key, task_id)
    for _ in range(3):
        requests.get(f"{live.base_url}/v1/conversions/{task_id}", headers={"Authorization": f"Bearer {key}"},
                     timeout=10)
    text = requests.get(f"{live.base_url}/metrics", timeout=10).text
    assert metric(text, "docshift_tasks", '{state="SUCCEEDED",type="doc"}') >= 1
    assert metric(text, "docshift_queue_depth") is not None
    assert metric(text, "docshift_conversion_seconds_count") >= 1
    assert metric(text, "docshift_libreoffice_restarts_total") is not None
    assert metric(text, "docshift_runs_stopped_total") == 0
    polls = [line for line in text.splitlines() if line.startswith("docshift_http_request_duration_seconds_count")
             and 'endpoint="/v1/conversions/<task_id>"' in line and 'status="200"' in line]
    assert polls and float(polls[0].rsplit(" ", 1)[1]) >= 3  # from both gunicorn workers together
    assert key not in text


def test_metrics_token(app, client):
    app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], metrics_token="s3cret-metrics")
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", headers={"Authorization": "Bearer s3cret-metrics"}).status_code == 200


def test_beyond_loopback_the_web_needs_a_metrics_token(s3, tmp_path):
    """Listening on every interface (a PaaS's PORT), the web refuses to start without
    DOCSHIFT_METRICS_TOKEN, saying so; with it, /metrics answers only to the token."""
    from conftest import Service, wait_for

    service = Service(tmp_path / "open", s3["env"])
    service.env.pop("DOCSHIFT_METRICS_TOKEN", None)
    service.start_web(PORT=str(service.port))
    try:
        assert service.processes["web"].wait(60) != 0
        assert "DOCSHIFT_METRICS_TOKEN" in (service.data_dir / "web.log").read_text()
    finally:
        service.stop()

    service = Service(tmp_path / "guarded", s3["env"], METRICS_TOKEN="scrape-me")
    service.start_web(PORT=str(service.port))
    try:
        service.wait_healthy_web()
        assert requests.get(f"{service.base_url}/metrics", timeout=10).status_code == 404
        wait_for(lambda: requests.get(f"{service.base_url}/metrics", headers={"Authorization": "Bearer scrape-me"},
                                      timeout=10).status_code == 200, 10, "metrics with the token")
    finally:
        service.stop()


def test_the_database_figures_are_read_at_most_once_in_a_while(app, client, account):
    """A scrape reads the task tables once per DOCSHIFT_METRICS_CACHE_SECONDS, whoever asks."""
    app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], metrics_cache_seconds=3600)
    before = metric(client.get("/metrics").get_data(as_text=True), "docshift_queue_depth")
    assert post_file(client, account, b"queued", "q.doc").status_code == 202
    assert metric(client.get("/metrics").get_data(as_text=True), "docshift_queue_depth") == before
    app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], metrics_cache_seconds=0)
    assert metric(client.get("/metrics").get_data(as_text=True), "docshift_queue_depth") == before + 1


def test_two_web_processes_never_show_a_figure_going_back(app, client, account):
    """Each gunicorn worker kept its own figures: one read before a task came, one after, and scrapes that
    alternated between them went 1, 0, 1 (a counter read lower than the scrape before is a reset to Prometheus).
    The processes now share one snapshot, read once a while."""
    from docshift.web import create_app

    other = create_app({"TESTING": True, "DATA_DIR": app.config["DOCSHIFT"].data_dir,
                        "S3_BUCKET": app.config["DOCSHIFT"].s3_bucket})  # a second web process on the same data
    for web in (app, other):
        web.config["DOCSHIFT"] = replace(web.config["DOCSHIFT"], metrics_cache_seconds=2.0)

    def scrape(web):
        return metric(web.test_client().get("/metrics").get_data(as_text=True), "docshift_queue_depth")

    first = scrape(app)
    assert post_file(client, account, b"queued", "q.doc").status_code == 202
    seen = [first, scrape(other), scrape(app), scrape(other)]  # within the 2 s: one snapshot
    assert seen == sorted(seen), seen
    time.sleep(2.1)
    assert [scrape(other), scrape(app)] == [first + 1, first + 1]


def test_metrics_token_with_a_non_ascii_header(app, client):
    app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], metrics_token="s3cret-metrics")
    for value in ("Bearer s3cret-métrics", "Bearer \u2603", "B\xe9arer \xff"):
        response = client.get("/metrics", headers={"Authorization": value})
        assert response.status_code == 404 and response.get_json()["code"] == "not_found"


def test_json_logs_with_request_id_and_no_secrets(live, legacy):
    token = marketplace.LocalMarketplace(live.config()).issue_token("logged", "starter")
    key = requests.post(f"{live.base_url}/marketplace/register", data={"x-amzn-marketplace-token": token},
                        headers={"Accept": "application/json"}, timeout=10).json()["api_key"]
    answer = requests.get(f"{live.base_url}/v1/account/usage",
                          headers={"Authorization": f"Bearer {key}", "X-Request-Id": "trace-42"}, timeout=10)
    assert answer.headers["X-Request-Id"] == "trace-42"
    made = requests.get(f"{live.base_url}/healthz", timeout=10).headers["X-Request-Id"]
    assert len(made) == 16
    lines = [json.loads(line) for line in (live.data_dir / "web.log").read_text().splitlines()
             if line.startswith("{")]
    access = [line for line in lines if line["logger"] == "docshift.access"]
    assert any(line.get("request_id") == "trace-42" and "/v1/account/usage 200" in line["message"]
               for line in access)
    assert any(line.get("request_id") == made for line in access)
    log = (live.data_dir / "web.log").read_text()
    assert token not in log and key not in log


def test_every_process_writes_json_lines_only(live, legacy, s3):
    """Not only docshift's own loggers: gunicorn's (its start, its workers' lives), huey's warnings and
    SeaweedFS's output are JSON lines too, so a log pipeline that parses JSON loses no line. gunicorn's
    and weed's were plain text."""
    key = live.register("lines")
    live.wait(key, live.submit(key, legacy["xls"]).json()["task_id"])
    logs = {"web": live.data_dir / "web.log", "worker": live.data_dir / "worker.log",
            "objects": s3["data_dir"] / "weed.log"}
    loggers = set()
    for name, path in logs.items():
        for line in path.read_text().splitlines():
            assert line.startswith("{"), (name, line)
            loggers.add(json.loads(line)["logger"])
    assert {"gunicorn.error", "docshift.access", "docshift.tasks", "docshift.objectstore"} <= loggers


def test_first_requests_of_a_fresh_process_race_safely(s3, tmp_path):
    """Many threads of a new gunicorn worker answer their first requests at once: none may fail
    on making the latency histogram (it did: a DuplicateTimeseries turned a 202 into a 500)."""
    from concurrent.futures import ThreadPoolExecutor

    from conftest import Service

    for attempt in range(3):  # fresh processes each time: the race is in their first requests
        service = Service(tmp_path / f"svc{attempt}", s3["env"])
        service.start_web()
        try:
            service.wait_healthy_web()
            with ThreadPoolExecutor(32) as pool:
                codes = list(pool.map(lambda url: requests.get(url, timeout=10).status_code,
                                      [f"{service.base_url}/healthz"] * 64))
            assert set(codes) == {503}  # no worker runs here, so 503, and never a 500
        finally:
            service.stop()


FULL_DISK = """
import sys
from docshift.web import create_app
app = create_app({"TESTING": True, "DATA_DIR": sys.argv[1]})
for _ in range(3):
    answer = app.test_client().get("/v1/account/usage")
    print(answer.status_code, answer.content_type, flush=True)
"""


@pytest.mark.slow
def test_a_full_disk_under_the_metrics_files_still_gets_answers(tmp_path):
    """The latency histogram's file is on a disk with no room left (a tmpfs filled up, in a mount namespace of the
    test's own): the requests are answered, and the log says why no latency was recorded. prometheus_client's
    sparse file made each gunicorn worker die of SIGBUS on its first request, with no answer."""
    full = tmp_path / "full"
    full.mkdir()
    script = ('mount -t tmpfs -o size=256k tmpfs "$1" && { head -c 1048576 /dev/zero > "$1/fill" 2>/dev/null; '
              'PROMETHEUS_MULTIPROC_DIR="$1" exec "$2" -c "$3" "$4"; }')
    run = subprocess.run(["unshare", "--mount", "sh", "-c", script, "sh", str(full), sys.executable, FULL_DISK,
                          str(tmp_path / "data")], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    assert run.stdout.splitlines() == ["401 application/problem+json"] * 3
    assert "HTTP latency not recorded: No space left on device" in run.stderr
    assert "Traceback" not in run.stderr
