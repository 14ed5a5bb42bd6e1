package bmq.clients;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java producer against BMQ. Each scenario reports what it wrote (offsets, and the exact
 * keys, values and headers) for the tests to read back with another client:
 * <ul>
 * <li>idempotent: 300 records, acks=all, idempotence on, five requests in flight;
 * <li>transactions: commit, abort, commit again (with consumer offsets sent to each), then a
 *     second producer with the same transactional.id fences the first and commits;
 * <li>codecs: 60 records with keys, binary values and headers with each codec (none, gzip,
 *     snappy, lz4, zstd), codec i into partition i;
 * <li>steady: an idempotent producer writing 4000 records, about 500 a second, while the test
 *     kills and restarts the broker: the outcome of every send (its offset, or its error).
 * </ul>
 */
public final class ProducerScenarios {
    static final List<String> CODECS = List.of("none", "gzip", "snappy", "lz4", "zstd");

    private ProducerScenarios() {}

    public static void main(String[] args) throws Exception {
        Scenarios.main("ProducerScenarios", args, Map.of(
                "idempotent", ProducerScenarios::idempotent,
                "transactions", ProducerScenarios::transactions,
                "codecs", ProducerScenarios::codecs,
                "steady", ProducerScenarios::steady));
    }

    /** A producer whose sends block (for metadata, for buffer space) 15 s at most. */
    static KafkaProducer<byte[], byte[]> producer(Properties props) {
        props.putIfAbsent("max.block.ms", "15000");
        return new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
    }

    static Future<RecordMetadata> send(KafkaProducer<byte[], byte[]> producer,
                                       ProducerRecord<byte[], byte[]> record,
                                       Scenarios.Context context) throws Exception {
        context.check();
        return producer.send(record);
    }

    static byte[] utf8(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    /** Offsets of the sends, waiting for each (within the scenario's deadline). */
    static List<Long> offsets(List<Future<RecordMetadata>> sent, Scenarios.Context context)
            throws Exception {
        List<Long> offsets = new ArrayList<>();
        for (Future<RecordMetadata> each : sent) {
            offsets.add(each.get(context.remaining().toMillis(), TimeUnit.MILLISECONDS).offset());
        }
        return offsets;
    }

    static Map<String, Object> idempotent(Scenarios.Context context, String topic)
            throws Exception {
        Properties props = context.client("enable.idempotence", true, "acks", "all",
                                          "max.in.flight.requests.per.connection", 5,
                                          "linger.ms", 2, "batch.size", 2048);
        try (KafkaProducer<byte[], byte[]> producer = producer(props)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < 300; i++) {
                sent.add(send(producer, new ProducerRecord<>(topic, 0, utf8("k" + i),
                                                             utf8("idempotent-" + i)), context));
            }
            producer.flush();
            return Map.of("offsets", offsets(sent, context));
        }
    }

    /** Sends ``values`` to partition 0 in the producer's open transaction. */
    static List<Long> sendAll(KafkaProducer<byte[], byte[]> producer, String topic, String prefix,
                              int count, Scenarios.Context context) throws Exception {
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            sent.add(send(producer, new ProducerRecord<>(topic, 0, null, utf8(prefix + i)),
                          context));
        }
        producer.flush();
        return offsets(sent, context);
    }

    static Map<String, Object> transactions(Scenarios.Context context, String topic)
            throws Exception {
        String transactionalId = topic + "-txn";
        String group = topic + "-eos";
        // The consumed-input offsets a consume-transform-produce loop would send: any partition.
        TopicPartition input = new TopicPartition(topic, 0);
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("group", group);
        Properties props = context.client("transactional.id", transactionalId,
                                          "transaction.timeout.ms", 30000);
        KafkaProducer<byte[], byte[]> first = producer(props);
        try {
            first.initTransactions();
            first.beginTransaction();
            result.put("committed", sendAll(first, topic, "committed-a", 5, context));
            first.sendOffsetsToTransaction(Map.of(input, new OffsetAndMetadata(42)),
                                           new ConsumerGroupMetadata(group));
            first.commitTransaction();

            first.beginTransaction();
            result.put("aborted", sendAll(first, topic, "aborted-", 5, context));
            first.sendOffsetsToTransaction(Map.of(input, new OffsetAndMetadata(99)),
                                           new ConsumerGroupMetadata(group));
            first.abortTransaction();

            first.beginTransaction();
            result.put("committed_again", sendAll(first, topic, "committed-b", 5, context));
            first.commitTransaction();

            // A second instance with the same transactional.id: its InitProducerId bumps the
            // epoch, and the first one's next transaction is refused.
            try (KafkaProducer<byte[], byte[]> second = producer(props)) {
                second.initTransactions();
                try {
                    first.beginTransaction();
                    sendAll(first, topic, "zombie-", 1, context);
                    first.commitTransaction();
                    result.put("fenced", null);
                } catch (Exception fenced) {
                    result.put("fenced", Scenarios.describe(fenced));
                }
                second.beginTransaction();
                result.put("after_fencing", sendAll(second, topic, "after-fencing-", 2, context));
                second.commitTransaction();
            }
        } finally {
            first.close(Duration.ofSeconds(5));
        }
        return result;
    }

    /** 60 records of one codec: every 10th key null, values long enough to compress, some
     *  empty or null, two headers with the same key (one of them with a null value). */
    static Map<String, Object> codecs(Scenarios.Context context, String topic) throws Exception {
        Map<String, Object> result = new LinkedHashMap<>();
        for (int partition = 0; partition < CODECS.size(); partition++) {
            String codec = CODECS.get(partition);
            Properties props = context.client("compression.type", codec, "linger.ms", 50,
                                              "enable.idempotence", true, "acks", "all");
            List<Map<String, Object>> records = new ArrayList<>();
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> producer = producer(props)) {
                for (int i = 0; i < 60; i++) {
                    byte[] key = i % 10 == 0 ? null : utf8(codec + "-key-" + i);
                    byte[] value = value(codec, i);
                    List<Header> headers = List.of(
                            new RecordHeader("codec", utf8(codec)),
                            new RecordHeader("n", utf8(Integer.toString(i))),
                            new RecordHeader("n", null));
                    sent.add(send(producer, new ProducerRecord<>(topic, partition, key, value,
                                                                 headers), context));
                    Map<String, Object> record = new LinkedHashMap<>();
                    record.put("key", key);
                    record.put("value", value);
                    record.put("headers", Records.headers(headers));
                    records.add(record);
                }
                producer.flush();
                List<Long> offsets = offsets(sent, context);
                for (int i = 0; i < records.size(); i++) {
                    records.get(i).put("offset", offsets.get(i));
                }
            }
            result.put(codec, records);
        }
        return result;
    }

    /** Every byte value, then text that compresses; record 7 empty and record 13 null. */
    static byte[] value(String codec, int i) {
        if (i == 7) return new byte[0];
        if (i == 13) return null;
        byte[] text = utf8((codec + " record " + i + " ").repeat(20));
        byte[] value = new byte[256 + text.length];
        for (int b = 0; b < 256; b++) value[b] = (byte) (b + i);
        System.arraycopy(text, 0, value, 256, text.length);
        return value;
    }

    static Map<String, Object> steady(Scenarios.Context context, String topic) throws Exception {
        Properties props = context.client("enable.idempotence", true, "acks", "all",
                                          "linger.ms", 5, "delivery.timeout.ms", 50000);
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = producer(props)) {
            for (int i = 0; i < 4000; i++) {
                sent.add(send(producer, new ProducerRecord<>(topic, 0, null, utf8("steady-" + i)),
                              context));
                if (i % 10 == 9) Thread.sleep(20);
            }
            producer.flush();
        }
        List<Long> offsets = new ArrayList<>();
        List<String> errors = new ArrayList<>();
        for (Future<RecordMetadata> each : sent) {
            try {
                offsets.add(each.get().offset());
            } catch (ExecutionException failed) {
                offsets.add(null);
                errors.add(Scenarios.describe(failed.getCause()));
            }
        }
        return Map.of("offsets", offsets, "errors", errors);
    }
}
