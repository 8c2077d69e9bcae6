"""The data dir holds key hashes, tasks and secrets: it and its databases are the service
user's alone (0700, 0600), whatever the umask of the process that made them."""

import os
import stat

from docshift import settings
from docshift.storage import connection, liveness
from docshift.tasks.queue import Queue


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_data_dir_and_its_databases_are_private(tmp_path):
    umask = os.umask(0o002)  # a group-writable umask, as some distributions give their users
    try:
        config = settings.load({"DATA_DIR": str(tmp_path / "fresh" / "var")})
        conn = connection.connect(config.database)
        connection.init(conn)
        liveness.heartbeat(conn)
        queue = Queue(config)
        queue.huey.storage.enqueue(b"a message", 0)
    finally:
        os.umask(umask)
    assert mode(config.data_dir) == 0o700
    files = [config.database, config.queue_database, config.database + "-wal", config.database + "-shm"]
    assert {name: mode(name) for name in files if os.path.exists(name)} == dict.fromkeys(files, 0o600)
    conn.conn.close()
