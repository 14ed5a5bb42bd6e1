package bmq.clients;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Many small producers in one JVM, for bench.databus: {@code CLIENTS} KafkaProducers of their
 * own (each its connections, sender thread and batching, with the Java client's defaults:
 * acks=all, idempotence, linger.ms 5, five requests in flight), each sending {@code RATE}
 * records a second with a random key and a value of {@code SIZE} bytes for {@code SECONDS}
 * seconds, every client starting at a random point of its interval as independent applications
 * do. Prints one JSON object: records sent, send errors, and each record's latency from send()
 * to its acknowledgement, in microseconds.
 *
 * <pre>java -cp ... bmq.clients.ManyProducers BOOTSTRAP TOPIC CLIENTS RATE SIZE SECONDS START_MS</pre>
 * START_MS: the wall-clock time (ms) to start at, so several JVMs start together.
 */
public final class ManyProducers {
    private ManyProducers() {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int clients = Integer.parseInt(args[2]);
        double rate = Double.parseDouble(args[3]);
        int size = Integer.parseInt(args[4]);
        double seconds = Double.parseDouble(args[5]);
        long startMs = Long.parseLong(args[6]);

        List<KafkaProducer<byte[], byte[]>> producers = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            Properties props = new Properties();
            props.put("bootstrap.servers", bootstrap);
            props.put("key.serializer", ByteArraySerializer.class.getName());
            props.put("value.serializer", ByteArraySerializer.class.getName());
            producers.add(new KafkaProducer<>(props));
        }
        byte[] value = new byte[size];
        new Random().nextBytes(value);
        long intervalNs = (long) (1e9 / rate);
        int total = (int) Math.ceil(clients * rate * seconds) + clients;
        long[] latencies = new long[total];
        AtomicLong acknowledged = new AtomicLong();
        AtomicLong errors = new AtomicLong();

        Thread.sleep(Math.max(0, startMs - System.currentTimeMillis()));
        long start = System.nanoTime();
        long end = start + (long) (seconds * 1e9);
        long[] nextAt = new long[clients];
        for (int i = 0; i < clients; i++) {
            nextAt[i] = start + ThreadLocalRandom.current().nextLong(intervalNs);
        }
        int sent = 0;
        while (true) {
            long now = System.nanoTime();
            if (now >= end) break;
            long soonest = Long.MAX_VALUE;
            for (int i = 0; i < clients; i++) {
                while (nextAt[i] <= now && sent < total) {
                    byte[] key = Long.toString(ThreadLocalRandom.current().nextLong(1L << 30))
                            .getBytes();
                    int slot = sent++;
                    long sentAt = System.nanoTime();
                    producers.get(i).send(new ProducerRecord<>(topic, key, value),
                            (metadata, error) -> {
                                if (error != null) {
                                    errors.incrementAndGet();
                                    latencies[slot] = -1;
                                } else {
                                    latencies[slot] = (System.nanoTime() - sentAt) / 1000;
                                    acknowledged.incrementAndGet();
                                }
                            });
                    nextAt[i] += intervalNs;
                }
                soonest = Math.min(soonest, nextAt[i]);
            }
            long waitNs = soonest - System.nanoTime();
            if (waitNs > 0) {
                Thread.sleep(waitNs / 1_000_000, (int) (waitNs % 1_000_000));
            }
        }
        for (KafkaProducer<byte[], byte[]> producer : producers) {
            producer.flush();
        }
        for (KafkaProducer<byte[], byte[]> producer : producers) {
            producer.close();
        }
        List<Long> acked = new ArrayList<>();
        for (int i = 0; i < sent; i++) {
            if (latencies[i] >= 0) acked.add(latencies[i]);
        }
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("sent", sent);
        result.put("errors", errors.get());
        result.put("latencies_us", acked);
        System.out.println(Json.write(result));
    }
}
