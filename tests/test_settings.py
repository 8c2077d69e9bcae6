"""Settings are one typed object, checked once when a process starts: a wrong value stops it,
naming its variable, and code reads typed attributes, never casting where it uses them."""

import dataclasses
import os
import re
import subprocess
import sys
from datetime import timedelta

import pytest
from conftest import ROOT

from docshift import settings
from docshift.errors import BadSetting


@pytest.mark.parametrize(("variable", "value"), [
    ("DOCSHIFT_WORKERS", "abc"),
    ("DOCSHIFT_MAX_PENDING_TASKS", "-1"),
    ("DOCSHIFT_CONVERSION_TIMEOUT", "0"),
    ("DOCSHIFT_MAX_UPLOAD_BYTES", "4MiB"),
    ("DOCSHIFT_S3_SECURE", "maybe"),
    ("DOCSHIFT_PORT", "70000"),
    ("DOCSHIFT_PLAN_QUOTAS", '{"starer": 3}'),
    ("DOCSHIFT_PLAN_QUOTAS", "starter=3"),
    # the contract promises a day at least
    ("DOCSHIFT_IDEMPOTENCY_KEY_TTL_SECONDS", "3600"),
    # links are made from these: a scheme and a host, or every link is broken
    ("DOCSHIFT_BASE_URL", "api.example.com"),
    ("DOCSHIFT_S3_PUBLIC_URL", "notaurl"),
    ("DOCSHIFT_S3_NODE_URL", "ftp://store:8333"),
    ("DOCSHIFT_MARKETPLACE", "azure"),
])
def test_a_bad_value_fails_with_the_variable_name(tmp_path, monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(BadSetting, match=variable):
        settings.load({"DATA_DIR": str(tmp_path)})


def test_a_bad_value_is_named_but_not_repeated(tmp_path, monkeypatch):
    """A wrong secret is not written into the error, which goes to a log."""
    monkeypatch.setenv("DOCSHIFT_S3_SECURE", "s3cret-by-mistake")
    with pytest.raises(BadSetting) as error:
        settings.load({"DATA_DIR": str(tmp_path)})
    assert "DOCSHIFT_S3_SECURE" in str(error.value) and "s3cret" not in str(error.value)


@pytest.mark.parametrize("argv", [["worker.py"], ["worker.py", "node"], ["-m", "flask", "--app", "app", "init-db"],
                                  ["-m", "gunicorn", "-c", "python:docshift.gunicorn_conf", "--bind", "127.0.0.1:0",
                                   "app:create_app()"]])
def test_a_process_with_a_bad_setting_does_not_start_and_says_which(tmp_path, argv):
    env = {"PATH": os.environ["PATH"], "DOCSHIFT_DATA_DIR": str(tmp_path), "DOCSHIFT_WORKERS": "two"}
    run = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "DOCSHIFT_WORKERS" in run.stderr, run.stderr[-2000:]
    assert "Traceback" not in run.stderr, run.stderr[-2000:]  # one line that says which, not a stack
    assert list(tmp_path.iterdir()) == []  # stopped before it made anything


def test_values_arrive_typed_whatever_the_environment_gives(tmp_path, monkeypatch):
    for name, value in {"WORKERS": "3", "SANDBOX": "off", "S3_SECURE": "true", "CONVERSION_TIMEOUT": "2.5",
                        "PLAN_QUOTAS": '{"team": 3000}', "BASE_URL": "", "URL": "http://the-clients-own"}.items():
        monkeypatch.setenv(f"DOCSHIFT_{name}", value)
    config = settings.load({"DATA_DIR": str(tmp_path), "MAX_PENDING_TASKS": "7"})
    assert (config.workers, config.sandbox, config.s3_secure, config.conversion_timeout) == (3, False, True, 2.5)
    assert config.max_pending_tasks == 7 and config.base_url is None
    assert config.plan_quotas == {**settings.PLANS, "team": 3000}
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.workers = 4
    with pytest.raises(BadSetting, match="WOKRERS"):  # a misspelt override is no silent default
        settings.load({"DATA_DIR": str(tmp_path), "WOKRERS": 2})


def test_secrets_stay_out_of_the_settings_repr(tmp_path):
    config = settings.load({"DATA_DIR": str(tmp_path), "METRICS_TOKEN": "scrape-me-token"})
    text = repr(config)
    assert "scrape-me-token" not in text and config.secret_key not in text and config.s3_secret_key not in text
    assert config.queue_key not in text and "max_upload_bytes" in text


def test_reading_the_environment_imports_no_flask(tmp_path):
    code = ("import sys\nfrom docshift import settings\nsettings.load({'DATA_DIR': sys.argv[1]})\n"
            "print(sorted(name for name in sys.modules if name.split('.')[0] in ('flask', 'werkzeug')))")
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=True)
    assert run.stdout.strip() == "[]"


@pytest.mark.parametrize(("beat", "silence"), [("HEARTBEAT_SECONDS", "WORKER_SILENCE_SECONDS"),
                                               ("NODE_HEARTBEAT_SECONDS", "NODE_SILENCE_SECONDS")])
def test_a_silence_no_longer_than_the_beat_is_refused(tmp_path, beat, silence):
    with pytest.raises(BadSetting, match=f"DOCSHIFT_{silence}.*DOCSHIFT_{beat}"):
        settings.load({"DATA_DIR": str(tmp_path), beat: 10, silence: 10})


def test_no_workers_is_refused_where_no_node_could_convert(tmp_path):
    """DOCSHIFT_WORKERS=0 leaves the conversions to nodes: on the SQLite queue, which no node reads, every file would
    stay QUEUED. On Redis it is a coordinator that converts nothing itself."""
    with pytest.raises(BadSetting, match=r"DOCSHIFT_WORKERS is 0.*QUEUE_URL"):
        settings.load({"DATA_DIR": str(tmp_path), "WORKERS": 0})
    config = settings.load({"DATA_DIR": str(tmp_path), "WORKERS": 0, "QUEUE_URL": "redis://127.0.0.1:6379/0",
                            "QUEUE_KEY": "k" * 40})
    assert config.workers == 0


def test_healthz_calls_the_worker_gone_after_the_silence_the_settings_give(s3, tmp_path):
    from docshift.storage import connection, liveness
    from docshift.web import create_app
    from docshift.web.context import get_db

    app = create_app({"DATA_DIR": str(tmp_path), "HEARTBEAT_SECONDS": 1, "WORKER_SILENCE_SECONDS": 5})
    client = app.test_client()
    for ago, verdict in ((10, "no recent heartbeat"), (2, "ok")):
        with app.app_context():
            liveness.heartbeat(get_db(), "worker", connection.now() - timedelta(seconds=ago))
        assert client.get("/healthz").get_json()["checks"]["worker"] == verdict, ago


def test_no_module_casts_a_setting_where_it_uses_it():
    """Settings are read as typed attributes: no ``config["X"]``, no ``int(config...)``. Flask's own
    keys (the settings object itself, its body limits, the hosts it answers to) are the exceptions."""
    flask_own = "|".join(("DOCSHIFT", "MAX_CONTENT_LENGTH", "MAX_FORM_PARTS", "SEND_FILE_MAX_AGE_DEFAULT",
                          "TRUSTED_HOSTS"))
    patterns = (r"\b(?:int|float|str|bool)\((?:self\.)?config\b",
                rf"config(?:\(\))?\[[\"'](?!(?:{flask_own})[\"'])", rf"config\.get\([\"'](?!(?:{flask_own})[\"'])")
    offenders = []
    for path in [ROOT / "app.py", ROOT / "worker.py", *ROOT.glob("docshift/**/*.py"), *ROOT.glob("storage/*.py")]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if any(re.search(pattern, line) for pattern in patterns):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def _readme_tables():
    """The README's configuration section as two lists of rows, the main table's and the advanced
    one's: each row the variables its first cell names."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    main, advanced = section.split("\n### Advanced settings\n", 1)

    def rows(part):
        return [re.findall(r"DOCSHIFT_[A-Z0-9_]+", line.split("|")[1])
                for line in part.splitlines() if line.startswith("| `DOCSHIFT_")]
    return rows(main), rows(advanced)


def test_every_setting_is_documented_once_and_the_main_table_stays_short():
    """An operator of one box reads one short table; everything else is in the advanced one. A setting
    added without a row, a row left behind by a removed setting, or a row naming two settings fails."""
    main, advanced = _readme_tables()
    named = [name for row in main + advanced for name in row]
    assert all(len(row) == 1 for row in main + advanced), [row for row in main + advanced if len(row) != 1]
    assert sorted(named) == sorted(set(named)), "a setting has two rows"
    assert set(named) == {f"DOCSHIFT_{name.upper()}" for name in settings.NAMES}
    assert len(main) <= 16, f"{len(main)} settings in the main table: the rest belong in the advanced one"


def test_the_readme_names_no_variable_that_nothing_reads():
    """Every ``DOCSHIFT_*`` the README mentions is a setting or one of the command-line client's own
    (a family, ``DOCSHIFT_AWS_*``, names at least one)."""
    variable = r"DOCSHIFT_[A-Z0-9_]*[A-Z0-9](?:_\*)?"
    client = {name for path in (ROOT / "docshift" / "client").glob("*.py")
              for name in re.findall(variable, path.read_text())}
    known = {f"DOCSHIFT_{name.upper()}" for name in settings.NAMES} | client
    unknown = [name for name in set(re.findall(variable, (ROOT / "README.md").read_text()))
               if not any(name == one or (name.endswith("*") and one.startswith(name[:-1])) for one in known)]
    assert unknown == []


def test_derived_defaults_follow_the_settings_they_derive_from(tmp_path):
    """Unset, the silences are so many beats and the request deadline carries the largest upload at
    a slow client's speed (never less than a minute); a value given is taken as it is."""
    config = settings.load({"DATA_DIR": str(tmp_path)})
    assert (config.worker_silence_seconds, config.node_silence_seconds, config.request_seconds) == (150, 15, 60)
    config = settings.load({"DATA_DIR": str(tmp_path), "HEARTBEAT_SECONDS": 20, "NODE_HEARTBEAT_SECONDS": 4,
                            "MAX_UPLOAD_BYTES": 20 * settings.MIB})
    assert (config.worker_silence_seconds, config.node_silence_seconds, config.request_seconds) == (300, 30, 300)
    config = settings.load({"DATA_DIR": str(tmp_path), "MAX_UPLOAD_BYTES": 1000, "REQUEST_SECONDS": 7,
                            "WORKER_SILENCE_SECONDS": 40})
    assert (config.request_seconds, config.worker_silence_seconds) == (7, 40)
    assert settings.load({"DATA_DIR": str(tmp_path), "MAX_UPLOAD_BYTES": 1000}).request_seconds == 60


def test_the_scratch_space_grows_with_the_upload_limit(tmp_path):
    """512 MB holds what 4 MiB uploads need; a 104 MB workbook needed more than 512 and converted in 800, so a
    higher upload limit brings eight times its size, and a value given is taken as it is."""
    def scratch(**given):
        return settings.load({"DATA_DIR": str(tmp_path), **given}).office_scratch_limit_mb

    assert scratch() == 512
    assert scratch(MAX_UPLOAD_BYTES=105 * settings.MIB) == 840
    assert scratch(MAX_UPLOAD_BYTES=105 * settings.MIB, OFFICE_SCRATCH_LIMIT_MB=300) == 300
