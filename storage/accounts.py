"""Accounts, as the marketplace or the operator sets them, and their API keys (only hashes)."""

from datetime import datetime
from typing import Any, Protocol

from sqlite_utils import Database

from docshift.contract import TaskErrorCode
from docshift.storage.connection import Row, first, iso, new_id, now, select, transaction

INACTIVE_MESSAGE = "The subscription became inactive before the conversion ran; not billed."


class Subscription(Protocol):
    """What a marketplace says of a customer now (``docshift.accounts.marketplace.Customer``)."""

    customer_id: str
    plan: str | None
    status: str
    license_arn: str | None
    period_ends_at: datetime | None


def apply_subscription(db: Database, marketplace: str, customer: Subscription) -> Row:
    """Create or update an account from what the marketplace says now (a ``Customer``).

    An account that was once active and has no entitlement any more is ``inactive``,
    not ``pending``; a plan the marketplace does not name is kept.
    """
    with transaction(db):
        account = find_account(db, marketplace, customer.customer_id)
        status = customer.status
        if status == "pending" and account and account["activated_at"]:
            status = "inactive"
        at = iso(now())
        contract_end = iso(customer.period_ends_at) if customer.period_ends_at else None
        if account is None:
            account = {"id": new_id("acc"), "marketplace": marketplace, "customer_id": customer.customer_id,
                       "license_arn": customer.license_arn, "plan": customer.plan, "status": status,
                       "activated_at": at if status == "active" else None, "created_at": at,
                       "contract_ends_at": contract_end}
            db.table("accounts").insert(account)
            return account
        changes = {"status": status, "plan": customer.plan or account["plan"],
                   "license_arn": customer.license_arn or account["license_arn"],
                   "contract_ends_at": contract_end or account["contract_ends_at"]}
        if status == "active" and not account["activated_at"]:
            changes["activated_at"] = at
        db.table("accounts").update(account["id"], changes)
        if status != "active":
            _end_queued(db, account["id"])
        return {**account, **changes}


def set_account(db: Database, account_id: str, **changes: Any) -> Row:
    with transaction(db):
        if changes.get("status") == "active":
            account = db.table("accounts").get(account_id)
            if not account["activated_at"]:
                changes["activated_at"] = iso(now())
        db.table("accounts").update(account_id, changes)
        if changes.get("status", "active") != "active":
            _end_queued(db, account_id)
        return db.table("accounts").get(account_id)


def _end_queued(db: Database, account_id: str) -> None:
    """An account no longer active: its tasks still waiting end FAILED ``subscription_inactive`` with it, unbilled.
    Left to their claim, which reads the account then, an account made active again in between had them converted
    and billed. (A task already converting ends the same way when it finishes: ``tasks.mark_succeeded``.)"""
    db.execute("UPDATE conversions SET status = 'FAILED', error_code = ?, error_message = ?, finished_at = ?, "
               "sealed_password = NULL WHERE account_id = ? AND status = 'QUEUED'",
               [TaskErrorCode.SUBSCRIPTION_INACTIVE.value, INACTIVE_MESSAGE, iso(now()), account_id])


def find_account(db: Database, marketplace: str, customer_id: str) -> Row | None:
    return first(db, "SELECT * FROM accounts WHERE marketplace = ? AND customer_id = ?",
                 [marketplace, customer_id])


def list_accounts(db: Database) -> list[Row]:
    return select(db, "SELECT * FROM accounts ORDER BY created_at")


def replace_key(db: Database, account_id: str, key_hash: str, hint: str) -> None:
    """Make ``key_hash`` the account's only valid key (re-registration rotates)."""
    at = iso(now())
    with transaction(db):
        db.execute("UPDATE api_keys SET revoked_at = ? WHERE account_id = ? AND revoked_at IS NULL",
                   [at, account_id])
        db.table("api_keys").insert({"key_hash": key_hash, "account_id": account_id, "hint": hint,
                               "created_at": at, "revoked_at": None})


def account_for_key(db: Database, key_hash: str) -> Row | None:
    return first(db, """SELECT accounts.* FROM api_keys JOIN accounts ON accounts.id = api_keys.account_id
                        WHERE api_keys.key_hash = ? AND api_keys.revoked_at IS NULL""", [key_hash])

