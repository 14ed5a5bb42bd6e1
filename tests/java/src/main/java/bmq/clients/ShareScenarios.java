package bmq.clients;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * KafkaShareConsumer (KIP-932) against BMQ, on a topic whose records v0, v1, ... another client
 * wrote. The share group (TOPIC-share) is set to start at the earliest record first, as a Java
 * application would with Admin (BMQ's and Kafka's default is the latest):
 * <ul>
 * <li>acknowledge: explicit acknowledgement: v2 is released on its first delivery (delivered
 *     again, delivery count 2, and accepted then), v5 rejected, every other record accepted,
 *     each poll's acknowledgements committed with commitSync; after close, one more record is
 *     written and a new consumer of the group must get it and nothing older;
 * <li>implicit: the default acknowledgement mode: every record of a poll is accepted by the
 *     next poll; a new consumer then gets only a record written after;
 * <li>renew: AcknowledgeType.RENEW (KIP-1222: extend the lock) on the first record: it needs
 *     ShareAcknowledge v2, which BMQ does not serve; the commit's result for the partition is
 *     what the application sees.
 * </ul>
 */
public final class ShareScenarios {
    static final Duration POLL = Duration.ofMillis(500);

    private ShareScenarios() {}

    public static void main(String[] args) throws Exception {
        Scenarios.main("ShareScenarios", args, Map.of(
                "acknowledge", (context, topic) -> consume(context, topic, true),
                "implicit", (context, topic) -> consume(context, topic, false),
                "renew", ShareScenarios::renew));
    }

    static KafkaShareConsumer<byte[], byte[]> consumer(Properties props) {
        return new KafkaShareConsumer<>(props, new ByteArrayDeserializer(),
                                        new ByteArrayDeserializer());
    }

    static void startAtEarliest(Scenarios.Context context, String group) throws Exception {
        try (Admin admin = Admin.create(context.client())) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            AlterConfigOp earliest = new AlterConfigOp(
                    new ConfigEntry("share.auto.offset.reset", "earliest"),
                    AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(earliest))).all()
                 .get(context.remaining().toMillis(), TimeUnit.MILLISECONDS);
        }
    }

    static String text(ConsumerRecord<byte[], byte[]> record) {
        return new String(record.value(), StandardCharsets.UTF_8);
    }

    /** What the consumer does with a record in the explicit scenario. */
    static AcknowledgeType decide(ConsumerRecord<byte[], byte[]> record) {
        short count = record.deliveryCount().orElse((short) 0);
        if (text(record).equals("v2") && count == 1) return AcknowledgeType.RELEASE;
        if (text(record).equals("v5")) return AcknowledgeType.REJECT;
        return AcknowledgeType.ACCEPT;
    }

    static Map<String, Object> consume(Scenarios.Context context, String topic, boolean explicit)
            throws Exception {
        String group = topic + "-share";
        startAtEarliest(context, group);
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("group", group);
        Properties props = context.client("group.id", group, "share.acknowledgement.mode",
                                          explicit ? "explicit" : "implicit");
        List<Map<String, Object>> deliveries = new ArrayList<>();
        List<String> commitErrors = new ArrayList<>();
        long total;
        try (KafkaShareConsumer<byte[], byte[]> consumer = consumer(props)) {
            consumer.subscribe(List.of(topic));
            try (KafkaConsumer<byte[], byte[]> probe =
                         ConsumerScenarios.consumer(context.client())) {
                total = ConsumerScenarios.endOffsetSum(probe, topic);
            }
            // Explicit: every record once, v2 twice. Implicit: every record once.
            long expected = explicit ? total + 1 : total;
            while (deliveries.size() < expected) {
                context.check();
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                    Map<String, Object> delivery = Records.describe(record);
                    delivery.put("text", text(record));
                    if (explicit) {
                        AcknowledgeType type = decide(record);
                        consumer.acknowledge(record, type);
                        delivery.put("acknowledged", type.name());
                    }
                    deliveries.add(delivery);
                }
                if (explicit) {
                    for (Map.Entry<TopicIdPartition, Optional<KafkaException>> each :
                            consumer.commitSync(context.remaining()).entrySet()) {
                        each.getValue().ifPresent(error -> commitErrors.add(
                                each.getKey() + ": " + Scenarios.describe(error)));
                    }
                }
            }
            // Implicit: this poll acknowledges the last poll's records (and gets nothing new).
            consumer.poll(Duration.ZERO);
        }
        result.put("deliveries", deliveries);
        result.put("commit_errors", commitErrors);
        try (KafkaProducer<byte[], byte[]> producer =
                     ProducerScenarios.producer(context.client())) {
            producer.send(new ProducerRecord<>(topic, 0, null, ProducerScenarios.utf8("after")))
                    .get();
        }
        List<Map<String, Object>> later = new ArrayList<>();
        try (KafkaShareConsumer<byte[], byte[]> consumer = consumer(props)) {
            consumer.subscribe(List.of(topic));
            while (later.stream().noneMatch(d -> d.get("text").equals("after"))) {
                context.check();
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                    Map<String, Object> delivery = Records.describe(record);
                    delivery.put("text", text(record));
                    if (explicit) consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                    later.add(delivery);
                }
                if (explicit) consumer.commitSync(context.remaining());
            }
        }
        result.put("new_consumer", later);
        return result;
    }

    static Map<String, Object> renew(Scenarios.Context context, String topic) throws Exception {
        String group = topic + "-renew";
        startAtEarliest(context, group);
        Properties props = context.client("group.id", group,
                                          "share.acknowledgement.mode", "explicit");
        Map<String, Object> result = new LinkedHashMap<>();
        try (KafkaShareConsumer<byte[], byte[]> consumer = consumer(props)) {
            consumer.subscribe(List.of(topic));
            ConsumerRecord<byte[], byte[]> first = null;
            while (first == null) {
                context.check();
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                    consumer.acknowledge(record, first == null ? AcknowledgeType.RENEW
                                                               : AcknowledgeType.ACCEPT);
                    if (first == null) first = record;
                }
            }
            List<String> outcomes = new ArrayList<>();
            consumer.commitSync(context.remaining()).forEach((partition, error) -> outcomes.add(
                    error.map(Scenarios::describe).orElse("none")));
            result.put("renewed_offset", first.offset());
            result.put("commit_results", outcomes);
        }
        return result;
    }
}
