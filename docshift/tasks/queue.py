"""The huey queue, built from configuration when first used (never at import).

A message says "a task is waiting": the worker that takes it claims the fairest
waiting task in the database (see ``storage.db.claim_next``), not necessarily the
one that sent it, so one account's backlog in the queue never holds another
account's task behind it. The sweep keeps at least as many messages as there are
QUEUED tasks, so a lost message only delays a task.

The web enqueues through it; the worker builds the same queue with a runner that
does the work. Both name the task ``convert``.
"""

from huey import SqliteHuey

from docshift.tasks.conversion import MAX_ATTEMPTS

# an empty SQLite queue is polled this often by each worker thread (huey's default backs off
# to 10 s, which a task submitted after idle would wait for); it costs a small SELECT
POLL_SECONDS = 0.02


class Queue:
    def __init__(self, config, runner=None):
        self.config = config
        self.runner = runner  # what the worker does with a message; None in the web
        self._huey = None
        self._convert = None

    @property
    def huey(self):
        if self._huey is None:
            huey = SqliteHuey("docshift", filename=self.config["QUEUE_DATABASE"], results=False)
            self._convert = huey.task(retries=MAX_ATTEMPTS - 1, retry_delay=5, name="convert")(self._run)
            self._huey = huey
        return self._huey

    def enqueue(self, task_id=None):
        """Say that a task is waiting (``task_id`` names the one that caused it, for the log)."""
        self.huey  # noqa: B018 - builds the task wrapper on first use
        self._convert(task_id)

    def pending(self):
        """Messages not yet taken, including retries waiting for their time."""
        return self.huey.pending_count() + self.huey.scheduled_count()

    def consumer(self, workers):
        return self.huey.create_consumer(workers=workers, worker_type="thread", initial_delay=POLL_SECONDS,
                                         backoff=1, max_delay=POLL_SECONDS)

    def _run(self, task_id):
        return self.runner.convert(task_id)
