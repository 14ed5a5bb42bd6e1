package bmq.legacy;

import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * kafka-clients 0.10.2 against BMQ, one job per run, one line per record on stdout:
 *
 *   produce BOOTSTRAP TOPIC COUNT CODEC   "OFFSET TIMESTAMP" of each acknowledged record; record
 *                                         i has key "key-i", value "value-i" repeated i % 50
 *                                         times, timestamp 1700000000000 + i
 *   consume BOOTSTRAP TOPIC COUNT GROUP   "OFFSET TIMESTAMP KEY VALUE" (base64; "-" for null)
 *                                         of partition 0's first COUNT records, read in GROUP
 *                                         from the start, then the offset committed
 */
public final class LegacyClient {
    private static final long BASE_TS = 1_700_000_000_000L;

    public static void main(String[] args) throws Exception {
        String bootstrap = args[1], topic = args[2];
        int count = Integer.parseInt(args[3]);
        if (args[0].equals("produce")) {
            produce(bootstrap, topic, count, args[4]);
        } else {
            consume(bootstrap, topic, count, args[4]);
        }
    }

    private static void produce(String bootstrap, String topic, int count, String codec)
            throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("acks", "all");
        props.put("compression.type", codec);
        props.put("linger.ms", "5");
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props,
                new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < count; i++) {
                byte[] key = ("key-" + i).getBytes("UTF-8");
                byte[] value = ("value-" + i).repeat(i % 50).getBytes("UTF-8");
                sent.add(producer.send(new ProducerRecord<>(topic, 0, BASE_TS + i, key, value)));
            }
            producer.flush();
            for (Future<RecordMetadata> future : sent) {
                RecordMetadata metadata = future.get();
                System.out.println(metadata.offset() + " " + metadata.timestamp());
            }
        }
    }

    private static String text(byte[] bytes) {
        return bytes == null ? "-" : Base64.getEncoder().encodeToString(bytes);
    }

    private static void consume(String bootstrap, String topic, int count, String group) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("group.id", group);
        props.put("enable.auto.commit", "false");
        props.put("auto.offset.reset", "earliest");
        TopicPartition partition = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props,
                new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.assign(Collections.singletonList(partition));
            consumer.seekToBeginning(Collections.singletonList(partition));
            int seen = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (seen < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> record : consumer.poll(500)) {
                    if (seen++ < count) {
                        System.out.println(record.offset() + " " + record.timestamp() + " "
                                + text(record.key()) + " " + text(record.value()));
                    }
                }
            }
            consumer.commitSync();
            System.out.println("committed " + consumer.committed(partition).offset());
        }
    }
}
