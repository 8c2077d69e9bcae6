"""Overage reported to the marketplace, hour by hour, through a ledger that loses and
doubles nothing."""

import logging
from datetime import datetime, timedelta

from sqlite_utils import Database

from docshift.accounts.marketplace import Marketplace, Settled
from docshift.storage import connection, ledger

log = logging.getLogger("docshift.metering")

METERING_WINDOW = timedelta(hours=6)  # the marketplace refuses records older than this


def report_overage(conn: Database, backend: Marketplace, at: datetime | None = None) -> Settled:
    """Send the overage of every ended hour not yet in the ledger (or still pending there).

    Each (account, hour) is written to the ledger as pending before it is sent and closed
    after; hours that fell out of the marketplace's window unsent are recorded as missed.
    Returns what the marketplace settled.
    """
    due = []
    # Read and opened under the write lock, the time taken inside it: a success takes its
    # finished_at under the same lock (tasks.mark_succeeded), so each one commits either before
    # this reading, counted in it, or after it, in a later hour than any hour this closes.
    with connection.transaction(conn):
        at = at or connection.now()
        this_hour = ledger.hour_of(at)
        for account, hour, quantity in ledger.overage_to_report(conn, this_hour - timedelta(days=7), this_hour):
            ledger.open_overage_report(conn, account["id"], hour, quantity)
            if connection.parse(hour) < at - METERING_WINDOW:
                ledger.close_overage_report(conn, account["id"], hour, "missed")
                log.error("overage of account %s for %s was never reported in time", account["id"], hour)
            else:
                due.append((account, hour, quantity))
    settled = backend.meter(due) if due else {}
    for (account_id, hour), (status, record_id) in settled.items():
        ledger.close_overage_report(conn, account_id, hour, status, record_id)
    ledger.miss_overage_reports(conn, at - METERING_WINDOW)
    return settled
