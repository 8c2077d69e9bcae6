"""Every operator command works and is documented in the README."""

import os
import subprocess

import pytest
from click import Group
from conftest import ROOT

README = (ROOT / "README.md").read_text()


def commands(group, prefix=()):
    for name, command in group.commands.items():
        if isinstance(command, Group):
            yield from commands(command, prefix + (name,))
        else:
            yield " ".join(prefix + (name,)), command


@pytest.mark.parametrize("name", ["init-db", "marketplace issue-token", "marketplace set-plan",
                                  "marketplace activate", "marketplace deactivate", "accounts list",
                                  "usage report"])
def test_command_exists_has_help_and_is_documented(app, name):
    found = dict(commands(app.cli))
    assert name in found
    assert found[name].help
    assert f"`{name}" in README


def test_lifecycle_from_the_cli(app, client):
    from conftest import register

    key = register(client, app, "cli-customer")
    runner = app.test_cli_runner()
    auth = {"Authorization": f"Bearer {key}"}
    set_plan = ["marketplace", "set-plan", "--customer", "cli-customer", "--plan", "team"]
    assert runner.invoke(args=set_plan).exit_code == 0
    assert client.get("/v1/account/usage", headers=auth).get_json()["included_quota"] == 2500
    assert runner.invoke(args=["marketplace", "deactivate", "--customer", "cli-customer"]).exit_code == 0
    assert client.get("/v1/account/usage", headers=auth).status_code == 403
    assert runner.invoke(args=["marketplace", "activate", "--customer", "cli-customer"]).exit_code == 0
    assert client.get("/v1/account/usage", headers=auth).status_code == 200
    listing = runner.invoke(args=["accounts", "list"]).output
    assert "cli-customer  team  active" in listing
    report = runner.invoke(args=["usage", "report"]).output
    assert "cli-customer  team  included 0/2500  overage 0 (USD 0.00)" in report
    unknown = runner.invoke(args=["marketplace", "activate", "--customer", "nobody"])
    assert unknown.exit_code != 0 and "no account" in unknown.output


@pytest.mark.parametrize("customer", ["", " padded ", "tab\there"])
def test_a_customer_id_that_is_none_is_refused(app, customer):
    """An unset shell variable ($CUSTOMER) made an account whose id was ''."""
    runner = app.test_cli_runner()
    for args in (["marketplace", "issue-token", "--customer", customer, "--plan", "starter"],
                 ["marketplace", "set-plan", "--customer", customer, "--plan", "team"]):
        result = runner.invoke(args=args)
        assert result.exit_code == 2 and "is no customer id" in result.output, result.output


def test_a_link_for_an_existing_account_shows_the_plan_it_registers(app, client):
    """The local marketplace keeps an existing account's plan when it registers again (the operator's set-plan
    outlives an older link). A link issued with another plan showed that plan on its page and registered the
    account's: both now say the account's, and issue-token says why."""
    from conftest import register

    register(client, app, "plan-shown")
    issued = app.test_cli_runner().invoke(args=["marketplace", "issue-token", "--customer", "plan-shown",
                                                "--plan", "business"])
    assert issued.exit_code == 0
    assert "has an account already, on plan starter" in issued.output
    token = issued.output.strip().splitlines()[-1].split("token=", 1)[1]
    page = client.get(f"/marketplace/register?token={token}", headers={"Accept": "application/json"})
    assert page.get_json()["plan"] == "starter"
    done = client.post("/marketplace/register", data={"x-amzn-marketplace-token": token},
                       headers={"Accept": "application/json"})
    assert done.get_json()["plan"] == "starter"


def test_the_key_command_make_run_prints_signs_for_its_port_and_data_dir(tmp_path):
    """``make run`` prints the command that gets a key; run in another shell, which may not have the port and the data
    dir make was given, it printed a link to port 8000, signed with another data dir's secret. A data dir's name may
    hold a space."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCSHIFT_")}
    tmp_path = tmp_path / "data dir"
    shown = subprocess.run(["make", "-s", "-n", "run", "DOCSHIFT_PORT=8123", f"DOCSHIFT_DATA_DIR={tmp_path}"],
                           cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    line = next(line for line in shown.splitlines() if "get an API key:" in line)
    command = line.split("get an API key:", 1)[1].strip().rstrip('"')
    issued = subprocess.run(command, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert issued.returncode == 0, issued.stderr
    assert issued.stdout.strip().splitlines()[-1].startswith("http://127.0.0.1:8123/marketplace/register?token=")
    assert (tmp_path / "secret_key").exists()


@pytest.mark.parametrize(("seconds", "shown"),
                         [(86400, "24 h"), (5400, "1 h 30 min"), (60, "1 min"), (90, "1 min 30 s")])
def test_issue_token_says_how_long_the_link_lasts(app, seconds, shown):
    """A link valid for a minute was said to be valid "0 h"."""
    from dataclasses import replace

    app.config["DOCSHIFT"] = replace(app.config["DOCSHIFT"], registration_token_max_age=seconds)
    issued = app.test_cli_runner().invoke(args=["marketplace", "issue-token", "--customer", f"lasting-{seconds}",
                                                "--plan", "starter"])
    assert issued.exit_code == 0, issued.output
    assert f"valid {shown}:" in issued.output
