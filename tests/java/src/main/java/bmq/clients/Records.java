package bmq.clients;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;

/** Records as the tests compare them: bytes exactly (hex), headers in order. */
final class Records {
    private Records() {}

    static Map<String, Object> describe(ConsumerRecord<byte[], byte[]> record) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("partition", record.partition());
        out.put("offset", record.offset());
        out.put("timestamp", record.timestamp());
        out.put("key", record.key());
        out.put("value", record.value());
        out.put("headers", headers(record.headers()));
        record.deliveryCount().ifPresent(count -> out.put("delivery_count", count));
        return out;
    }

    /** Each header as [name, value]. */
    static List<List<Object>> headers(Iterable<Header> headers) {
        List<List<Object>> out = new ArrayList<>();
        for (Header header : headers) out.add(Arrays.asList(header.key(), header.value()));
        return out;
    }
}
