"""/metrics and /healthz's per-part report are for the operator: with DOCSHIFT_METRICS_TOKEN set,
/metrics asks everyone for it, whatever address the web listens on; without one, it answers
only a request made on loopback directly, not one a proxy passed on (a forwarding header says
so) or one from another machine. /healthz tells those only its status, and reads its checks
at most once a second or two."""

import time
from dataclasses import replace

import pytest
import requests
from conftest import Service

FORWARDED = [{"X-Forwarded-For": "203.0.113.9"}, {"Forwarded": "for=203.0.113.9"}, {"X-Real-IP": "203.0.113.9"}]
OUTSIDE = {"REMOTE_ADDR": "203.0.113.9"}


@pytest.mark.parametrize("headers", FORWARDED)
def test_without_a_token_metrics_are_not_for_a_proxied_request(client, headers):
    assert client.get("/metrics").status_code == 200
    answer = client.get("/metrics", headers=headers)
    assert answer.status_code == 404 and answer.get_json()["code"] == "not_found"


def test_without_a_token_metrics_are_not_for_another_machine(client):
    assert client.get("/metrics", environ_base=OUTSIDE).status_code == 404


def test_with_a_token_metrics_ask_for_it_even_on_loopback(app, client):
    app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], metrics_token="s3cret-metrics")
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", headers={"Authorization": "Bearer s3cret-metrics",
                                           **FORWARDED[0]}).status_code == 200


@pytest.mark.parametrize("outside", [{"headers": FORWARDED[0]}, {"headers": FORWARDED[1]},
                                     {"environ_base": OUTSIDE}])
def test_healthz_tells_the_outside_only_its_status(app, client, outside):
    answer = client.get("/healthz", **outside)
    assert answer.get_json() == {"status": "unavailable"} and answer.status_code == 503  # no worker here
    assert set(client.get("/healthz").get_json()["checks"]) == {"database", "worker", "engine", "sandbox", "disk",
                                                                "object_store"}
    app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], metrics_token="s3cret-metrics")
    given = client.get("/healthz", **{**outside, "headers": {"Authorization": "Bearer s3cret-metrics",
                                                             **outside.get("headers", {})}})
    assert "checks" in given.get_json() and given.status_code == 503


def test_beyond_loopback_healthz_reads_its_checks_at_most_once_a_second(app, client):
    """A flood of /healthz from outside costs a database read and a store ping a second at most;
    a request on loopback (the container's HEALTHCHECK, an operator) reads them afresh."""
    from docshift.storage.s3 import ObjectStore

    app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], metrics_token="s3cret-metrics")
    outside = {"environ_base": OUTSIDE, "headers": {"Authorization": "Bearer s3cret-metrics"}}
    assert client.get("/healthz", **outside).get_json()["checks"]["object_store"] == "ok"
    app.extensions["docshift.store"] = ObjectStore(replace(app.config["DOCSHIFT"], s3_endpoint="127.0.0.1:9",
                                                           s3_socket=None))
    assert client.get("/healthz", **outside).get_json()["checks"]["object_store"] == "ok"  # the last reading
    time.sleep(1.1)
    assert client.get("/healthz", **outside).get_json()["checks"]["object_store"].startswith("error")
    app.extensions["docshift.store"] = ObjectStore(app.config["DOCSHIFT"])
    assert client.get("/healthz").get_json()["checks"]["object_store"] == "ok"  # on loopback: at once


# the real gunicorn, listening on loopback ------------------------------------------------

@pytest.fixture(scope="module")
def guarded(s3, tmp_path_factory):
    service = Service(tmp_path_factory.mktemp("guarded"), s3["env"], METRICS_TOKEN="scrape-me")
    service.start_web()
    try:
        yield service.wait_healthy_web()
    finally:
        service.stop()


def test_on_loopback_with_a_token_metrics_ask_for_it(guarded):
    assert requests.get(f"{guarded.base_url}/metrics", timeout=10).status_code == 404
    assert requests.get(f"{guarded.base_url}/metrics", headers={"Authorization": "Bearer scrape-me"},
                        timeout=10).status_code == 200


@pytest.fixture(scope="module")
def open_web(s3, tmp_path_factory):
    service = Service(tmp_path_factory.mktemp("tokenless"), s3["env"])
    service.env.pop("DOCSHIFT_METRICS_TOKEN", None)
    service.start_web()
    try:
        yield service.wait_healthy_web()
    finally:
        service.stop()


@pytest.mark.parametrize("headers", FORWARDED)
def test_behind_a_proxy_on_loopback_without_a_token_nothing_internal_shows(open_web, headers):
    """nginx on the same box reaches the web on 127.0.0.1, and says whom it forwards."""
    assert requests.get(f"{open_web.base_url}/metrics", timeout=10).status_code == 200
    assert requests.get(f"{open_web.base_url}/metrics", headers=headers, timeout=10).status_code == 404
    health = requests.get(f"{open_web.base_url}/healthz", headers=headers, timeout=10)
    assert health.json() == {"status": "unavailable"} and health.status_code == 503  # the web alone
