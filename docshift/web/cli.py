"""The operator CLI, ``flask --app app ...``: the database, registration links, plans, usage."""

import click
from flask import Flask
from flask.cli import AppGroup, with_appcontext

from docshift import settings
from docshift.storage import accounts, connection, periods
from docshift.storage.connection import Row
from docshift.web.context import get_db, get_marketplace, get_settings


@click.command("init-db")
@with_appcontext
def init_db() -> None:
    """Create the tables from schema.sql (safe to run again)."""
    connection.init(get_db())
    click.echo(f"database ready: {get_settings().database}")


marketplace_cli = AppGroup("marketplace", help="Registration links, plans and subscription status.")
accounts_cli = AppGroup("accounts", help="Accounts of the marketplace's customers.")
usage_cli = AppGroup("usage", help="Allowance and overage per account.")
PLAN = click.Choice(sorted(settings.PLANS))


def register(app: Flask) -> None:
    for command in (init_db, marketplace_cli, accounts_cli, usage_cli):
        app.cli.add_command(command)


class CustomerId(click.ParamType):
    """A customer's id: not empty, no spaces around it, no control characters (an unset shell variable gave '')."""
    name = "customer"

    def convert(self, value: str, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if not value or value != value.strip() or not value.isprintable():
            self.fail(f"{value!r} is no customer id: give the id itself, with no spaces around it", param, ctx)
        return value


CUSTOMER = CustomerId()


@marketplace_cli.command("issue-token")
@click.option("--customer", type=CUSTOMER, required=True, help="The customer's id in your marketplace or CRM.")
@click.option("--plan", type=PLAN, required=True)
def issue_token(customer: str, plan: str) -> None:
    """Print a registration link; the customer opens it to get an API key."""
    token = get_marketplace().issue_token(customer, plan)  # type: ignore[union-attr]  # local only: AWS issues its own
    configured = get_settings()
    base = configured.base_url or f"http://127.0.0.1:{configured.port}"
    existing = accounts.find_account(get_db(), configured.marketplace, customer)
    if existing is not None and existing["plan"] != plan:
        plan = existing["plan"]
        click.echo(f"{customer} has an account already, on plan {plan}: the link gives it a new key on that plan "
                   "(set-plan changes the plan)")
    click.echo(f"registration link for {customer} ({plan}), valid {lasting(configured.registration_token_max_age)}:")
    click.echo(f"{base.rstrip('/')}/marketplace/register?token={token}")


def lasting(seconds: float) -> str:
    """A validity as the operator set it: ``24 h``, ``1 h 30 min``, ``60 s`` (not ``0 h``)."""
    whole = round(seconds)
    parts = [(whole // settings.HOUR, "h"), (whole % settings.HOUR // 60, "min"), (whole % 60, "s")]
    return " ".join(f"{amount} {unit}" for amount, unit in parts if amount) or "0 s"


def _account(customer: str) -> Row:
    account = accounts.find_account(get_db(), get_settings().marketplace, customer)
    if account is None:
        raise click.ClickException(f"no account for customer {customer!r} (has it registered?)")
    return account


@marketplace_cli.command("set-plan")
@click.option("--customer", type=CUSTOMER, required=True)
@click.option("--plan", type=PLAN, required=True)
def set_plan(customer: str, plan: str) -> None:
    """Change a customer's plan; the new quota applies at once, the period's count stays."""
    account = accounts.set_account(get_db(), _account(customer)["id"], plan=plan)
    click.echo(f"{customer}: plan {account['plan']}")


@marketplace_cli.command("activate")
@click.option("--customer", type=CUSTOMER, required=True)
def activate(customer: str) -> None:
    """Let a customer's key call the API again (the account needs a plan)."""
    account = _account(customer)
    if not account["plan"]:
        raise click.ClickException(f"{customer} has no plan, so nothing to count its conversions against; "
                                   f"give it one first: marketplace set-plan --customer {customer} --plan ...")
    accounts.set_account(get_db(), account["id"], status="active")
    click.echo(f"{customer}: active")


@marketplace_cli.command("deactivate")
@click.option("--customer", type=CUSTOMER, required=True)
def deactivate(customer: str) -> None:
    """Refuse a customer's calls; their queued tasks end FAILED subscription_inactive."""
    accounts.set_account(get_db(), _account(customer)["id"], status="inactive")
    click.echo(f"{customer}: inactive")


@accounts_cli.command("list")
def list_accounts() -> None:
    """One line per account: id, customer, plan, status."""
    for account in accounts.list_accounts(get_db()):
        click.echo(f"{account['id']}  {account['customer_id']}  {account['plan'] or '-'}  {account['status']}")


@usage_cli.command("report")
def usage_report() -> None:
    """Per account: plan, included used/quota, overage and its amount in USD."""
    conn = get_db()
    for account in accounts.list_accounts(conn):
        if not account["plan"]:
            click.echo(f"{account['customer_id']}  no plan yet ({account['status']})")
            continue
        period = periods.usage_period(conn, account)
        quota = get_settings().plan_quotas[account["plan"]]
        amount = period["overage_used"] * settings.OVERAGE_USD
        click.echo(f"{account['customer_id']}  {account['plan']}  included {period['included_used']}/{quota}"
                   f"  overage {period['overage_used']} (USD {amount:.2f})  period ends {period['ends_at']}")
