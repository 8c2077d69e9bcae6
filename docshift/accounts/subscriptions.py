"""Subscription changes from the marketplace, applied to accounts."""

import logging
from typing import Any

from sqlite_utils import Database

from docshift.errors import MarketplaceUnavailable
from docshift.storage import accounts
from docshift.storage.connection import Row

log = logging.getLogger("docshift.subscriptions")


def sync_subscriptions(conn: Database, backend: Any) -> list[Row]:
    # ``backend``: a Marketplace; only one with notifications (AWS) is asked for a customer
    """Re-read each notified customer's entitlements and apply them; acknowledge what was applied.

    A subscribe or update whose entitlement is not visible yet stays in the queue and
    comes back after the queue's visibility timeout, as does anything the marketplace
    did not answer for. Returns the accounts changed.
    """
    try:
        notifications = backend.notifications()
    except MarketplaceUnavailable as error:
        log.warning("marketplace notifications unavailable: %s", error)
        return []
    applied = []
    for notification in notifications:
        try:
            customer = backend.customer(notification.customer_id)
        except MarketplaceUnavailable as error:
            log.warning("entitlements of %s unavailable: %s", notification.customer_id, error)
            continue
        if customer.status == "pending" and notification.action in ("subscribe-success", "entitlement-updated"):
            log.info("%s for %s: no entitlement visible yet", notification.action, notification.customer_id)
            continue
        account = accounts.apply_subscription(conn, backend.name, customer)
        backend.acknowledge(notification)
        log.info("%s: account %s is %s on %s", notification.action, account["id"], account["status"],
                 account["plan"])
        applied.append(account)
    return applied
