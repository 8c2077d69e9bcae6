"""Registrations: a token issues one key, once.

The token is marked used, the account made or refreshed and its key replaced in one
transaction, so of two POSTs of one token racing, exactly one issues a key. A token is marked
by its id (the marketplace's ``token_id``: what every spelling of it shares), never by how one
request spelled it, and only as a SHA-256.
"""

import hashlib
import sqlite3

from sqlite_utils import Database

from docshift.errors import RegistrationTokenInvalid
from docshift.storage import accounts
from docshift.storage.connection import Row, first, iso, now, transaction


def token_hash(token_id: str) -> str:
    return hashlib.sha256(token_id.encode("utf-8", "surrogateescape")).hexdigest()


def token_used(conn: Database, *token_ids: str) -> bool:
    """True if any of ``token_ids`` was used (the caller adds the token's own text: rows written
    before ids were marked by it)."""
    hashes = [token_hash(token_id) for token_id in token_ids]
    return first(conn, f"SELECT 1 FROM used_registration_tokens WHERE token_hash IN ({', '.join('?' * len(hashes))})",
                 hashes) is not None


def register(conn: Database, marketplace: str, customer: accounts.Subscription, token_id: str, key_hash: str,
             hint: str, refresh: bool = True) -> Row:
    """Use the token ``token_id`` (RegistrationTokenInvalid if it was used already), create the customer's
    account (or, with ``refresh``, update it from ``customer``) and make ``key_hash`` its only key; the account."""
    with transaction(conn):
        account = accounts.find_account(conn, marketplace, customer.customer_id)
        if account is None or refresh:
            account = accounts.apply_subscription(conn, marketplace, customer)
        try:
            conn.table("used_registration_tokens").insert({
                "token_hash": token_hash(token_id), "marketplace": marketplace, "account_id": account["id"],
                "used_at": iso(now())})
        except sqlite3.IntegrityError as error:
            raise RegistrationTokenInvalid("registration token already used") from error
        accounts.replace_key(conn, account["id"], key_hash, hint)
    return account
