"""The huey queues, built from configuration when first used (never at import).

One box (the default): one SQLite queue. A message says "a task is waiting"; the
worker thread that takes it claims the fairest waiting task in the database (see
``storage.db.claim_next``), not necessarily the one that sent it, so one account's
backlog never holds another account's task behind it. The sweep keeps at least as
many messages as there are QUEUED tasks, so a lost message only delays a task.

Conversion nodes (``DOCSHIFT_QUEUE_URL=redis://...``): two queues on Redis. The
coordinator's queue (``docshift``) carries "a task is waiting" from the web and
outcomes from the nodes; the nodes' queue (``docshift-jobs``) carries conversion
jobs, which the coordinator dispatches one per free node slot, in fair order.
"""

from huey import RedisHuey, SqliteHuey

# an empty SQLite queue is polled this often by each worker thread (huey's default backs off
# to 10 s, which a task submitted after idle would wait for); it costs a small SELECT
POLL_SECONDS = 0.02


def on_redis(config):
    return str(config.get("QUEUE_URL") or "").startswith(("redis://", "rediss://", "unix://"))


def _huey(config, name):
    if on_redis(config):
        return RedisHuey(name, url=config["QUEUE_URL"], results=False, blocking=True, read_timeout=1)
    from docshift.storage import db
    return SqliteHuey(name, filename=config["QUEUE_DATABASE"], results=False, factory=db.connection_class())


class _Huey:
    """A huey instance named ``name``, made on first use, with the tasks ``_register`` adds.
    ``runner`` does the work of each message; a side that only enqueues has none."""

    name = None

    def __init__(self, config, runner=None):
        self.config = config
        self.runner = runner
        self._huey = None

    @property
    def huey(self):
        if self._huey is None:
            huey = _huey(self.config, self.name)
            self._register(huey)
            self._huey = huey
        return self._huey

    def _register(self, huey):
        raise NotImplementedError


class Queue(_Huey):
    """The coordinator's queue: the web says a task is waiting; a node reports an outcome."""

    name = "docshift"

    def _register(self, huey):
        self._convert = huey.task(name="convert")(self._waiting)
        self._outcome = huey.task(name="outcome")(self._reported)

    def enqueue(self, task_id=None, delay=None):
        """Say that a task is waiting (``task_id`` names the one that caused it, for the log)."""
        self.huey  # noqa: B018 - builds the task wrappers on first use
        if delay:
            self._convert.schedule(args=(task_id,), delay=delay)
        else:
            self._convert(task_id)

    def report(self, outcome):
        """A node's outcome of one job, for the coordinator to apply (a dict: see ``Node``)."""
        self.huey  # noqa: B018
        self._outcome(outcome)

    def pending(self):
        """Messages not yet taken, including retries waiting for their time."""
        return self.huey.pending_count() + self.huey.scheduled_count()

    def consumer(self, workers):
        return self.huey.create_consumer(workers=workers, worker_type="thread", initial_delay=POLL_SECONDS,
                                         backoff=1, max_delay=POLL_SECONDS)

    def _waiting(self, task_id):
        return self.runner.convert(task_id)

    def _reported(self, outcome):
        return self.runner.apply(outcome)


class Jobs(_Huey):
    """The conversion nodes' queue (Redis only): one message per dispatched conversion."""

    name = "docshift-jobs"

    def _register(self, huey):
        self._job = huey.task(name="job")(self._run)

    def send(self, job):
        self.huey  # noqa: B018
        self._job(job)

    def waiting(self):
        """The jobs not yet taken by a node."""
        return [task.args[0] for task in self.huey.pending()]

    def take(self):
        """Run the next job if one comes within a second (Redis blocks meanwhile); False if none."""
        task = self.huey.dequeue()
        if task is None:
            return False
        self.huey.execute(task)
        return True

    def _run(self, job):
        return self.runner.run_job(job)
