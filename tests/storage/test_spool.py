"""On one box an upload waits in a file beside the database, not in the bucket (``storage/spool.py``); with the
queue on Redis it goes to the bucket, where the nodes' presigned links reach it. Against a real SeaweedFS."""

import os
import stat
import time

import pytest
import requests
from conftest import post_file

from docshift import settings
from docshift.errors import InputMissing
from docshift.storage import tasks
from docshift.storage.s3 import ObjectStore
from docshift.tasks import maintenance
from docshift.web.context import get_db


def store_for(s3, data_dir, bucket, queue_url=None):
    given = {key.removeprefix("DOCSHIFT_"): value for key, value in s3["env"].items()}
    given |= {"DATA_DIR": str(data_dir), "S3_BUCKET": bucket}
    if queue_url:
        given |= {"QUEUE_URL": queue_url, "QUEUE_KEY": "k" * 40}
    store = ObjectStore(settings.load(given))
    store.ensure_bucket()
    return store


def bucket_inputs(store):
    return sorted(entry.object_name for entry in store.client.list_objects(store.bucket, prefix="inputs/")
                  if not entry.is_dir)  # SeaweedFS lists a folder its last object left


def test_one_box_keeps_an_upload_in_the_spool_and_never_in_the_bucket(s3, tmp_path):
    store = store_for(s3, tmp_path / "data", "spool-one-box")
    store.put_input("tsk_one", b"a legacy file")
    spooled = tmp_path / "data" / "inputs" / "tsk_one"
    assert spooled.read_bytes() == b"a legacy file"
    assert stat.S_IMODE(spooled.stat().st_mode) == 0o600
    assert bucket_inputs(store) == []
    store.fetch_input("tsk_one", tmp_path / "fetched")
    assert (tmp_path / "fetched").read_bytes() == b"a legacy file"
    # one file system: the run's file is the spool's, not a copy, and outlives the spool's name
    assert (tmp_path / "fetched").stat().st_ino == spooled.stat().st_ino
    store.delete_input("tsk_one")
    assert not spooled.exists()
    assert (tmp_path / "fetched").read_bytes() == b"a legacy file"
    with pytest.raises(InputMissing):
        store.fetch_input("tsk_one", tmp_path / "again")


def test_a_fetch_onto_a_file_that_is_there_copies_the_upload_over_it(s3, tmp_path):
    store = store_for(s3, tmp_path / "data", "spool-copied")
    store.put_input("tsk_over", b"the upload")
    (tmp_path / "fetched").write_bytes(b"a file left by an earlier try")
    store.fetch_input("tsk_over", tmp_path / "fetched")
    assert (tmp_path / "fetched").read_bytes() == b"the upload"
    assert (tmp_path / "fetched").stat().st_ino != (tmp_path / "data" / "inputs" / "tsk_over").stat().st_ino


def test_an_upload_left_in_the_bucket_before_the_spool_is_still_run_and_removed(s3, tmp_path):
    """Inputs submitted before an upgrade wait in the bucket: the run finds them there, and they are removed."""
    store = store_for(s3, tmp_path / "data", "spool-upgrade")
    store._put("inputs/tsk_before", b"queued before the upgrade")
    store.fetch_input("tsk_before", tmp_path / "fetched")
    assert (tmp_path / "fetched").read_bytes() == b"queued before the upgrade"
    store.delete_input("tsk_before")
    assert bucket_inputs(store) == []


def test_with_the_queue_on_redis_uploads_go_to_the_bucket_and_a_spooled_one_moves_there(s3, tmp_path):
    one_box = store_for(s3, tmp_path / "data", "spool-redis")
    one_box.put_input("tsk_waiting", b"submitted on one box")
    nodes = store_for(s3, tmp_path / "data", "spool-redis", queue_url="redis://127.0.0.1:6379/0")
    nodes.put_input("tsk_new", b"submitted with nodes")
    assert bucket_inputs(nodes) == ["inputs/tsk_new"]
    # the coordinator signs a node's link to the input: the upload still in the spool goes to the bucket first
    for task_id, data in (("tsk_waiting", b"submitted on one box"), ("tsk_new", b"submitted with nodes")):
        links = nodes.job_links(task_id, f"results/{task_id}/1-0", 60)
        assert requests.get(links["input"], timeout=5).content == data
    assert not (tmp_path / "data" / "inputs" / "tsk_waiting").exists()
    assert bucket_inputs(nodes) == ["inputs/tsk_new", "inputs/tsk_waiting"]


def test_the_sweep_removes_only_old_uploads_that_no_waiting_task_wants(s3, tmp_path, monkeypatch):
    store = store_for(s3, tmp_path / "data", "spool-sweep")
    for task_id in ("tsk_waiting", "tsk_orphan", "tsk_fresh"):
        store.put_input(task_id, b"x")
    spool = tmp_path / "data" / "inputs"
    (spool / ".tsk_crashed.123.tmp").write_bytes(b"half")
    old = time.time() - maintenance.SPOOL_BACKSTOP_SECONDS - 60
    for name in ("tsk_waiting", "tsk_orphan", ".tsk_crashed.123.tmp"):
        os.utime(spool / name, (old, old))
    wanted = {"tsk_waiting"}
    assert store.spool.sweep(maintenance.SPOOL_BACKSTOP_SECONDS, wanted.__contains__) == 2
    assert sorted(path.name for path in spool.iterdir()) == ["tsk_fresh", "tsk_waiting"]


def test_is_unfinished_names_the_waiting_tasks(app, client, account):
    task_id = post_file(client, account, b"x" * 100, "waits.doc").get_json()["task_id"]
    with app.app_context():
        assert tasks.is_unfinished(get_db(), task_id)
        assert not tasks.is_unfinished(get_db(), "tsk_unknown")
