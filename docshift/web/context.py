"""What a request uses: its SQLite connection (from a pool), and the app's object store, queue and
marketplace (each made once per app, on first use)."""

from collections.abc import Callable
from typing import Any

from flask import current_app, g
from sqlite_utils import Database

from docshift.accounts import marketplace as marketplaces
from docshift.settings import Settings
from docshift.storage import ObjectStore, connection
from docshift.tasks.queue import Queue


def get_settings() -> Settings:
    """The app's settings (``settings.load`` once, in ``create_app``)."""
    return current_app.config["DOCSHIFT"]


def get_db() -> Database:
    """The request's SQLite connection, taken from the process's pool on first use."""
    if "db" not in g:
        g.db = _pool().take()
    return g.db


def close_db(exception: BaseException | None = None) -> None:
    conn = g.pop("db", None)
    if conn is not None:
        _pool().give_back(conn)


def _pool() -> connection.Pool:
    pools = current_app.extensions.setdefault("docshift.db", {})
    path = get_settings().database
    if path not in pools:
        pools[path] = connection.Pool(path)
    return pools[path]


def _shared(name: str, make: Callable[[Settings], Any]) -> Any:
    if name not in current_app.extensions:
        current_app.extensions[name] = make(get_settings())
    return current_app.extensions[name]


def get_store() -> ObjectStore:
    """The app's object store client (thread-safe, shared by requests)."""
    return _shared("docshift.store", ObjectStore)


def get_queue() -> Queue:
    """The app's side of the work queue: it only enqueues."""
    return _shared("docshift.queue", Queue)


def get_marketplace() -> marketplaces.Marketplace:
    """The configured marketplace backend."""
    return _shared("docshift.marketplace", marketplaces.backend)
