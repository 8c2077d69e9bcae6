"""The huey queue, built from configuration when first used (never at import).

The web enqueues through it; the worker builds the same queue with a runner
that does the work. Both name the task ``convert``, so a message written by one
is understood by the other.
"""

from huey import SqliteHuey

from docshift.tasks.conversion import MAX_ATTEMPTS


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

    def enqueue(self, task_id):
        """Hand a committed QUEUED task to the workers."""
        self.huey  # noqa: B018 - builds the task wrapper on first use
        self._convert(task_id)

    def _run(self, task_id):
        return self.runner.convert(task_id)
