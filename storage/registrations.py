"""Registrations: a token issues one key, once.

The token is marked used, the account made or refreshed and its key replaced in one
transaction, so of two POSTs of one token racing, exactly one issues a key.
"""

import hashlib
import sqlite3

from docshift.errors import RegistrationTokenInvalid
from docshift.storage import db


def token_hash(token):
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


@db._domain_errors
def token_used(conn, token):
    return db.first(conn, "SELECT 1 FROM used_registration_tokens WHERE token_hash = ?",
                    [token_hash(token)]) is not None


@db._domain_errors
def register(conn, marketplace, customer, token, key_hash, hint, refresh=True):
    """Use ``token`` (RegistrationTokenInvalid if it was used already), create the customer's account
    (or, with ``refresh``, update it from ``customer``) and make ``key_hash`` its only key; the account."""
    with db.transaction(conn):
        account = db.find_account(conn, marketplace, customer.customer_id)
        if account is None or refresh:
            account = db.apply_subscription(conn, marketplace, customer)
        try:
            conn["used_registration_tokens"].insert({"token_hash": token_hash(token), "marketplace": marketplace,
                                                     "account_id": account["id"], "used_at": db.iso(db.now())})
        except sqlite3.IntegrityError as error:
            raise RegistrationTokenInvalid("registration token already used") from error
        db.replace_key(conn, account["id"], key_hash, hint)
    return account
