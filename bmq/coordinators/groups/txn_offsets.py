"""TxnOffsetCommit: offsets committed inside a transaction (``send_offsets_to_transaction``).

They are appended to the group's ``__consumer_offsets`` partition at once, as a transactional
batch of the producer, but count only when the transaction commits: the transaction
coordinator writes the COMMIT or ABORT marker into this partition and calls ``complete_txn``;
a replay applies them at their COMMIT marker (``shard.replay``). Until then OffsetFetch with
require_stable answers UNSTABLE_OFFSET_COMMIT for those partitions, as Kafka does.
"""

from __future__ import annotations

from bmq.coordinators.groups.group import Group
from bmq.coordinators.groups.offsets import OffsetStore
from bmq.coordinators.groups.records import OffsetKey, OffsetValue
from bmq.coordinators.groups.shard import coordinator_error, offset_entries
from bmq.metadata.topics import TopicPartition
from bmq.protocol.errors import ErrorCode, KafkaError
from bmq.writepath.partitions import now_ms


class TxnOffsetStore(OffsetStore):
    async def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 generation_id: int, member_id: str,
                                 group_instance_id: str | None,
                                 offsets: dict[TopicPartition, OffsetValue]
                                 ) -> dict[TopicPartition, ErrorCode]:
        error = self.coordinator_error(group_id, allow_empty=True)
        group: Group | None = None
        if error == ErrorCode.NONE:
            group = self.group(group_id)
            if group is None and generation_id < 0:
                group = self._get_or_create(group_id)
            if group is None:
                error = ErrorCode.ILLEGAL_GENERATION
            else:
                error = self._validate_commit(group, generation_id, member_id,
                                              group_instance_id, transactional=True)
        if error != ErrorCode.NONE or group is None or not offsets:
            return dict.fromkeys(offsets, error)
        shard = self._shard(group_id)
        try:
            durable = shard.write(offset_entries(group_id, offsets),
                                  (producer_id, producer_epoch))
        except KafkaError as failure:
            return dict.fromkeys(offsets, coordinator_error(failure.code))
        pending = shard.txn_offsets.setdefault(producer_id, {}).setdefault(group_id, {})
        for tp, value in offsets.items():
            if tp not in pending:
                group.pending_commits[tp] += 1
            pending[tp] = value
        return dict.fromkeys(offsets, await self.durable(durable))

    def complete_txn(self, index: int, producer_id: int, commit: bool) -> None:
        """The transaction's marker is durable in offsets partition ``index``: its offsets
        become the groups' committed offsets (COMMIT) or are dropped (ABORT)."""
        shard = self.shards.get(index)
        if shard is None:
            return
        for group_id, offsets in shard.txn_offsets.pop(producer_id, {}).items():
            group = shard.groups.get(group_id)
            if group is None and commit:
                group = shard.groups[group_id] = Group(group_id, now_ms())
            for tp, value in offsets.items():
                if group is not None and group.pending_commits[tp] > 0:
                    group.pending_commits[tp] -= 1
                    if group.pending_commits[tp] <= 0:
                        del group.pending_commits[tp]
                if commit and group is not None:
                    group.offsets[tp] = value
                    shard.latest[OffsetKey(group_id, *tp)] = value

