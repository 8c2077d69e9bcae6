"""The worker's three roles, and the one place that picks which runs (``worker.role_for``)."""

import secrets

import pytest

from docshift import settings
from docshift.tasks.worker import Converting, Coordinating, OneBox, role_for


def test_one_place_picks_the_role_from_the_queue_and_the_command_line(tmp_path):
    """SQLite's queue: one box. Redis: the coordinator, or with ``node`` a conversion node; ``node`` without Redis
    refuses to start, naming what it needs. Building a role connects to nothing."""
    on_sqlite = settings.load({"DATA_DIR": str(tmp_path)})
    on_redis = settings.load({"DATA_DIR": str(tmp_path), "QUEUE_URL": "redis://127.0.0.1:1/0",
                              "QUEUE_KEY": secrets.token_hex(32)})
    assert type(role_for(on_sqlite, [])) is OneBox
    assert type(role_for(on_redis, [])) is Coordinating
    assert type(role_for(on_redis, ["node"])) is Converting
    with pytest.raises(SystemExit, match="DOCSHIFT_QUEUE_URL"):
        role_for(on_sqlite, ["node"])


def test_a_coordinator_converts_only_with_workers_of_its_own(tmp_path):
    def coordinator(workers):
        return role_for(settings.load({"DATA_DIR": str(tmp_path), "QUEUE_URL": "redis://127.0.0.1:1/0",
                                       "QUEUE_KEY": secrets.token_hex(32), "WORKERS": workers}), [])

    assert coordinator(0).conversions is None
    assert coordinator(2).conversions is not None
