package bmq.clients;

import static bmq.clients.AdminScenarios.admin;
import static bmq.clients.AdminScenarios.get;
import static bmq.clients.AdminScenarios.outcome;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;

/**
 * Kafka's Java Admin client on groups and transactions against BMQ:
 * <ul>
 * <li>consumer-groups: a consumer of the group TOPIC-g (group.protocol=consumer) reads TOPIC
 *     and commits; while it is a member the group is listed and described, and deleting the
 *     group, altering and deleting its offsets are refused; once it has left, its offsets are
 *     altered and a new member reads from there; one partition's offset is deleted, then the
 *     group;
 * <li>classic-group: a static member (group.instance.id) of the classic group TOPIC-classic:
 *     the group listed by type and described; the member removed with
 *     removeMembersFromConsumerGroup, after which the group is listed by its state, Empty;
 *     an unknown member and an unknown group;
 * <li>share-groups: a share consumer of TOPIC-s accepts every record of TOPIC; the group is
 *     listed, described and its offsets listed; altering them while it is a member is refused;
 *     after it left they are moved back and a new member gets the records from there; then the
 *     offsets and the group are deleted, and describing or deleting it again fails;
 * <li>transactions: a transactional producer writes to TOPIC and goes away with its transaction
 *     open (a hanging transaction), a plain record follows; the transaction is listed and
 *     listed with filters (an RE2 pattern made with Pattern.quote, a duration, a state), described,
 *     its producer described on the partition, aborted with abortTransaction; a read_committed
 *     consumer then reads to the end; fenceProducers ends it at its coordinator, and
 *     forceTerminateTransaction (KIP-939) is accepted after it.
 * </ul>
 */
public final class AdminGroupScenarios {
    static final Duration POLL = Duration.ofMillis(200);

    private AdminGroupScenarios() {}

    public static void main(String[] args) throws Exception {
        Scenarios.main("AdminGroupScenarios", args, Map.of(
                "consumer-groups", AdminGroupScenarios::consumerGroups,
                "classic-group", AdminGroupScenarios::classicGroup,
                "share-groups", AdminGroupScenarios::shareGroups,
                "transactions", AdminGroupScenarios::transactions));
    }

    /** The groups listed with these options: id to [type, state]. */
    static Map<String, Object> listed(Admin admin, ListGroupsOptions options,
                                      Scenarios.Context context) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        for (GroupListing group : get(admin.listGroups(options).all(), context)) {
            out.put(group.groupId(), List.of(
                    group.type().map(Enum::name).orElse("?"),
                    group.groupState().map(Enum::name).orElse("?")));
        }
        return out;
    }

    static List<Integer> partitionNumbers(Collection<TopicPartition> partitions) {
        return partitions.stream().map(TopicPartition::partition).sorted().toList();
    }

    /** The group's committed offsets, partition to offset. */
    static Map<String, Long> committed(Admin admin, String group, Scenarios.Context context)
            throws Exception {
        Map<String, Long> out = new TreeMap<>();
        get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata(), context)
                .forEach((partition, offset) -> out.put(String.valueOf(partition.partition()),
                                                        offset == null ? null : offset.offset()));
        return out;
    }

    /** Polls until ``count`` records came (or the deadline passes); the first offset read of
     *  each partition. */
    static Map<String, Long> readFirstOffsets(KafkaConsumer<byte[], byte[]> consumer, int count,
                                              Scenarios.Context context) throws Exception {
        Map<String, Long> first = new TreeMap<>();
        int read = 0;
        while (read < count) {
            context.check();
            for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                first.putIfAbsent(String.valueOf(record.partition()), record.offset());
                read++;
            }
        }
        consumer.commitSync();
        return first;
    }

    static Map<String, Object> consumerGroups(Scenarios.Context context, String topic)
            throws Exception {
        String group = topic + "-g";
        Map<String, Object> result = new LinkedHashMap<>();
        try (Admin admin = admin(context)) {
            try (KafkaConsumer<byte[], byte[]> member = ConsumerScenarios.consumer(
                    context.client("group.id", group, "group.protocol", "consumer",
                                   "enable.auto.commit", false,
                                   "auto.offset.reset", "earliest"))) {
                member.subscribe(List.of(topic));
                List<TopicPartition> partitions = ConsumerScenarios.partitions(member, topic);
                long total = ConsumerScenarios.endOffsetSum(member, topic);
                readFirstOffsets(member, (int) total, context);
                result.put("listed_while_active", listed(
                        admin, ListGroupsOptions.forConsumerGroups(), context).get(group));
                ConsumerGroupDescription described = get(admin.describeConsumerGroups(
                        List.of(group)).describedGroups().get(group), context);
                result.put("state", described.groupState().name());
                result.put("type", described.type().name());
                List<List<Integer>> assignments = new ArrayList<>();
                for (MemberDescription each : described.members()) {
                    assignments.add(partitionNumbers(each.assignment().topicPartitions()));
                }
                result.put("assignments", assignments);
                result.put("committed", committed(admin, group, context));
                result.put("delete_active", outcome(() -> get(
                        admin.deleteConsumerGroups(List.of(group)).all(), context)));
                result.put("alter_active", outcome(() -> get(admin.alterConsumerGroupOffsets(
                        group, Map.of(partitions.get(0), new OffsetAndMetadata(1))).all(),
                        context)));
                result.put("delete_offsets_active", outcome(() -> get(
                        admin.deleteConsumerGroupOffsets(group, Set.of(partitions.get(0))).all(),
                        context)));
            }
            // The member has left: the group is empty, its offsets the operator's to move.
            result.put("state_after_leaving", get(admin.describeConsumerGroups(List.of(group))
                    .describedGroups().get(group), context).groupState().name());
            Map<TopicPartition, OffsetAndMetadata> moved = Map.of(
                    new TopicPartition(topic, 0), new OffsetAndMetadata(5),
                    new TopicPartition(topic, 1), new OffsetAndMetadata(10, "moved"));
            get(admin.alterConsumerGroupOffsets(group, moved).all(), context);
            result.put("committed_after_alter", committed(admin, group, context));
            try (KafkaConsumer<byte[], byte[]> again = ConsumerScenarios.consumer(
                    context.client("group.id", group, "group.protocol", "consumer",
                                   "enable.auto.commit", false))) {
                again.subscribe(List.of(topic));
                result.put("read_from", readFirstOffsets(again, 15 + 10, context));
            }
            get(admin.deleteConsumerGroupOffsets(group, Set.of(new TopicPartition(topic, 2)))
                    .all(), context);
            result.put("committed_after_offset_delete", committed(admin, group, context));
            get(admin.deleteConsumerGroups(List.of(group)).all(), context);
            result.put("listed_after_delete", listed(
                    admin, ListGroupsOptions.forConsumerGroups(), context).containsKey(group));
            result.put("delete_again", outcome(() -> get(
                    admin.deleteConsumerGroups(List.of(group)).all(), context)));
        }
        return result;
    }

    static Map<String, Object> classicGroup(Scenarios.Context context, String topic)
            throws Exception {
        String group = topic + "-classic";
        String instance = group + "-member";
        Map<String, Object> result = new LinkedHashMap<>();
        try (Admin admin = admin(context);
             KafkaConsumer<byte[], byte[]> member = ConsumerScenarios.consumer(context.client(
                     "group.id", group, "group.protocol", "classic",
                     "group.instance.id", instance, "enable.auto.commit", false,
                     "auto.offset.reset", "earliest"))) {
            member.subscribe(List.of(topic));
            while (member.assignment().isEmpty()) {
                context.check();
                member.poll(POLL);
            }
            member.commitSync();
            ListGroupsOptions classic =
                    new ListGroupsOptions().withTypes(Set.of(GroupType.CLASSIC));
            result.put("listed", listed(admin, classic, context).get(group));
            ConsumerGroupDescription described = get(admin.describeConsumerGroups(
                    List.of(group)).describedGroups().get(group), context);
            result.put("state", described.groupState().name());
            result.put("type", described.type().name());
            result.put("assignor", described.partitionAssignor());
            result.put("members", described.members().stream().map(each -> List.of(
                    each.groupInstanceId().orElse(""),
                    partitionNumbers(each.assignment().topicPartitions()))).toList());
            get(admin.removeMembersFromConsumerGroup(group,
                    new RemoveMembersFromConsumerGroupOptions(
                            List.of(new MemberToRemove(instance)))).all(), context);
            result.put("state_after_removal", get(admin.describeConsumerGroups(List.of(group))
                    .describedGroups().get(group), context).groupState().name());
            result.put("listed_empty", listed(admin, new ListGroupsOptions()
                    .inGroupStates(Set.of(GroupState.EMPTY)), context).get(group));
            result.put("remove_unknown_member", outcome(() -> get(
                    admin.removeMembersFromConsumerGroup(group,
                            new RemoveMembersFromConsumerGroupOptions(List.of(
                                    new MemberToRemove(group + "-nobody")))).all(), context)));
            result.put("describe_unknown_group", outcome(() -> get(admin.describeConsumerGroups(
                    List.of(group + "-nobody")).all(), context)));
        }
        return result;
    }

    /** The share group's offsets: partition to [start offset, lag]. */
    static Map<String, Object> shareOffsets(Admin admin, String group, String topic,
                                            int partitions, Scenarios.Context context)
            throws Exception {
        List<TopicPartition> asked = new ArrayList<>();
        for (int p = 0; p < partitions; p++) asked.add(new TopicPartition(topic, p));
        Map<TopicPartition, SharePartitionOffsetInfo> found = get(admin.listShareGroupOffsets(
                Map.of(group, new ListShareGroupOffsetsSpec().topicPartitions(asked)))
                .partitionsToOffsetInfo(group), context);
        Map<String, Object> out = new TreeMap<>();
        found.forEach((partition, info) -> out.put(String.valueOf(partition.partition()),
                info == null ? null : List.of(info.startOffset(), info.lag().orElse(-1L))));
        return out;
    }

    /** Polls the share consumer until ``count`` records came, accepting them; their offsets. */
    static List<Long> shareRead(KafkaShareConsumer<byte[], byte[]> consumer, int count,
                                Scenarios.Context context) throws Exception {
        List<Long> offsets = new ArrayList<>();
        while (offsets.size() < count) {
            context.check();
            for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                offsets.add(record.offset());
            }
            consumer.commitSync();
        }
        return offsets.stream().sorted().toList();
    }

    static Map<String, Object> shareGroups(Scenarios.Context context, String topic)
            throws Exception {
        String group = topic + "-s";
        ShareScenarios.startAtEarliest(context, group);
        Map<String, Object> result = new LinkedHashMap<>();
        try (Admin admin = admin(context)) {
            try (KafkaShareConsumer<byte[], byte[]> member = ShareScenarios.consumer(
                    context.client("group.id", group))) {
                member.subscribe(List.of(topic));
                result.put("read", shareRead(member, 10, context));
                result.put("listed_while_active", listed(
                        admin, ListGroupsOptions.forShareGroups(), context).get(group));
                ShareGroupDescription described = get(admin.describeShareGroups(List.of(group))
                        .describedGroups().get(group), context);
                result.put("state", described.groupState().name());
                List<List<Integer>> assignments = new ArrayList<>();
                for (ShareMemberDescription each : described.members()) {
                    assignments.add(partitionNumbers(each.assignment().topicPartitions()));
                }
                result.put("assignments", assignments);
                result.put("offsets", shareOffsets(admin, group, topic, 1, context));
                result.put("alter_active", outcome(() -> get(admin.alterShareGroupOffsets(
                        group, Map.of(new TopicPartition(topic, 0), 3L)).all(), context)));
                result.put("delete_active", outcome(() -> get(
                        admin.deleteShareGroups(List.of(group)).all(), context)));
            }
            get(admin.alterShareGroupOffsets(group, Map.of(new TopicPartition(topic, 0), 3L))
                    .all(), context);
            result.put("offsets_after_alter", shareOffsets(admin, group, topic, 1, context));
            try (KafkaShareConsumer<byte[], byte[]> again = ShareScenarios.consumer(
                    context.client("group.id", group))) {
                again.subscribe(List.of(topic));
                result.put("read_after_alter", shareRead(again, 7, context));
            }
            get(admin.deleteShareGroupOffsets(group, Set.of(topic)).all(), context);
            result.put("offsets_after_delete", shareOffsets(admin, group, topic, 1, context));
            get(admin.deleteShareGroups(List.of(group)).all(), context);
            result.put("listed_after_delete", listed(
                    admin, ListGroupsOptions.forShareGroups(), context).containsKey(group));
            result.put("describe_unknown", outcome(() -> get(admin.describeShareGroups(
                    List.of(group)).all(), context)));
            result.put("delete_unknown", outcome(() -> get(
                    admin.deleteShareGroups(List.of(group)).all(), context)));
        }
        return result;
    }

    static Map<String, Object> describeTransaction(TransactionDescription description) {
        return Map.of("state", description.state().name(),
                      "partitions", description.topicPartitions().stream()
                              .map(TopicPartition::toString).sorted().toList(),
                      "producer_id", description.producerId(),
                      "epoch", description.producerEpoch());
    }

    static Map<String, Object> transactions(Scenarios.Context context, String topic)
            throws Exception {
        String transactionalId = topic + "-txn";
        TopicPartition partition = new TopicPartition(topic, 0);
        Map<String, Object> result = new LinkedHashMap<>();
        KafkaProducer<byte[], byte[]> hanging = ProducerScenarios.producer(context.client(
                "transactional.id", transactionalId, "transaction.timeout.ms", 600000));
        hanging.initTransactions();
        hanging.beginTransaction();
        hanging.send(new ProducerRecord<>(topic, 0, null, ProducerScenarios.utf8("open-0"))).get();
        hanging.send(new ProducerRecord<>(topic, 0, null, ProducerScenarios.utf8("open-1"))).get();
        // Gone without ending its transaction: what a crashed producer leaves behind.
        hanging.close(Duration.ZERO);
        try (KafkaProducer<byte[], byte[]> plain = ProducerScenarios.producer(context.client())) {
            plain.send(new ProducerRecord<>(topic, 0, null, ProducerScenarios.utf8("after")))
                 .get();
        }
        try (Admin admin = admin(context)) {
            Map<String, Object> listed = new TreeMap<>();
            for (TransactionListing each : get(admin.listTransactions().all(), context)) {
                if (each.transactionalId().equals(transactionalId)) {
                    listed.put(each.transactionalId(), each.state().name());
                }
            }
            result.put("listed", listed);
            result.put("listed_by_pattern", get(admin.listTransactions(
                    new ListTransactionsOptions().filterOnTransactionalIdPattern(
                            java.util.regex.Pattern.quote(topic) + "-t.n")).all(), context)
                    .stream().map(TransactionListing::transactionalId).toList());
            result.put("listed_running_an_hour", get(admin.listTransactions(
                    new ListTransactionsOptions().filterOnDuration(3_600_000)).all(), context)
                    .stream().map(TransactionListing::transactionalId)
                    .filter(transactionalId::equals).toList());
            result.put("listed_committing", get(admin.listTransactions(
                    new ListTransactionsOptions().filterStates(List.of(
                            TransactionState.PREPARE_COMMIT))).all(), context)
                    .stream().map(TransactionListing::transactionalId)
                    .filter(transactionalId::equals).toList());
            result.put("described", describeTransaction(get(admin.describeTransactions(
                    List.of(transactionalId)).description(transactionalId), context)));
            List<ProducerState> producers = get(admin.describeProducers(List.of(partition))
                    .partitionResult(partition), context).activeProducers();
            ProducerState open = producers.stream()
                    .filter(p -> p.currentTransactionStartOffset().isPresent())
                    .findFirst().orElseThrow();
            result.put("open_transaction_start", open.currentTransactionStartOffset()
                    .getAsLong());
            result.put("producers", producers.size());
            result.put("read_committed_end_before", endOffset(context, partition));
            get(admin.abortTransaction(new AbortTransactionSpec(
                    partition, open.producerId(), (short) open.producerEpoch(),
                    open.coordinatorEpoch().orElse(0))).all(), context);
            result.put("read_committed_end_after", endOffset(context, partition));
            result.put("open_after_abort", get(admin.describeProducers(List.of(partition))
                    .partitionResult(partition), context).activeProducers().stream()
                    .filter(p -> p.currentTransactionStartOffset().isPresent()).count());
            get(admin.fenceProducers(List.of(transactionalId)).all(), context);
            result.put("described_after_fence", describeTransaction(get(
                    admin.describeTransactions(List.of(transactionalId))
                         .description(transactionalId), context)));
            result.put("force_terminate", outcome(() -> get(
                    admin.forceTerminateTransaction(transactionalId).result(), context)));
            result.put("describe_unknown", outcome(() -> get(admin.describeTransactions(
                    List.of(topic + "-nobody")).all(), context)));
        }
        return result;
    }

    /** The partition's end for a read_committed consumer: its last stable offset. */
    static long endOffset(Scenarios.Context context, TopicPartition partition) {
        try (KafkaConsumer<byte[], byte[]> consumer = ConsumerScenarios.consumer(
                context.client("isolation.level", "read_committed"))) {
            return consumer.endOffsets(List.of(partition)).get(partition);
        }
    }
}
