package bmq.clients;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Kafka's Java Admin client against BMQ: topics, partitions, configs, records and offsets, the
 * cluster, and the requests BMQ does not serve. Each scenario reports what an operator would
 * see (descriptions, config values with their source, offsets) and the simple class names of
 * the exceptions the Admin reports for requests Kafka refuses:
 * <ul>
 * <li>topics: TOPIC-a created with 3 partitions and two configs, listed, described (by name and
 *     by id) and its configs described; created again (TopicExistsException); validate-only;
 *     an invalid name; grown to 5 partitions, shrunk (InvalidPartitionsException); deleted,
 *     then described and deleted again (UnknownTopicOrPartitionException);
 * <li>configs: TOPIC's configs set with incrementalAlterConfigs, then SET, DELETE and APPEND
 *     in one call, described after each with their source; an unknown config name, a bad
 *     value, an unknown topic; the broker's configs;
 * <li>offsets: listOffsets of TOPIC's partitions (earliest, latest, for a timestamp, max
 *     timestamp), then deleteRecords below offset 5 of partition 0 and past its end;
 * <li>cluster: describeCluster, describeFeatures, and Admin calls of APIs BMQ does not serve:
 *     each must end with Kafka's error in time, never hang.
 * </ul>
 */
public final class AdminScenarios {
    private AdminScenarios() {}

    public static void main(String[] args) throws Exception {
        Scenarios.main("AdminScenarios", args, Map.of(
                "topics", AdminScenarios::topics,
                "configs", AdminScenarios::configs,
                "broker-configs", AdminScenarios::brokerConfigs,
                "offsets", AdminScenarios::offsets,
                "cluster", AdminScenarios::cluster));
    }

    static Admin admin(Scenarios.Context context) {
        return Admin.create(context.client("default.api.timeout.ms", 15000,
                                           "request.timeout.ms", 10000));
    }

    /** The future's value, waited for within the scenario's deadline. */
    static <T> T get(KafkaFuture<T> future, Scenarios.Context context) throws Exception {
        return future.get(context.remaining().toMillis(), TimeUnit.MILLISECONDS);
    }

    @FunctionalInterface
    interface Call {
        Object run() throws Exception;
    }

    /** The simple class name of the exception the call ends with ("ok" if none): the cause of
     *  an ExecutionException, as the Admin's futures report Kafka's errors. */
    static String outcome(Call call) {
        try {
            call.run();
            return "ok";
        } catch (ExecutionException failed) {
            Throwable cause = failed.getCause() == null ? failed : failed.getCause();
            return cause.getClass().getSimpleName();
        } catch (Exception failed) {
            return failed.getClass().getSimpleName();
        }
    }

    static Map<String, Object> describeTopic(TopicDescription topic) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("name", topic.name());
        out.put("id", topic.topicId().toString());
        out.put("internal", topic.isInternal());
        List<Map<String, Object>> partitions = new ArrayList<>();
        for (TopicPartitionInfo info : topic.partitions()) {
            Map<String, Object> partition = new LinkedHashMap<>();
            partition.put("partition", info.partition());
            partition.put("leader", info.leader() == null ? null : info.leader().id());
            partition.put("replicas", info.replicas().stream().map(Node::id).toList());
            partition.put("isr", info.isr().stream().map(Node::id).toList());
            partitions.add(partition);
        }
        out.put("partitions", partitions);
        return out;
    }

    /** The topic described once every partition has a leader: at once on `bmq serve`; in a
     *  cluster once the controller has given each partition an owner (a moment after
     *  CreateTopics is answered, where Kafka elects leaders as it creates the topic). */
    static TopicDescription withLeaders(Admin admin, String topic, Scenarios.Context context)
            throws Exception {
        while (true) {
            TopicDescription described = get(admin.describeTopics(List.of(topic))
                                                  .allTopicNames(), context).get(topic);
            if (described.partitions().stream().allMatch(p -> p.leader() != null)) {
                return described;
            }
            context.check();
            Thread.sleep(50);
        }
    }

    /** The topics listed (internal ones too) once ``done`` holds of them, or at the deadline:
     *  at once on `bmq serve`; in a cluster a broker lists a change made through another one
     *  once ZooKeeper's watch has told it (milliseconds), as Kafka's brokers list a change once
     *  its metadata has reached them. */
    static Set<String> listedOnce(Admin admin, java.util.function.Predicate<Set<String>> done,
                                  Scenarios.Context context) throws Exception {
        while (true) {
            Set<String> names = get(admin.listTopics(new ListTopicsOptions().listInternal(true))
                                         .names(), context);
            if (done.test(names) || context.remaining().toMillis() < 5000) return names;
            Thread.sleep(50);
        }
    }

    /** The named entries of a resource's config: value, source, read-only. */
    static Map<String, Object> configEntries(Admin admin, ConfigResource resource,
                                             Set<String> names, Scenarios.Context context)
            throws Exception {
        Config config = get(admin.describeConfigs(List.of(resource)).all(), context)
                .get(resource);
        Map<String, Object> out = new TreeMap<>();
        for (ConfigEntry entry : config.entries()) {
            if (names.isEmpty() || names.contains(entry.name())) {
                out.put(entry.name(), Map.of("value", String.valueOf(entry.value()),
                                             "source", entry.source().name(),
                                             "read_only", entry.isReadOnly()));
            }
        }
        return out;
    }

    static Map<String, Object> topics(Scenarios.Context context, String topic) throws Exception {
        String created = topic + "-a";
        Map<String, Object> result = new LinkedHashMap<>();
        try (Admin admin = admin(context)) {
            NewTopic newTopic = new NewTopic(created, 3, (short) 1).configs(Map.of(
                    "retention.ms", "3600000", "cleanup.policy", "compact"));
            CreateTopicsResult creation = admin.createTopics(List.of(newTopic));
            get(creation.all(), context);
            result.put("create_answer", List.of(
                    get(creation.numPartitions(created), context),
                    (int) get(creation.replicationFactor(created), context),
                    get(creation.config(created), context).get("retention.ms").value()));
            String byDefault = topic + "-default";
            String assigned = topic + "-assigned";
            int node = get(admin.describeCluster().nodes(), context).iterator().next().id();
            get(admin.createTopics(List.of(
                    new NewTopic(byDefault, Optional.empty(), Optional.empty()),
                    new NewTopic(assigned, Map.of(0, List.of(node), 1, List.of(node))))).all(),
                context);
            Map<String, TopicDescription> more = get(admin.describeTopics(
                    List.of(byDefault, assigned)).allTopicNames(), context);
            result.put("default_partitions", more.get(byDefault).partitions().size());
            result.put("assigned_partitions", more.get(assigned).partitions().size());
            // Deleted by id (DeleteTopics v6), as Kafka's tools may.
            get(admin.deleteTopics(TopicCollection.ofTopicIds(List.of(
                    more.get(byDefault).topicId(), more.get(assigned).topicId()))).all(), context);
            Set<String> all = listedOnce(admin, names -> !names.contains(byDefault)
                                                         && !names.contains(assigned), context);
            result.put("deleted_by_id", !all.contains(byDefault) && !all.contains(assigned));
            result.put("internal_listed", all.contains("__consumer_offsets"));
            result.put("internal_described", get(admin.describeTopics(
                    List.of("__consumer_offsets")).allTopicNames(), context)
                    .get("__consumer_offsets").isInternal());
            result.put("created_again", outcome(() -> get(
                    admin.createTopics(List.of(new NewTopic(created, 3, (short) 1))).all(),
                    context)));
            result.put("validate_only", outcome(() -> get(admin.createTopics(
                    List.of(new NewTopic(topic + "-v", 2, (short) 1)),
                    new CreateTopicsOptions().validateOnly(true)).all(), context)));
            result.put("invalid_name", outcome(() -> get(admin.createTopics(
                    List.of(new NewTopic("bad/name", 1, (short) 1))).all(), context)));
            Set<String> listed = get(admin.listTopics().names(), context);
            result.put("listed", listed.contains(created));
            result.put("validate_only_listed", listed.contains(topic + "-v"));
            TopicDescription described = withLeaders(admin, created, context);
            result.put("described", describeTopic(described));
            result.put("described_by_id", describeTopic(get(admin.describeTopics(
                    TopicCollection.ofTopicIds(List.of(described.topicId()))).allTopicIds(),
                    context).get(described.topicId())));
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, created);
            result.put("configs", configEntries(admin, resource,
                    Set.of("retention.ms", "cleanup.policy", "segment.bytes"), context));
            get(admin.createPartitions(Map.of(created, NewPartitions.increaseTo(5))).all(),
                context);
            result.put("partitions_after_increase", get(admin.describeTopics(List.of(created))
                    .allTopicNames(), context).get(created).partitions().size());
            result.put("decrease", outcome(() -> get(admin.createPartitions(
                    Map.of(created, NewPartitions.increaseTo(2))).all(), context)));
            result.put("increase_unknown", outcome(() -> get(admin.createPartitions(
                    Map.of(topic + "-missing", NewPartitions.increaseTo(2))).all(), context)));
            get(admin.deleteTopics(List.of(created)).all(), context);
            result.put("listed_after_delete", listedOnce(
                    admin, names -> !names.contains(created), context).contains(created));
            result.put("describe_deleted", outcome(() -> get(
                    admin.describeTopics(List.of(created)).allTopicNames(), context)));
            result.put("delete_again", outcome(() -> get(
                    admin.deleteTopics(List.of(created)).all(), context)));
        }
        return result;
    }

    static AlterConfigOp op(String name, String value, AlterConfigOp.OpType type) {
        return new AlterConfigOp(new ConfigEntry(name, value), type);
    }

    static Map<String, Object> configs(Scenarios.Context context, String topic) throws Exception {
        Set<String> names = Set.of("retention.ms", "max.message.bytes", "cleanup.policy",
                                   "segment.ms");
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Map<String, Object> result = new LinkedHashMap<>();
        try (Admin admin = admin(context)) {
            // (Kafka 4's Admin has no alterConfigs: the legacy AlterConfigs is gone from it.)
            get(admin.incrementalAlterConfigs(Map.of(resource, List.of(
                    op("retention.ms", "7200000", AlterConfigOp.OpType.SET),
                    op("segment.ms", "600000", AlterConfigOp.OpType.SET)))).all(), context);
            result.put("after_alter", configEntries(admin, resource, names, context));
            get(admin.incrementalAlterConfigs(Map.of(resource, List.of(
                    op("max.message.bytes", "2097152", AlterConfigOp.OpType.SET),
                    op("retention.ms", null, AlterConfigOp.OpType.DELETE),
                    op("cleanup.policy", "compact", AlterConfigOp.OpType.APPEND)))).all(),
                context);
            result.put("after_incremental", configEntries(admin, resource, names, context));
            get(admin.incrementalAlterConfigs(Map.of(resource, List.of(
                    op("cleanup.policy", "delete", AlterConfigOp.OpType.SUBTRACT),
                    op("segment.ms", "700000", AlterConfigOp.OpType.SET))),
                    new AlterConfigsOptions().validateOnly(true)).all(), context);
            result.put("after_validate_only", configEntries(admin, resource, names, context));
            get(admin.incrementalAlterConfigs(Map.of(resource, List.of(
                    op("cleanup.policy", "delete", AlterConfigOp.OpType.SUBTRACT)))).all(),
                context);
            result.put("after_subtract", configEntries(admin, resource,
                                                       Set.of("cleanup.policy"), context));
            ConfigEntry detailed = get(admin.describeConfigs(List.of(resource),
                    new DescribeConfigsOptions().includeSynonyms(true)
                                                .includeDocumentation(true)).all(), context)
                    .get(resource).get("max.message.bytes");
            result.put("synonyms", detailed.synonyms().stream()
                    .map(synonym -> synonym.name() + "=" + synonym.value() + " "
                                    + synonym.source().name()).toList());
            result.put("documented", detailed.documentation() != null
                                     && !detailed.documentation().isEmpty());
            result.put("type", detailed.type().name());
            result.put("unknown_name", outcome(() -> get(admin.incrementalAlterConfigs(
                    Map.of(resource, List.of(op("no.such.config", "1",
                                                AlterConfigOp.OpType.SET)))).all(), context)));
            result.put("bad_value", outcome(() -> get(admin.incrementalAlterConfigs(
                    Map.of(resource, List.of(op("retention.ms", "soon",
                                                AlterConfigOp.OpType.SET)))).all(), context)));
            result.put("unknown_topic", outcome(() -> get(admin.describeConfigs(List.of(
                    new ConfigResource(ConfigResource.Type.TOPIC, topic + "-missing"))).all(),
                    context)));
            Node broker = get(admin.describeCluster().nodes(), context).iterator().next();
            result.put("broker", configEntries(admin, new ConfigResource(
                    ConfigResource.Type.BROKER, String.valueOf(broker.id())),
                    Set.of("num.partitions", "log.retention.hours"), context));
        }
        return result;
    }

    /** A broker's dynamic config (its own, then the cluster-wide default under it), a static
     *  one refused, the broker's loggers, and a group's config; ``group`` names the group. */
    static Map<String, Object> brokerConfigs(Scenarios.Context context, String group)
            throws Exception {
        Set<String> threads = Set.of("log.cleaner.threads");
        Map<String, Object> result = new LinkedHashMap<>();
        try (Admin admin = admin(context)) {
            Node node = get(admin.describeCluster().nodes(), context).iterator().next();
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER,
                                                       String.valueOf(node.id()));
            ConfigResource cluster = new ConfigResource(ConfigResource.Type.BROKER, "");
            result.put("static", configEntries(admin, broker, threads, context));
            get(admin.incrementalAlterConfigs(Map.of(broker, List.of(
                    op("log.cleaner.threads", "2", AlterConfigOp.OpType.SET)))).all(), context);
            get(admin.incrementalAlterConfigs(Map.of(cluster, List.of(
                    op("log.cleaner.threads", "3", AlterConfigOp.OpType.SET)))).all(), context);
            result.put("per_broker", configEntries(admin, broker, threads, context));
            result.put("cluster_default", configEntries(admin, cluster, threads, context));
            get(admin.incrementalAlterConfigs(Map.of(broker, List.of(
                    op("log.cleaner.threads", null, AlterConfigOp.OpType.DELETE)))).all(),
                context);
            result.put("per_broker_deleted", configEntries(admin, broker, threads, context));
            get(admin.incrementalAlterConfigs(Map.of(cluster, List.of(
                    op("log.cleaner.threads", null, AlterConfigOp.OpType.DELETE)))).all(),
                context);
            result.put("both_deleted", configEntries(admin, broker, threads, context));
            result.put("static_refused", outcome(() -> get(admin.incrementalAlterConfigs(
                    Map.of(broker, List.of(op("node.id", "7", AlterConfigOp.OpType.SET))))
                    .all(), context)));
            result.put("loggers", outcome(() -> get(admin.describeConfigs(List.of(
                    new ConfigResource(ConfigResource.Type.BROKER_LOGGER,
                                       String.valueOf(node.id())))).all(), context)));
            ConfigResource groupResource = new ConfigResource(ConfigResource.Type.GROUP, group);
            get(admin.incrementalAlterConfigs(Map.of(groupResource, List.of(
                    op("share.record.lock.duration.ms", "45000", AlterConfigOp.OpType.SET))))
                    .all(), context);
            result.put("group", configEntries(admin, groupResource, Set.of(
                    "share.record.lock.duration.ms", "share.delivery.count.limit"), context));
            result.put("group_bad_value", outcome(() -> get(admin.incrementalAlterConfigs(
                    Map.of(groupResource, List.of(op("share.record.lock.duration.ms", "1",
                                                     AlterConfigOp.OpType.SET)))).all(),
                    context)));
        }
        return result;
    }

    static Map<String, Object> offsets(Scenarios.Context context, String topic) throws Exception {
        // The caller passes TOPIC:TIMESTAMP, a timestamp to look up.
        String[] topicAndTime = topic.split(":", 2);
        String name = topicAndTime[0];
        long timestamp = Long.parseLong(topicAndTime[1]);
        Map<String, Object> result = new LinkedHashMap<>();
        try (Admin admin = admin(context)) {
            int partitions = get(admin.describeTopics(List.of(name)).allTopicNames(), context)
                    .get(name).partitions().size();
            Map<String, OffsetSpec> specs = new LinkedHashMap<>();
            specs.put("earliest", OffsetSpec.earliest());
            specs.put("latest", OffsetSpec.latest());
            specs.put("for_timestamp", OffsetSpec.forTimestamp(timestamp));
            specs.put("max_timestamp", OffsetSpec.maxTimestamp());
            for (Map.Entry<String, OffsetSpec> spec : specs.entrySet()) {
                Map<TopicPartition, OffsetSpec> asked = new LinkedHashMap<>();
                for (int p = 0; p < partitions; p++) {
                    asked.put(new TopicPartition(name, p), spec.getValue());
                }
                Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> answers =
                        get(admin.listOffsets(asked).all(), context);
                List<List<Long>> found = new ArrayList<>();
                for (int p = 0; p < partitions; p++) {
                    ListOffsetsResult.ListOffsetsResultInfo info =
                            answers.get(new TopicPartition(name, p));
                    found.add(List.of(info.offset(), info.timestamp()));
                }
                result.put(spec.getKey(), found);
            }
            TopicPartition first = new TopicPartition(name, 0);
            result.put("deleted_low_watermark", get(admin.deleteRecords(Map.of(
                    first, RecordsToDelete.beforeOffset(5))).lowWatermarks().get(first),
                    context).lowWatermark());
            result.put("earliest_after_delete", get(admin.listOffsets(Map.of(
                    first, OffsetSpec.earliest())).partitionResult(first), context).offset());
            result.put("delete_past_end", outcome(() -> get(admin.deleteRecords(Map.of(
                    first, RecordsToDelete.beforeOffset(1_000_000))).all(), context)));
        }
        return result;
    }

    static Map<String, Object> cluster(Scenarios.Context context, String topic) throws Exception {
        Map<String, Object> result = new LinkedHashMap<>();
        try (Admin admin = admin(context)) {
            DescribeClusterResult cluster = admin.describeCluster();
            List<Node> nodes = new ArrayList<>(get(cluster.nodes(), context));
            result.put("cluster_id", get(cluster.clusterId(), context));
            result.put("controller", get(cluster.controller(), context).id());
            result.put("nodes", nodes.stream().map(node -> node.host() + ":" + node.port())
                                    .sorted().toList());
            Map<String, Object> features = new TreeMap<>();
            get(admin.describeFeatures().featureMetadata(), context).finalizedFeatures()
                    .forEach((feature, range) -> features.put(feature, range.maxVersionLevel()));
            result.put("finalized_features", features);
            int node = nodes.get(0).id();
            TopicPartition partition = new TopicPartition(topic, 0);
            // BMQ's one "log dir" is the shared storage; the sizes of this topic's partitions
            Map<String, Object> logDirs = new TreeMap<>();
            get(admin.describeLogDirs(List.of(node)).allDescriptions(), context).get(node)
                    .forEach((dir, description) -> {
                        Map<String, Long> sizes = new TreeMap<>();
                        description.replicaInfos().forEach((replica, info) -> {
                            if (replica.topic().equals(topic)) {
                                sizes.put(replica.toString(), info.size());
                            }
                        });
                        logDirs.put(dir, sizes);
                    });
            result.put("log_dirs", logDirs);
            Map<String, Object> unserved = new TreeMap<>();
            unserved.put("electLeaders", outcome(() -> get(admin.electLeaders(
                    ElectionType.PREFERRED, Set.of(partition)).all(), context)));
            unserved.put("listPartitionReassignments", outcome(() -> get(
                    admin.listPartitionReassignments().reassignments(), context)));
            unserved.put("alterPartitionReassignments", outcome(() -> get(
                    admin.alterPartitionReassignments(Map.of(partition, Optional.empty())).all(),
                    context)));
            unserved.put("describeMetadataQuorum", outcome(() -> get(
                    admin.describeMetadataQuorum().quorumInfo(), context)));
            unserved.put("describeDelegationToken", outcome(() -> get(
                    admin.describeDelegationToken().delegationTokens(), context)));
            unserved.put("unregisterBroker", outcome(() -> get(
                    admin.unregisterBroker(node).all(), context)));
            unserved.put("listConfigResources", outcome(() -> get(
                    admin.listConfigResources().all(), context)));
            result.put("unserved", unserved);
        }
        return result;
    }
}
