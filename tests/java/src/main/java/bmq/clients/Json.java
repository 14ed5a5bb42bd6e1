package bmq.clients;

import java.util.Collection;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.Map;

/** Writes the results as JSON: maps, collections, strings, numbers, booleans, null; byte arrays
 *  as lower-case hex (keys, values and headers are bytes, and the tests compare them exactly). */
final class Json {
    private Json() {}

    static String write(Object value) {
        StringBuilder out = new StringBuilder();
        append(out, value);
        return out.toString();
    }

    private static void append(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof String text) {
            string(out, text);
        } else if (value instanceof Number || value instanceof Boolean) {
            out.append(value);
        } else if (value instanceof byte[] bytes) {
            string(out, HexFormat.of().formatHex(bytes));
        } else if (value instanceof Map<?, ?> map) {
            out.append('{');
            Iterator<? extends Map.Entry<?, ?>> entries = map.entrySet().iterator();
            while (entries.hasNext()) {
                Map.Entry<?, ?> entry = entries.next();
                string(out, String.valueOf(entry.getKey()));
                out.append(':');
                append(out, entry.getValue());
                if (entries.hasNext()) out.append(',');
            }
            out.append('}');
        } else if (value instanceof Collection<?> items) {
            out.append('[');
            Iterator<?> each = items.iterator();
            while (each.hasNext()) {
                append(out, each.next());
                if (each.hasNext()) out.append(',');
            }
            out.append(']');
        } else {
            string(out, value.toString());
        }
    }

    private static void string(StringBuilder out, String text) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
                    else out.append(c);
                }
            }
        }
        out.append('"');
    }
}
