"""The overage ledger: per account and hour, what was reported to the marketplace (or missed), a
row written before anything is sent so that an hour is never reported twice."""

from datetime import UTC, datetime

from sqlite_utils import Database

from docshift.storage.connection import Row, first, iso, now, select


def hour_of(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def overage_to_report(db: Database, since: datetime, until: datetime) -> list[tuple[Row, str, int]]:
    """(account, hour, quantity) of OVERAGE successes in whole hours ``since`` <= hour < ``until``
    that the ledger has not closed yet (absent or still pending)."""
    rows = select(
        db, """SELECT conversions.account_id, substr(conversions.finished_at, 1, 13) AS hour_prefix,
                  count(*) AS quantity
           FROM conversions
           WHERE billing_class = 'OVERAGE' AND finished_at >= ? AND finished_at < ?
           GROUP BY conversions.account_id, hour_prefix""", [iso(since), iso(until)])
    due: list[tuple[Row, str, int]] = []
    for row in rows:
        hour = iso(datetime.strptime(row["hour_prefix"], "%Y-%m-%dT%H").replace(tzinfo=UTC))
        report = first(db, "SELECT * FROM overage_reports WHERE account_id = ? AND hour = ?",
                       [row["account_id"], hour])
        if report is None or report["status"] == "pending":
            due.append((db.table("accounts").get(row["account_id"]), hour, row["quantity"]))
    return due


def open_overage_report(db: Database, account_id: str, hour: str, quantity: int) -> None:
    """Write the ledger row before anything is sent (or keep the pending one)."""
    db.execute("INSERT OR IGNORE INTO overage_reports (account_id, hour, quantity, status, updated_at) "
               "VALUES (?, ?, ?, 'pending', ?)", [account_id, hour, quantity, iso(now())])


def close_overage_report(db: Database, account_id: str, hour: str, status: str, record_id: str | None = None) -> None:
    db.execute("UPDATE overage_reports SET status = ?, metering_record_id = ?, updated_at = ? "
               "WHERE account_id = ? AND hour = ?", [status, record_id, iso(now()), account_id, hour])


def miss_overage_reports(db: Database, before: datetime) -> int:
    """Pending rows past the marketplace's window: recorded as missed for the operator."""
    return db.execute("UPDATE overage_reports SET status = 'missed', updated_at = ? "
                      "WHERE status = 'pending' AND hour < ?", [iso(now()), iso(before)]).rowcount


def overage_reports(db: Database, account_id: str | None = None) -> list[Row]:
    sql, params = "SELECT * FROM overage_reports", []
    if account_id:
        sql, params = sql + " WHERE account_id = ?", [account_id]
    return select(db, sql + " ORDER BY hour", params)
