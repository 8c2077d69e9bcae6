"""The only code that talks SQL (``storage.db``) or S3 (``storage.objects``).

``get_db`` and ``get_store`` give a request its connection and the app's store.
"""

from flask import current_app, g

from storage import db
from storage.objects import ObjectStore


def get_db():
    """One SQLite connection per request, closed at teardown."""
    if "db" not in g:
        g.db = db.connect(current_app.config["DATABASE"])
    return g.db


def close_db(exception=None):
    conn = g.pop("db", None)
    if conn is not None:
        conn.close()


def get_store():
    """The app's object store client (thread-safe, shared by requests)."""
    if "docshift.store" not in current_app.extensions:
        current_app.extensions["docshift.store"] = ObjectStore(current_app.config)
    return current_app.extensions["docshift.store"]
