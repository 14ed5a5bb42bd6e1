package bmq.clients;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

/**
 * A Kafka Streams application on BMQ, exactly once (processing.guarantee=exactly_once_v2): a
 * count and sum per word, with a repartition topic and a state store whose changelog is a
 * compacted topic.
 *
 * <pre>
 *   java -cp CLASSPATH bmq.clients.StreamsApp BOOTSTRAP SETTINGS|- APPLICATION_ID INPUT OUTPUT
 *        STATE_DIR [STREAMS_SETTING=VALUE ...]
 * </pre>
 *
 * INPUT's values are "WORD AMOUNT" (its keys are not used); the word becomes the key
 * (selectKey), so Streams writes the records to APPLICATION_ID-by-word-repartition before
 * grouping them. The store "sums" keeps "COUNT,SUM" for each word (RocksDB unless the settings
 * name other store suppliers), and every update goes to OUTPUT: the record cache is off, so a
 * word's n-th record gives the output "n,SUM" exactly once. SETTINGS is a properties file of
 * settings for every client (security); the STREAMS_SETTING pairs after STATE_DIR come last.
 *
 * <p>It runs until it reads "close" or the end of stdin, and answers "query" with the store's
 * local contents. Everything it reports is one JSON line on stdout:
 * <ul>
 * <li>{"state": STATE, "tasks": [...]}: each state change, with the active tasks then;
 * <li>{"restored": {"store", "changelog", "partition", "from", "to", "records"}}: a store
 *     partition restored from its changelog: the offsets it read from and to, and how many
 *     records that was;
 * <li>{"query": {WORD: "COUNT,SUM", ...}} or {"query_error": "..."} (not queryable now);
 * <li>{"error": "..."}: a stream thread died (the client then shuts down);
 * <li>{"closed": true}: closed, having left the group (its tasks move at once).
 * </ul>
 */
public final class StreamsApp {
    static final String STORE = "sums";

    private StreamsApp() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 6) {
            System.err.println("usage: StreamsApp BOOTSTRAP SETTINGS|- APPLICATION_ID INPUT OUTPUT"
                               + " STATE_DIR [STREAMS_SETTING=VALUE ...]");
            System.exit(2);
        }
        Properties props = Scenarios.settings(args[1]);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[2]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        for (int i = 6; i < args.length; i++) {
            String[] pair = args[i].split("=", 2);
            props.put(pair[0], pair[1]);
        }
        KafkaStreams streams = new KafkaStreams(topology(args[3], args[4]), props);
        streams.setStateListener((now, before) -> report(Map.of(
                "state", now.name(), "tasks", activeTasks(streams))));
        streams.setGlobalStateRestoreListener(new RestoreReporter());
        streams.setUncaughtExceptionHandler(error -> {
            report(Map.of("error", Scenarios.describe(error)));
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        BufferedReader commands = new BufferedReader(
                new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String command; (command = commands.readLine()) != null && !command.equals("close");) {
            if (command.equals("query")) query(streams);
        }
        // Leaving the group (Streams stays in it by default, until its session times out) hands
        // the tasks over at once.
        boolean closed = streams.close(CloseOptions.groupMembershipOperation(
                CloseOptions.GroupMembershipOperation.LEAVE_GROUP).withTimeout(
                Duration.ofSeconds(30)));
        report(Map.of("closed", closed));
        System.exit(0);
    }

    static org.apache.kafka.streams.Topology topology(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .map((key, value) -> {
                    String[] wordAndAmount = value.split(" ", 2);
                    return KeyValue.pair(wordAndAmount[0], Long.parseLong(wordAndAmount[1]));
                })
                .groupByKey(Grouped.with("by-word", Serdes.String(), Serdes.Long()))
                .aggregate(() -> "0,0", StreamsApp::add,
                           Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as(STORE)
                                   .withKeySerde(Serdes.String())
                                   .withValueSerde(Serdes.String()))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return builder.build();
    }

    /** "COUNT,SUM" with one more record of AMOUNT. */
    static String add(String word, long amount, String countAndSum) {
        String[] parts = countAndSum.split(",", 2);
        return (Long.parseLong(parts[0]) + 1) + "," + (Long.parseLong(parts[1]) + amount);
    }

    static List<String> activeTasks(KafkaStreams streams) {
        TreeSet<String> tasks = new TreeSet<>();
        for (ThreadMetadata thread : streams.metadataForLocalThreads()) {
            for (TaskMetadata task : thread.activeTasks()) tasks.add(task.taskId().toString());
        }
        return new ArrayList<>(tasks);
    }

    static void query(KafkaStreams streams) {
        try {
            ReadOnlyKeyValueStore<String, String> store = streams.store(
                    StoreQueryParameters.fromNameAndType(STORE,
                                                         QueryableStoreTypes.keyValueStore()));
            Map<String, Object> contents = new TreeMap<>();
            try (KeyValueIterator<String, String> all = store.all()) {
                all.forEachRemaining(entry -> contents.put(entry.key, entry.value));
            }
            report(Map.of("query", contents));
        } catch (RuntimeException notQueryable) {
            report(Map.of("query_error", Scenarios.describe(notQueryable)));
        }
    }

    static synchronized void report(Map<String, Object> event) {
        System.out.println(Json.write(event));
        System.out.flush();
    }

    /** Reports each store partition restored from its changelog: the changelog's offsets it
     *  restored from and to, and how many records that was. */
    static final class RestoreReporter implements StateRestoreListener {
        private final Map<TopicPartition, long[]> offsets = new ConcurrentHashMap<>();

        @Override
        public void onRestoreStart(TopicPartition changelog, String store, long start, long end) {
            offsets.put(changelog, new long[] {start, end});
        }

        @Override
        public void onBatchRestored(TopicPartition changelog, String store, long batchEnd,
                                    long records) {}

        @Override
        public void onRestoreEnd(TopicPartition changelog, String store, long records) {
            long[] startAndEnd = offsets.getOrDefault(changelog, new long[] {-1, -1});
            Map<String, Object> restored = new LinkedHashMap<>();
            restored.put("store", store);
            restored.put("changelog", changelog.topic());
            restored.put("partition", changelog.partition());
            restored.put("from", startAndEnd[0]);
            restored.put("to", startAndEnd[1]);
            restored.put("records", records);
            report(Map.of("restored", restored));
        }
    }
}
