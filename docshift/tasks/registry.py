"""The conversion nodes' registry in Redis: which nodes are alive and how many conversions each can run, which node
runs which job, which jobs the coordinator took back, which it asks to stop, and the probe a node checks its queue
key against. Every entry is sealed with the queue key (``docshift.tasks.messages``): Redis is not trusted."""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from redis.exceptions import RedisError

from docshift.errors import ForgedMessage, NoProbe, QueueUnavailable
from docshift.settings import Settings
from docshift.tasks import messages
from docshift.tasks.conversion import max_run_seconds
from docshift.tasks.queue import Jobs

log = logging.getLogger("docshift.nodes")

NODES = "docshift:nodes"         # node name -> sealed {"node", "slots", "beat": epoch seconds}
RUNNING = "docshift:running"     # job holder -> sealed {"holder", "node"}, while a node converts it
REVOKED = "docshift:revoked:"    # + job holder: taken back by the coordinator, its node stores nothing
STOP = "docshift:stop:"          # + job holder: the coordinator asks its node to stop the run (its slot is wanted)
PROBE = "docshift:probe"         # sealed {"probe", "accepts": fingerprints of the coordinator's keys}


class Registry:
    """Which nodes are alive, how many conversions they can run, which node runs which job, which jobs were taken
    back, which are asked to stop. Entries are sealed; one that is not is removed and logged."""

    def __init__(self, config: Settings, jobs: Jobs) -> None:
        self.silence = config.node_silence_seconds
        self.max_slots = config.node_max_slots
        self.revocation_seconds = int(max_run_seconds(config))  # a job's links expire by then anyway
        self.jobs = jobs
        self.keys = messages.queue_keys(config)
        self._beats, self._runs, self._revocations, self._stops, self._probes = (
            messages.Seal(self.keys, f"registry:{kind}") for kind in ("node", "running", "revoked", "stop", "probe"))

    @property
    def redis(self) -> Any:
        return self.jobs.huey.storage.conn

    def beat(self, node: str, slots: int) -> None:
        self.redis.hset(NODES, node, self._beats.wrap({"node": node, "slots": slots, "beat": time.time()}))

    def leave(self, node: str) -> None:
        self.redis.hdel(NODES, node)

    def alive(self) -> dict[str, int]:
        """{node: slots} of the nodes that beat within the silence limit, each at most NODE_MAX_SLOTS."""
        now, found = time.time(), {}
        for node, entry in self._entries(NODES, self._beats, "node").items():
            if type(entry.get("slots")) is int and isinstance(entry.get("beat"), (int, float)) \
                    and abs(now - entry["beat"]) <= self.silence:
                found[node] = max(0, min(entry["slots"], self.max_slots))
        return found

    def capacity(self) -> int:
        return sum(self.alive().values())

    def running(self, holder: str, node: str) -> None:
        self.redis.hset(RUNNING, holder, self._runs.wrap({"holder": holder, "node": node}))

    def done(self, holder: str) -> None:
        self.redis.hdel(RUNNING, holder)

    def revoke(self, holder: str) -> None:
        """The coordinator took the job back: a node still running it must not store its result."""
        self.redis.set(REVOKED + holder, self._revocations.wrap({"holder": holder}), ex=self.revocation_seconds)

    def revoked(self, holder: str) -> bool:
        """Whether the coordinator took the job back. Raises QueueUnavailable while Redis does not answer: a run
        about to store its result waits that out as it waits out the object store, without using an attempt."""
        try:
            raw = self.redis.get(REVOKED + holder)
        except RedisError as error:
            raise QueueUnavailable(f"the queue: {error}") from error
        try:  # a forged revocation would only make a node throw its work away: not taken
            return raw is not None and self._revocations.unwrap(raw).get("holder") == holder
        except ForgedMessage:
            return False

    def stop(self, holder: str) -> bool:
        """The coordinator asks the node that runs the job to stop it (``tasks.to_preempt``): the node kills its
        LibreOffice and reports it preempted, and the task goes back to the queue without using an attempt. A run that
        ends first reports as it would have. Whether the job was not asked already."""
        return bool(self.redis.set(STOP + holder, self._stops.wrap({"holder": holder}), nx=True,
                                   ex=self.revocation_seconds))

    def to_stop(self, holders: list[str]) -> set[str]:
        """Which of ``holders`` (the jobs a node runs) the coordinator asked to stop."""
        if not holders:  # MGET of no key is an error
            return set()
        asked = set()
        for holder, raw in zip(holders, self.redis.mget([STOP + holder for holder in holders])):
            try:  # a forged request would only make a node stop a run: not taken
                if raw is not None and self._stops.unwrap(raw).get("holder") == holder:
                    asked.add(holder)
            except ForgedMessage:
                log.warning("a request to stop job %s dropped: not sealed with the queue key", holder)
        return asked

    def job_gone(self, holder: str, node: str | None, started_at: datetime, at: datetime) -> bool:
        """True when the job is certainly not going to report: its node (``node``, the ``runner`` the caller read
        once) went silent, or it is neither waiting in the queue nor running anywhere, well after it was
        dispatched."""
        if node is not None:
            return node not in self.alive()
        if any(job["holder"] == holder for job in self.jobs.waiting()):
            return False
        return (at - started_at).total_seconds() > self.silence

    def runner(self, holder: str) -> str | None:
        """The node that says it runs the job, if any."""
        raw = self.redis.hget(RUNNING, holder)
        try:
            entry = {} if raw is None else self._runs.unwrap(raw)
        except ForgedMessage:  # not a node's word: as if nothing ran it
            entry = {}
        return entry.get("node") if entry.get("holder") == holder else None

    def announce(self) -> None:
        """The coordinator's probe, naming (by fingerprint) every key it opens messages with. It goes
        with the silence of a stopped coordinator: a node started later waits for the next one's."""
        self.redis.set(PROBE, self._probes.wrap({"probe": PROBE,
                                                 "accepts": [messages.fingerprint(key) for key in self.keys]}),
                       px=int(self.silence * 1000))

    def key_problem(self) -> str | None:
        """What makes this process's queue key unfit for the coordinator's queue, in words; None when
        it fits. Raises NoProbe when no coordinator has written its probe."""
        raw = self.redis.get(PROBE)
        if raw is None:
            raise NoProbe(PROBE)
        try:
            accepts = self._probes.unwrap(raw).get("accepts")
        except ForgedMessage:
            return (f"DOCSHIFT_QUEUE_KEY is not the coordinator's: its probe in Redis ({PROBE}) opens with none of "
                    "this node's keys, so every job would be dropped. Give this node the coordinator's "
                    "DOCSHIFT_QUEUE_KEY")
        if not isinstance(accepts, list) or messages.fingerprint(self.keys[0]) not in accepts:
            return ("this node seals with a key the coordinator does not hold (the first of its DOCSHIFT_QUEUE_KEY): "
                    "the coordinator would drop its outcomes. Rotating, put the new key first only once every "
                    "process holds it")
        return None

    def _entries(self, name: str, seal: messages.Seal, field: str) -> dict[str, dict[str, Any]]:
        """The sealed entries of the hash ``name``, by the ``field`` each must name itself by."""
        found = {}
        for raw_key, raw in self.redis.hgetall(name).items():
            key = raw_key.decode(errors="replace")
            try:
                entry = seal.unwrap(raw)
                if entry.get(field) != key:
                    raise ForgedMessage(f"sealed for {entry.get(field)!r}")
            except ForgedMessage as error:
                log.warning("%s entry %r removed: %s", name, key, error)
                self.redis.hdel(name, raw_key)
                continue
            found[key] = entry
        return found
