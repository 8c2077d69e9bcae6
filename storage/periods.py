"""Usage periods: an account's contract periods, each with its counts of included and overage
successes. What counts as which is the accounts' billing rule (``docshift.accounts.billing``);
this module only keeps the counts."""

import calendar
from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

from sqlite_utils import Database

from docshift.contract import BillingClass
from docshift.storage.connection import Row, first, iso, now, parse, transaction

# the counter a billing class adds to
COUNTERS = {BillingClass.INCLUDED: "included_used", BillingClass.OVERAGE: "overage_used"}


def add_months(moment: datetime, months: int) -> datetime:
    """``moment`` plus whole months, the day clamped to the month's length (Jan 31 + 1 = Feb 28)."""
    year, month = divmod(moment.month - 1 + months, 12)
    year += moment.year
    month += 1
    return moment.replace(year=year, month=month, day=min(moment.day, calendar.monthrange(year, month)[1]))


def current_period(db: Database, account: Mapping[str, Any], at: datetime | None = None) -> Row:
    """The account's contract period containing ``at``, created (and rolled) as needed.

    A period ends where the marketplace's entitlement ends, if it gives an end after the
    period's start, else a month after its start (the first starts at activation). A new
    period starts with fresh counters. Call inside a transaction when the result feeds a write.
    """
    at = at or now()
    row = first(db, "SELECT * FROM usage_periods WHERE account_id = ? ORDER BY started_at DESC LIMIT 1",
                [account["id"]])
    if row is None:
        start = parse(account["activated_at"] or account["created_at"])
    elif parse(row["ends_at"]) > at:
        return row
    else:
        start = parse(row["ends_at"])
    anchor = parse(account["activated_at"] or account["created_at"])
    contract_end = parse(account["contract_ends_at"]) if account.get("contract_ends_at") else None

    def period_end(start: datetime) -> datetime:
        if contract_end and contract_end > start:
            return contract_end
        # monthly from activation: anchored there, so Jan 31 gives Feb 28, then Mar 31
        months = 1
        while add_months(anchor, months) <= start:
            months += 1
        return add_months(anchor, months)

    end = period_end(start)
    while end <= at:
        start, end = end, period_end(end)
    row = {"account_id": account["id"], "started_at": iso(start), "ends_at": iso(end),
           "included_used": 0, "overage_used": 0}
    db.table("usage_periods").insert(row, ignore=True)
    # the row inserted just now, or the one another writer inserted first
    return cast(Row, first(db, "SELECT * FROM usage_periods WHERE account_id = ? AND started_at = ?",
                           [account["id"], row["started_at"]]))


def usage_period(db: Database, account: Mapping[str, Any], at: datetime | None = None) -> Row:
    """The current period for reading: no write lock unless a period must be made or rolled."""
    at = at or now()
    row = first(db, "SELECT * FROM usage_periods WHERE account_id = ? ORDER BY started_at DESC LIMIT 1",
                [account["id"]])
    if row is not None and parse(row["started_at"]) <= at < parse(row["ends_at"]):
        return row
    with transaction(db):
        return current_period(db, account, at)


def count(db: Database, period: Mapping[str, Any], billing: BillingClass) -> None:
    """Add one success of class ``billing`` (``INCLUDED`` or ``OVERAGE``) to ``period``'s counts.
    Call inside the transaction that records the success, with the period read in it."""
    column = COUNTERS[billing]
    db.execute(f"UPDATE usage_periods SET {column} = {column} + 1 WHERE account_id = ? AND started_at = ?",
               [period["account_id"], period["started_at"]])
