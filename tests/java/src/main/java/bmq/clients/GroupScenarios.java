package bmq.clients;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;

/**
 * Java consumers in a group against BMQ, with the classic protocol or KIP-848's
 * (group.protocol=consumer), two members polled in turn on one thread:
 * <ul>
 * <li>classic, consumer: both members join, split the partitions and read the topic to its end,
 *     committing what they read (also when partitions are revoked, so nothing is read twice);
 *     then one new record a partition, each of which its partition's owner must get;
 * <li>static-classic, static-consumer: members with group.instance.id; one closes and a new
 *     process with its instance id takes its place: it gets the same partitions, and the other
 *     member keeps its own without a rebalance;
 * <li>regex: the consumer protocol with a java.util.regex.Pattern (matched by the client) and
 *     with a SubscriptionPattern (an RE2J regex matched by the broker), each matching TOPIC
 *     and a topic it creates once it has read TOPIC: it must read that topic's record too.
 * </ul>
 */
public final class GroupScenarios {
    static final Duration POLL = Duration.ofMillis(100);

    private GroupScenarios() {}

    public static void main(String[] args) throws Exception {
        Scenarios.main("GroupScenarios", args, Map.of(
                "classic", (context, topic) -> readTogether(context, topic, "classic"),
                "consumer", (context, topic) -> readTogether(context, topic, "consumer"),
                "static-classic", (context, topic) -> staticMembers(context, topic, "classic"),
                "static-consumer", (context, topic) -> staticMembers(context, topic, "consumer"),
                "regex", GroupScenarios::regex));
    }

    /** One group member: its consumer, what it read, and what was revoked from it. */
    static final class Member implements ConsumerRebalanceListener {
        final KafkaConsumer<byte[], byte[]> consumer;
        final List<ConsumerRecord<byte[], byte[]>> records = new ArrayList<>();
        final List<List<Integer>> revoked = new ArrayList<>();
        private final Map<TopicPartition, OffsetAndMetadata> uncommitted = new HashMap<>();

        Member(Scenarios.Context context, String group, String protocol, String instance,
               String topic) {
            Properties props = context.client("group.id", group, "group.protocol", protocol,
                                              "enable.auto.commit", false,
                                              "auto.offset.reset", "earliest");
            if (instance != null) props.put("group.instance.id", instance);
            // Classic members learn of a rebalance from a heartbeat: every 3 s by default.
            // (The consumer protocol's interval is the broker's, and the setting is refused.)
            if (protocol.equals("classic")) props.put("heartbeat.interval.ms", "500");
            consumer = ConsumerScenarios.consumer(props);
            consumer.subscribe(List.of(topic), this);
        }

        void poll() {
            for (ConsumerRecord<byte[], byte[]> record : consumer.poll(POLL)) {
                records.add(record);
                uncommitted.put(new TopicPartition(record.topic(), record.partition()),
                                new OffsetAndMetadata(record.offset() + 1));
            }
            if (!uncommitted.isEmpty()) {
                try {
                    consumer.commitSync(uncommitted);
                    uncommitted.clear();
                } catch (RebalanceInProgressException rebalancing) {
                    // Committed by onPartitionsRevoked, or on the next poll.
                }
            }
        }

        Set<Integer> assignment() {
            Set<Integer> partitions = new TreeSet<>();
            consumer.assignment().forEach(partition -> partitions.add(partition.partition()));
            return partitions;
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            Map<TopicPartition, OffsetAndMetadata> ours = new HashMap<>();
            for (TopicPartition partition : partitions) {
                OffsetAndMetadata offset = uncommitted.remove(partition);
                if (offset != null) ours.put(partition, offset);
            }
            if (!ours.isEmpty()) consumer.commitSync(ours);
            if (!partitions.isEmpty()) {
                revoked.add(new ArrayList<>(new TreeSet<>(
                        partitions.stream().map(TopicPartition::partition).toList())));
            }
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}

        Map<String, Object> report() {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("assignment", assignment());
            out.put("generation", consumer.groupMetadata().generationId());
            out.put("revoked", revoked);
            out.put("records", records.stream().map(Records::describe).toList());
            return out;
        }
    }

    /** Both members own partitions, no partition twice, every partition owned. */
    static boolean split(Member a, Member b, int partitions) {
        Set<Integer> first = a.assignment();
        Set<Integer> second = b.assignment();
        Set<Integer> all = new HashSet<>(first);
        all.addAll(second);
        return !first.isEmpty() && !second.isEmpty() && all.size() == partitions
               && first.size() + second.size() == partitions;
    }

    static int readCount(Member a, Member b) {
        return a.records.size() + b.records.size();
    }

    static Map<String, Object> readTogether(Scenarios.Context context, String topic,
                                            String protocol) throws Exception {
        String group = topic + "-" + protocol;
        Member a = new Member(context, group, protocol, null, topic);
        Member b = new Member(context, group, protocol, null, topic);
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("group", group);
        try {
            List<TopicPartition> partitions = ConsumerScenarios.partitions(a.consumer, topic);
            long total = ConsumerScenarios.endOffsetSum(a.consumer, topic);
            while (!(split(a, b, partitions.size()) && readCount(a, b) >= total)) {
                context.check();
                a.poll();
                b.poll();
            }
            result.put("split_after_reading", List.of(a.assignment(), b.assignment()));
            try (KafkaProducer<byte[], byte[]> producer =
                         ProducerScenarios.producer(context.client())) {
                for (TopicPartition partition : partitions) {
                    producer.send(new ProducerRecord<>(topic, partition.partition(), null,
                                                       ProducerScenarios.utf8("late")));
                }
                producer.flush();
            }
            while (readCount(a, b) < total + partitions.size()) {
                context.check();
                a.poll();
                b.poll();
            }
            result.put("a", a.report());
            result.put("b", b.report());
        } finally {
            a.consumer.close();
            b.consumer.close();
        }
        return result;
    }

    static Map<String, Object> staticMembers(Scenarios.Context context, String topic,
                                             String protocol) throws Exception {
        String group = topic + "-static-" + protocol;
        Member a = new Member(context, group, protocol, "a", topic);
        Member b = new Member(context, group, protocol, "b", topic);
        Map<String, Object> result = new LinkedHashMap<>();
        result.put("group", group);
        int partitions = a.consumer.partitionsFor(topic).size();
        Member restarted = null;
        try {
            while (!split(a, b, partitions)) {
                context.check();
                a.poll();
                b.poll();
            }
            // A round more, so that both have completed the rebalance (the consumer protocol
            // reconciles on the next heartbeat).
            a.poll();
            b.poll();
            result.put("a_before", a.assignment());
            result.put("b_before", b.assignment());
            result.put("a_generation_before", a.consumer.groupMetadata().generationId());
            int revocationsBefore = a.revoked.size();
            b.consumer.close();
            restarted = new Member(context, group, protocol, "b", topic);
            while (restarted.assignment().isEmpty()) {
                context.check();
                a.poll();
                restarted.poll();
            }
            // Time for a rebalance the restart might have started to show at the other member
            // (a classic member hears of one at its next heartbeat, within 500 ms).
            for (int round = 0; round < 5; round++) {
                a.poll();
                restarted.poll();
            }
            result.put("b_after", restarted.assignment());
            result.put("a_after", a.assignment());
            result.put("a_generation_after", a.consumer.groupMetadata().generationId());
            result.put("a_revoked_after_restart", new ArrayList<>(
                    a.revoked.subList(revocationsBefore, a.revoked.size())));
        } finally {
            a.consumer.close();
            if (restarted != null) restarted.consumer.close();
        }
        return result;
    }

    static Map<String, Object> regex(Scenarios.Context context, String topic) throws Exception {
        Map<String, Object> result = new LinkedHashMap<>();
        for (String kind : List.of("pattern", "subscription-pattern")) {
            String created = topic + "-" + kind;
            // Topic names have no characters special to either syntax but the dot.
            String regex = topic.replace(".", "\\.") + "(-" + kind + ")?";
            Properties props = context.client("group.id", created, "group.protocol", "consumer",
                                              "enable.auto.commit", false,
                                              "auto.offset.reset", "earliest",
                                              // The client matches a Pattern against metadata.
                                              "metadata.max.age.ms", 500);
            Map<String, Object> seen = new LinkedHashMap<>();
            try (KafkaConsumer<byte[], byte[]> consumer = ConsumerScenarios.consumer(props)) {
                if (kind.equals("pattern")) consumer.subscribe(Pattern.compile(regex));
                else consumer.subscribe(new SubscriptionPattern(regex));
                long total = ConsumerScenarios.endOffsetSum(consumer, topic);
                Map<String, Integer> counts = new TreeMap<>();
                while (counts.getOrDefault(topic, 0) < total) {
                    context.check();
                    consumer.poll(POLL).forEach(r -> counts.merge(r.topic(), 1, Integer::sum));
                }
                try (Admin admin = Admin.create(context.client())) {
                    admin.createTopics(List.of(new NewTopic(created, 1, (short) 1))).all()
                         .get(context.remaining().toMillis(), TimeUnit.MILLISECONDS);
                }
                try (KafkaProducer<byte[], byte[]> producer =
                             ProducerScenarios.producer(context.client())) {
                    producer.send(new ProducerRecord<>(created, ProducerScenarios.utf8("new")))
                            .get(context.remaining().toMillis(), TimeUnit.MILLISECONDS);
                }
                while (counts.getOrDefault(created, 0) < 1) {
                    context.check();
                    consumer.poll(POLL).forEach(r -> counts.merge(r.topic(), 1, Integer::sum));
                }
                seen.put("records_at_start", total);
                seen.put("records_by_topic", counts);
                seen.put("assigned_topics", new TreeSet<>(consumer.assignment().stream()
                        .map(TopicPartition::topic).toList()));
            }
            result.put(kind, seen);
        }
        return result;
    }
}
