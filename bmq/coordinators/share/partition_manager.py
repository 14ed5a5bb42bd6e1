"""Share groups on a broker (KIP-932), Kafka's SharePartitionManager: membership (``groups``),
share sessions, ShareFetch and ShareAcknowledge over the share-partitions, their timers (lock
expiry, retry back-off) and dead letters (KIP-1191). Their state is kept by the share
coordinator (``state.ShareStateCoordinator``, Kafka's ShareCoordinator) or, in a cluster,
written through it (``leader``).

Order of a ShareFetch: acknowledgements first (checked for the whole partition, then applied),
then records are acquired up to MaxRecords; every change is appended to the share-group state
log at once, and the answer waits until it is durable, so an acknowledgement that was answered
is never undone by a crash and a delivery is counted before the consumer sees the record.
Records a consumer rejects or that reach the delivery limit are written to the group's
dead-letter topic and archived once that write is durable.

A released record, or one whose lock expired, is deliverable again only after the group's
``bmq.share.retry.backoff.ms`` for its delivery count (BMQ's retry back-off; ``0`` is Kafka's
behaviour); later records keep flowing meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from bmq import metrics
from bmq.coordinators.base import CoordinatorHost
from bmq.coordinators.clock import steady_now_ms
from bmq.coordinators.sharded import Appended
from bmq.coordinators.share.dlq import DeadLetterTopicRefused, RemoteAppend, dead_letter
from bmq.coordinators.share.groups import ShareGroups
from bmq.coordinators.share.leader import LeaderShareState, StateLink
from bmq.coordinators.share.partition import Acquired, DeadLetter, SharePartition, ShareSettings
from bmq.coordinators.share.reads import acquire_records, read_covering
from bmq.coordinators.share.records import StateKey
from bmq.coordinators.share.sessions import ShareSessions, Target
from bmq.coordinators.share.state import ShareStateCoordinator, ShareStateStore
from bmq.coordinators.tasks import BackgroundTasks
from bmq.metadata.topics import TopicIdPartition
from bmq.metadata.views import is_view
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.protocol.primitives import Buffer
from bmq.readpath.fetch import FetchServer
from bmq.readpath.partition_view import PartitionView

log = logging.getLogger(__name__)

SWEEP_S = 0.1          # how often lock expiries, back-offs and member sessions are checked
DEAD_LETTER_RETRY_MS = 5000
AckBatch = tuple[int, int, list[int]]        # first offset, last offset, acknowledge types


@dataclass(slots=True)
class PartitionResult:
    topic_id: uuid.UUID
    partition: int
    error: ErrorCode = ErrorCode.NONE
    ack_error: ErrorCode = ErrorCode.NONE
    records: list[Buffer] = field(default_factory=list)   # whole batches
    acquired: list[Acquired] = field(default_factory=list)


@dataclass(slots=True)
class _Applied:
    """A partition's acknowledgements, applied in memory."""

    result: PartitionResult
    target: Target
    dead: list[DeadLetter]
    appended: Appended = ErrorCode.NONE


# The share state cannot be read or written now (its coordinator is starting or moving): a
# partition of a ShareFetch is answered KAFKA_STORAGE_ERROR (the state is on storage), which
# share consumers retry after a metadata refresh; librdkafka hands the coordinator codes to the
# application as fatal.
_STATE_UNAVAILABLE = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                ErrorCode.NOT_COORDINATOR})


def _partition_error(code: ErrorCode) -> ErrorCode:
    return ErrorCode.KAFKA_STORAGE_ERROR if code in _STATE_UNAVAILABLE else code


def settings_of(configs: dict[str, str]) -> ShareSettings:
    return ShareSettings(
        lock_ms=int(configs["share.record.lock.duration.ms"]),
        delivery_limit=int(configs["share.delivery.count.limit"]),
        backoff_ms=tuple(int(v) for v in configs["bmq.share.retry.backoff.ms"].split(",")),
        dlq_topic=configs["errors.deadletterqueue.topic.name"],
        read_committed=configs["share.isolation.level"] == "read_committed")


class SharePartitionManager:
    """The share-partitions of the partitions this broker leads, and their share groups."""

    def __init__(self, host: CoordinatorHost, executor: Executor, views: FetchServer,
                 group_config: Callable[[str], dict[str, str]]) -> None:
        self.host = host
        self._views = views
        self._group_config = group_config
        # The share coordinator: the shards of __share_group_state this broker owns.
        self.state_log = ShareStateCoordinator(host, executor)
        self.state: ShareStateStore = self.state_log
        self._append_elsewhere: RemoteAppend | None = None     # cluster mode: dead letters
        self.groups = ShareGroups(host.topics, group_config)
        self.sessions = ShareSessions()
        self._available: asyncio.Future[None] | None = None
        self._tasks = BackgroundTasks("share groups")
        self._swept_at = 0      # when the sweep last went over every share-partition
        # Dead-letter writes under way (or about to be: made by a request that has not written
        # them yet) per share-partition, and when to retry failed ones.
        self._lettering: dict[StateKey, int] = {}
        self._retry_at: dict[StateKey, int] = {}

    def lead_through(self, link: StateLink) -> LeaderShareState:
        """Cluster mode: keep the share-partitions of the partitions this broker leads here,
        their state written through its coordinators over ``link``."""
        self.state = leading = LeaderShareState(self.state_log, link, self.host.partitions)
        self._append_elsewhere = link.append_elsewhere
        return leading

    def settings(self, group_id: str) -> ShareSettings:
        return settings_of(self._group_config(group_id))

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._swept_at = steady_now_ms()
        self._tasks.every(SWEEP_S, self._sweep)

    async def stop(self) -> None:
        self._wake()
        await self._tasks.stop()

    # ------------------------------------------------------------------ waking fetches
    def _wake(self) -> None:
        if self._available is not None and not self._available.done():
            self._available.set_result(None)

    def _became_available(self) -> asyncio.Future[None]:
        if self._available is None or self._available.done():
            self._available = asyncio.get_running_loop().create_future()
        return self._available

    # ------------------------------------------------------------------ share-partitions
    async def _target(self, group_id: str, tp: TopicIdPartition, settings: ShareSettings,
                      known: dict[TopicIdPartition, Target]) -> Target:
        """The share-partition ``tp`` of the group (made on first use), kept in ``known`` (the
        share session's) while it stays valid. Raises KafkaError."""
        target = known.get(tp)
        if target is None or target.view.closed or self.state.state(target.key) is not \
                target.state or self.host.partitions.get(target.view.topic, tp[1]) is None:
            target = known[tp] = await self._resolve(group_id, tp, settings)
        return target

    async def _resolve(self, group_id: str, tp: TopicIdPartition,
                       settings: ShareSettings) -> Target:
        topic_id, index = tp
        info = self._views.topic_by_id(topic_id)
        if info is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
        if not 0 <= index < info.partitions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if is_view(info.configs):     # before the ownership check: a view has no owner
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"{info.name} is a view: share groups read unfiltered topics only")
        partition = await self.host.served_partition(info.name, index)
        view = await self._topic_view(info.name, index)
        if not await self.state.ensure_started():
            raise KafkaError(_partition_error(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        key = StateKey(group_id, topic_id, index)
        error = await self.state.prepare(key, partition)
        if error != ErrorCode.NONE:
            raise KafkaError(_partition_error(error))
        state = self.state.state(key)
        if state is None:
            reset = self._group_config(group_id)["share.auto.offset.reset"]
            start = view.log_start_offset if reset == "earliest" else view.high_watermark
            state, appended = self.state.create(key, start, partition)
            await self._durable(appended)
        elif state.start_offset < view.log_start_offset:
            # Retention deleted records the group never finished with: they are gone.
            state.apply(view.log_start_offset, [])
            await self._durable(self.state.persist(key, state, snapshot=True))
        return Target(key, view, state)

    async def _topic_view(self, topic: str, index: int) -> PartitionView:
        view = await self._views.view(topic, index)
        if not isinstance(view, PartitionView):    # filtered: a view, a lane or a trunk
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"{topic} is filtered (a view, or has lanes): share groups read "
                             "unfiltered topics only")
        return view

    async def _durable(self, appended: Appended) -> None:
        error = await self.state.durable(appended)
        if error != ErrorCode.NONE:
            raise KafkaError(_partition_error(error))

    # ------------------------------------------------------------------ sessions
    async def close_session(self, group_id: str, member_id: str) -> None:
        """The member closed its share session: what it still holds is released. (Leaving
        the group releases nothing: librdkafka leaves first and then sends its last
        acknowledgements, closing the session; as in Kafka, a share-partition's locks belong to
        the share session, and otherwise expire.)"""
        if self.sessions.close(group_id, member_id):
            await self._release_member(group_id, member_id)

    async def _release_member(self, group_id: str, member_id: str) -> None:
        settings = self.settings(group_id)
        now = steady_now_ms()
        for key, state in self.state.all_states():
            if key.group_id != group_id:
                continue
            dead = state.expire_locks(now, settings, member=member_id)
            if state.changes:
                appended = self.state.persist(key, state)
                await self._settle_dead(key, state, settings, dead)
                await self.state.durable(appended)
        self._wake()

    # ------------------------------------------------------------------ acknowledgements
    async def _apply_acks(self, group_id: str, member_id: str, settings: ShareSettings,
                          acks: dict[TopicIdPartition, list[AckBatch]],
                          results: dict[TopicIdPartition, PartitionResult],
                          targets: dict[TopicIdPartition, Target]) -> list[_Applied]:
        """Check each partition's acknowledgements (all or none of them apply) and apply them
        in memory; the caller makes them durable before it answers, then writes their dead
        letters (``_finish``), and calls ``_drop_claims`` when done."""
        applied: list[_Applied] = []
        try:
            for tp, batches in acks.items():
                result = results.setdefault(tp, PartitionResult(*tp))
                try:
                    target = await self._target(group_id, tp, settings, targets)
                except KafkaError as error:
                    result.ack_error = error.code
                    continue
                state = target.state
                errors = [state.check_ack(member_id, *batch) for batch in batches]
                failed = next((e for e in errors if e != ErrorCode.NONE), None)
                if failed is not None:
                    result.ack_error = failed
                    continue
                now = steady_now_ms()
                dead = [letter for batch in batches
                        for letter in state.acknowledge(*batch, now, settings)]
                if dead:
                    # Claimed before anything awaits: the sweep, which writes the ARCHIVING
                    # records nobody is writing, would otherwise write these too while this
                    # request waits (for its long poll, for the state log).
                    self._claim(target.key)
                applied.append(_Applied(result, target, dead))
        except BaseException:
            self._drop_claims(applied)
            raise
        return applied

    def _claim(self, key: StateKey) -> None:
        self._lettering[key] = self._lettering.get(key, 0) + 1

    def _unclaim(self, key: StateKey) -> None:
        left = self._lettering.pop(key) - 1
        if left:
            self._lettering[key] = left

    def _drop_claims(self, applied: list[_Applied]) -> None:
        """The dead letters of ``applied`` not written by now (the request failed or was
        cancelled first) stay ARCHIVING, for the sweep to write."""
        for item in applied:
            if item.dead:
                item.dead = []
                self._unclaim(item.target.key)

    async def _finish(self, settings: ShareSettings, applied: list[_Applied],
                      writes: list[tuple[PartitionResult, Appended]]) -> None:
        """Wait until the acknowledgements and acquisitions are durable, then write the
        acknowledgements' dead letters (and archive them)."""
        for result, appended in writes:
            code = await self.state.durable(appended)
            if code != ErrorCode.NONE:
                result.error = _partition_error(code)
                result.acquired = []
        for item in applied:
            item.result.ack_error = await self.state.durable(item.appended)
        for item in applied:
            if item.dead:     # claimed by _apply_acks; _write_dead gives the claim up
                dead, item.dead = item.dead, []
                await self._write_dead(item.target.key, item.target.state, settings, dead,
                                       item.target.view)
        if applied:
            self._wake()

    def _settle_dead(self, key: StateKey, state: SharePartition, settings: ShareSettings,
                     dead: list[DeadLetter], view: PartitionView | None = None,
                     ) -> Coroutine[Any, Any, None]:
        """Copy ``dead`` to the dead-letter topic, then archive them (durably). Claimed from
        now (not when the coroutine runs), so the sweep never writes them twice at once."""
        self._claim(key)
        return self._write_dead(key, state, settings, dead, view)

    async def _write_dead(self, key: StateKey, state: SharePartition, settings: ShareSettings,
                          dead: list[DeadLetter], view: PartitionView | None) -> None:
        try:
            if not dead:
                return
            if view is None:
                name = self.groups.topic_name(key.topic_id)
                if not name:
                    return
                view = await self._topic_view(name, key.partition)
            written = True
            try:
                await dead_letter(self.host, view, key.group_id, settings.dlq_topic, dead,
                                  self._append_elsewhere)
            except DeadLetterTopicRefused as refused:
                # As Kafka: archived without a letter (retrying would hold them for ever).
                written = False
                log.error("share group %s: records of %s-%d archived without dead letters: %s",
                          key.group_id, view.topic, view.index, refused)
            except KafkaError as error:
                # They stay ARCHIVING (never delivered) until the sweep tries again.
                self._retry_at[key] = steady_now_ms() + DEAD_LETTER_RETRY_MS
                log.error("share group %s: dead letters of %s-%d not written: %s",
                          key.group_id, view.topic, view.index, error)
                return
            for letter in dead:
                if written:
                    metrics.SHARE_DEAD_LETTERS.labels(key.group_id, letter.reason).inc(
                        letter.last - letter.first + 1)
                state.archive(letter)
            await self.state.durable(self.state.persist(key, state))
        finally:
            self._unclaim(key)

    # ------------------------------------------------------------------ ShareFetch
    async def share_fetch(self, group_id: str, member_id: str, epoch: int, max_wait_ms: int,
                          max_records: int, add: dict[TopicIdPartition, list[AckBatch]],
                          forget: list[TopicIdPartition]
                          ) -> tuple[ErrorCode, list[PartitionResult]]:
        error, session = self.sessions.use(group_id, member_id, epoch)
        if session is None:
            return error, []
        settings = self.settings(group_id)
        results: dict[TopicIdPartition, PartitionResult] = {}
        targets = session.targets
        acks = {tp: batches for tp, batches in add.items() if batches}
        applied = await self._apply_acks(group_id, member_id, settings, acks, results, targets)
        try:
            if epoch == -1:
                self._persist_applied(applied)
                await self._finish(settings, applied, [])
                await self.close_session(group_id, member_id)
                return ErrorCode.NONE, list(results.values())
            for tp in add:
                if tp not in session.partitions:
                    session.partitions.append(tp)
            for tp in forget:
                if tp in session.partitions:
                    session.partitions.remove(tp)
            fetched = []
            for tp in session.partitions:
                try:
                    fetched.append(await self._target(group_id, tp, settings, targets))
                except KafkaError as failure:
                    results.setdefault(tp, PartitionResult(*tp)).error = failure.code
            if fetched:      # every partition gets its turn to be first
                session.rotation = (session.rotation + 1) % len(fetched)
                fetched = fetched[session.rotation:] + fetched[:session.rotation]
            loop = asyncio.get_running_loop()
            deadline = loop.time() + max(max_wait_ms, 0) / 1000
            writes = await self._acquire(member_id, settings, max(max_records, 1), fetched,
                                         results)
            # One write per share-partition for its acknowledgements and acquisitions (when
            # records were there at once): one flush answers both.
            self._persist_applied(applied)
            while not writes and loop.time() < deadline:
                waits = [target.view.new_data() for target in fetched]
                waits.append(self._became_available())
                await asyncio.wait(waits, timeout=deadline - loop.time(),
                                   return_when=asyncio.FIRST_COMPLETED)
                writes = await self._acquire(member_id, settings, max(max_records, 1), fetched,
                                             results)
            await self._finish(settings, applied, writes)
        finally:
            self._drop_claims(applied)
        for tp, result in results.items():
            if result.acquired:
                try:
                    result.records = await read_covering(targets[tp].view, result.acquired)
                except KafkaError as error:
                    # Not delivered: the records come back when their lock expires.
                    result.error, result.acquired = error.code, []
        return ErrorCode.NONE, list(results.values())

    def _persist_applied(self, applied: list[_Applied]) -> None:
        for item in applied:
            item.appended = self.state.persist(item.target.key, item.target.state)

    async def _acquire(self, member_id: str, settings: ShareSettings, max_records: int,
                       targets: list[Target], results: dict[TopicIdPartition, PartitionResult]
                       ) -> list[tuple[PartitionResult, Appended]]:
        """Acquire records of ``targets`` in turn, up to ``max_records`` in all; each
        share-partition that acquired some is written (the answer waits until durable)."""
        left = max_records
        writes = []
        for target in targets:
            if left <= 0:
                break
            tp = (target.key.topic_id, target.key.partition)
            try:
                acquired = await acquire_records(target.view, target.state, member_id, left,
                                                 settings)
            except KafkaError as error:       # (retention deleted the log under it, say)
                results.setdefault(tp, PartitionResult(*tp)).error = error.code
                continue
            if not acquired:
                if settings.read_committed and target.state.changes:
                    # It archived what it skipped (with this request's acknowledgements, if
                    # any: their answer waits for this append, the key's last).
                    _log_failure(target.key, self.state.persist(target.key, target.state))
                continue
            again = sum(a.last - a.first + 1 for a in acquired if a.count > 1)
            if again:
                metrics.SHARE_REDELIVERIES.labels(target.key.group_id).inc(again)
            left -= sum(a.last - a.first + 1 for a in acquired)
            result = results.setdefault(tp, PartitionResult(*tp))
            result.acquired = acquired
            writes.append((result, self.state.persist(target.key, target.state)))
        return writes

    # ------------------------------------------------------------------ ShareAcknowledge
    async def share_acknowledge(self, group_id: str, member_id: str, epoch: int,
                                acks: dict[TopicIdPartition, list[AckBatch]]
                                ) -> tuple[ErrorCode, list[PartitionResult]]:
        if epoch == 0:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, []
        error, session = self.sessions.use(group_id, member_id, epoch)
        if session is None:
            return error, []
        settings = self.settings(group_id)
        results: dict[TopicIdPartition, PartitionResult] = {}
        applied = await self._apply_acks(group_id, member_id, settings, acks, results,
                                         session.targets)
        try:
            self._persist_applied(applied)
            await self._finish(settings, applied, [])
        finally:
            self._drop_claims(applied)
        if epoch == -1:
            await self.close_session(group_id, member_id)
        return ErrorCode.NONE, list(results.values())

    # ------------------------------------------------------------------ timers
    def _sweep(self) -> None:
        """Expire locks (released as a failed delivery), end back-offs (wake the waiting
        fetches) and remove members whose session timed out: every SWEEP_S."""
        now = steady_now_ms()
        self.groups.expire()
        self.sessions.forget_idle(now)
        wake = False
        for key, state in self.state.all_states():
            expired, ended, archiving = state.due(self._swept_at, now)
            wake = wake or ended
            if archiving and key not in self._lettering and self._retry_at.get(key, 0) <= now:
                settings = self.settings(key.group_id)
                self._tasks.spawn(self._settle_dead(
                    key, state, settings, state.unwritten_dead_letters(settings)))
            if not expired:
                continue
            settings = self.settings(key.group_id)
            metrics.SHARE_LOCK_EXPIRIES.labels(key.group_id).inc(state.expiring(now))
            dead = state.expire_locks(now, settings)
            _log_failure(key, self.state.persist(key, state))
            self._tasks.spawn(self._settle_dead(key, state, settings, dead))
            wake = True
        self._swept_at = now
        if wake:
            self._wake()


def _log_failure(key: StateKey, appended: Appended) -> None:
    """A write nobody waits for (the sweep's): its failure is logged, not left unretrieved.
    The records stay released in memory; a restart makes them deliverable anyway."""
    def done(future: asyncio.Future[None]) -> None:
        if not future.cancelled() and future.exception() is not None:
            log.warning("share state of %s not written: %s", key, future.exception())

    if isinstance(appended, ErrorCode):
        if appended != ErrorCode.NONE:
            log.warning("share state of %s not written: %s", key, appended.name)
    else:
        appended.add_done_callback(done)
