"""What a request uses: its SQLite connection, and the app's object store, queue and marketplace
(each made once per app, on first use)."""

from flask import current_app, g

from docshift.accounts import marketplace as marketplaces
from docshift.storage import ObjectStore, db
from docshift.tasks.queue import Queue


def get_db():
    """One SQLite connection per request, closed at teardown."""
    if "db" not in g:
        g.db = db.connect(current_app.config["DATABASE"])
    return g.db


def close_db(exception=None):
    conn = g.pop("db", None)
    if conn is not None:
        conn.close()


def _shared(name, make):
    if name not in current_app.extensions:
        current_app.extensions[name] = make(current_app.config)
    return current_app.extensions[name]


def get_store():
    """The app's object store client (thread-safe, shared by requests)."""
    return _shared("docshift.store", ObjectStore)


def get_queue():
    """The app's side of the work queue: it only enqueues."""
    return _shared("docshift.queue", Queue)


def get_marketplace():
    """The configured marketplace backend."""
    return _shared("docshift.marketplace", marketplaces.backend)
