package bmq.clients;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The Java consumer with assigned partitions (no group) against BMQ, on records another client
 * wrote:
 * <ul>
 * <li>seek: to an offset, to the last record, to the beginning and the end; a position past the
 *     end with auto.offset.reset=none (an error) and with latest (reset to the end);
 * <li>offsets-for-times: offsetsForTimes of partition 0 around its records' timestamps;
 * <li>read-committed: every partition read to its end with isolation.level read_committed and
 *     read_uncommitted: the values each sees and the end offsets (LSO, high watermark);
 * <li>follow: the topic read from the beginning to its end, slowly (20 records a poll), while
 *     the test kills a partition's owner: every value in the order read. It writes the line
 *     "follow: 500 read" on stderr after the 500th record, for the test to act then.
 * </ul>
 */
public final class ConsumerScenarios {
    static final Duration POLL = Duration.ofMillis(200);

    private ConsumerScenarios() {}

    public static void main(String[] args) throws Exception {
        Scenarios.main("ConsumerScenarios", args, Map.of(
                "seek", ConsumerScenarios::seek,
                "offsets-for-times", ConsumerScenarios::offsetsForTimes,
                "read-committed", ConsumerScenarios::readCommitted,
                "follow", ConsumerScenarios::follow));
    }

    static KafkaConsumer<byte[], byte[]> consumer(Properties props) {
        props.putIfAbsent("default.api.timeout.ms", "15000");
        return new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    /** The topic's partitions. */
    static List<TopicPartition> partitions(KafkaConsumer<byte[], byte[]> consumer, String topic) {
        List<TopicPartition> partitions = new ArrayList<>();
        for (PartitionInfo info : consumer.partitionsFor(topic)) {
            partitions.add(new TopicPartition(topic, info.partition()));
        }
        return partitions;
    }

    /** The sum of the topic's end offsets: its record count, when it has no transactions. */
    static long endOffsetSum(KafkaConsumer<byte[], byte[]> consumer, String topic) {
        return consumer.endOffsets(partitions(consumer, topic)).values().stream()
                       .mapToLong(Long::longValue).sum();
    }

    /** The first record polled from the consumer's position, or null when none came in time. */
    static ConsumerRecord<byte[], byte[]> next(KafkaConsumer<byte[], byte[]> consumer,
                                               Scenarios.Context context) throws Exception {
        while (true) {
            context.check();
            for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                return record;
            }
        }
    }

    static Map<String, Object> seek(Scenarios.Context context, String topic) throws Exception {
        TopicPartition partition = new TopicPartition(topic, 0);
        Map<String, Object> result = new LinkedHashMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(context.client())) {
            consumer.assign(List.of(partition));
            long begin = consumer.beginningOffsets(List.of(partition)).get(partition);
            long end = consumer.endOffsets(List.of(partition)).get(partition);
            result.put("beginning", begin);
            result.put("end", end);
            consumer.seek(partition, 5);
            result.put("after_seek_5", next(consumer, context).offset());
            consumer.seek(partition, end - 1);
            result.put("after_seek_last", next(consumer, context).offset());
            consumer.seekToBeginning(List.of(partition));
            result.put("position_at_beginning", consumer.position(partition));
            result.put("first_from_beginning", next(consumer, context).offset());
            consumer.seekToEnd(List.of(partition));
            result.put("position_at_end", consumer.position(partition));
        }
        try (KafkaConsumer<byte[], byte[]> consumer =
                     consumer(context.client("auto.offset.reset", "none"))) {
            consumer.assign(List.of(partition));
            consumer.seek(partition, (Long) result.get("end") + 5);
            try {
                next(consumer, context);
                result.put("past_end_without_reset", null);
            } catch (Exception error) {
                result.put("past_end_without_reset", Scenarios.describe(error));
            }
        }
        try (KafkaConsumer<byte[], byte[]> consumer =
                     consumer(context.client("auto.offset.reset", "latest"))) {
            consumer.assign(List.of(partition));
            consumer.seek(partition, (Long) result.get("end") + 5);
            consumer.poll(POLL);
            long position = consumer.position(partition);
            while (position != (Long) result.get("end") && !context.expired()) {
                consumer.poll(POLL);
                position = consumer.position(partition);
            }
            result.put("past_end_reset_to_latest", position);
        }
        return result;
    }

    static Map<String, Object> offsetsForTimes(Scenarios.Context context, String topic)
            throws Exception {
        TopicPartition partition = new TopicPartition(topic, 0);
        Map<String, Object> result = new LinkedHashMap<>();
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(context.client())) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long first = next(consumer, context).timestamp();
            result.put("first_timestamp", first);
            List<Map<String, Object>> answers = new ArrayList<>();
            for (long query : new long[] {first - 1, first, first + 1, first + 10_500,
                                          first + 1_000_000_000L}) {
                OffsetAndTimestamp found = consumer.offsetsForTimes(Map.of(partition, query))
                                                   .get(partition);
                Map<String, Object> answer = new LinkedHashMap<>();
                answer.put("query", query);
                answer.put("offset", found == null ? null : found.offset());
                answer.put("timestamp", found == null ? null : found.timestamp());
                answers.add(answer);
            }
            result.put("answers", answers);
        }
        return result;
    }

    static Map<String, Object> readCommitted(Scenarios.Context context, String topic)
            throws Exception {
        Map<String, Object> result = new LinkedHashMap<>();
        for (String isolation : List.of("read_committed", "read_uncommitted")) {
            Map<String, Object> seen = new LinkedHashMap<>();
            try (KafkaConsumer<byte[], byte[]> consumer =
                         consumer(context.client("isolation.level", isolation))) {
                List<TopicPartition> partitions = partitions(consumer, topic);
                consumer.assign(partitions);
                consumer.seekToBeginning(partitions);
                Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
                List<String> values = new ArrayList<>();
                while (!partitions.stream().allMatch(p -> consumer.position(p) >= ends.get(p))) {
                    context.check();
                    for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                        values.add(new String(record.value(), StandardCharsets.UTF_8));
                    }
                }
                Map<String, Long> endOffsets = new LinkedHashMap<>();
                ends.forEach((p, end) -> endOffsets.put(Integer.toString(p.partition()), end));
                seen.put("end_offsets", endOffsets);
                seen.put("values", values);
            }
            result.put(isolation, seen);
        }
        return result;
    }

    static Map<String, Object> follow(Scenarios.Context context, String topic) throws Exception {
        List<String> values = new ArrayList<>();
        // Small fetches (a batch or two): the consumer keeps fetching while the test acts.
        try (KafkaConsumer<byte[], byte[]> consumer =
                     consumer(context.client("max.poll.records", 20,
                                             "max.partition.fetch.bytes", 1024))) {
            List<TopicPartition> partitions = partitions(consumer, topic);
            long total = endOffsetSum(consumer, topic);
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            while (values.size() < total) {
                context.check();
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                    values.add(new String(record.value(), StandardCharsets.UTF_8));
                    if (values.size() == 500) System.err.println("follow: 500 read");
                }
                Thread.sleep(5);
            }
        }
        return Map.of("values", values);
    }
}
