/* Message formats v0 and v1 (magic 0/1 "message sets", Kafka before 0.11) to and from record
 * batch v2, in C: the per-record loops of bmq/protocol/message_sets.py (issue #36).
 *
 * up(data, decompress) -> (records, count, first_timestamp, max_timestamp, codec)
 *   A produced message set, checked (CRC-32 of every message, framing, no nested compression)
 *   and turned into the records section of one uncompressed v2 batch: offset deltas 0..n-1,
 *   timestamps as the messages carry them (magic 0: -1, no timestamp). Compressed wrapper
 *   messages are opened with decompress(codec, bytes); codec is the last wrapper's (0: none).
 * down(data, magic, first_offset, decompress, compress) -> (message set, count)
 *   Stored v2 batches as magic `magic` messages for an old fetch (count: the records in them,
 *   inside wrappers too, for the messages_out metric): control batches and records
 *   below first_offset left out, headers dropped; a compressed batch becomes one wrapper
 *   message of the same codec (inner offsets relative in v1, absolute in v0), an uncompressed
 *   one plain messages. LogAppendTime batches give their messages the append time and the
 *   timestamp-type attribute (v1).
 *
 * Errors are LegacyFormatError(kafka_error_code, message): CORRUPT_MESSAGE (2) for bad CRCs and
 * framing, INVALID_RECORD (87) for what Kafka's LogValidator refuses as invalid,
 * UNSUPPORTED_COMPRESSION_TYPE (76) for zstd, which v0/v1 cannot carry.
 *
 * Message (v0/v1): offset int64, size int32, crc uint32 (CRC-32 of the rest), magic int8,
 * attributes int8 (codec in bits 0-2; v1: bit 3 = LogAppendTime), v1: timestamp int64,
 * key bytes, value bytes (int32 length, -1: null). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_kafka_bytes.h"

enum { CORRUPT_MESSAGE = 2, UNSUPPORTED_COMPRESSION_TYPE = 76, INVALID_RECORD = 87 };
enum { CODEC_MASK = 0x07, LOG_APPEND_TIME = 0x08, CONTROL = 0x20, LZ4 = 3, ZSTD = 4 };
enum { V2_HEADER = 61, LOG_OVERHEAD = 12 };

static PyObject *LegacyFormatError;

static void *fail(int code, const char *message) {
    PyObject *args = Py_BuildValue("(is)", code, message);
    if (args != NULL) {
        PyErr_SetObject(LegacyFormatError, args);
        Py_DECREF(args);
    }
    return NULL;
}

/* CRC-32 (IEEE, zlib's), slice by 8: the checksum of every v0/v1 message. */
static uint32_t crc_table[8][256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

static uint32_t crc32_ieee(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
            crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
            crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static int32_t get_i32be(const uint8_t *p) { return (int32_t)get_u32be(p); }

static void put_i64be(uint8_t *p, int64_t v) {
    put_u32be(p, (uint32_t)((uint64_t)v >> 32));
    put_u32be(p + 4, (uint32_t)v);
}

/* One v0/v1 message, its fields pointing into the message set. */
typedef struct {
    int64_t offset, timestamp;
    int magic, attributes;
    const uint8_t *key, *value; /* NULL: null */
    int32_t key_len, value_len;
} message;

/* A length-prefixed byte field of a message at *p; 0 if it runs past end. */
static int bytes_field(const uint8_t **p, const uint8_t *end, const uint8_t **out, int32_t *len) {
    if (end - *p < 4)
        return 0;
    *len = get_i32be(*p);
    *p += 4;
    if (*len < 0) {
        *out = NULL;
        return 1;
    }
    if (*len > end - *p)
        return 0;
    *out = *p;
    *p += *len;
    return 1;
}

/* Reads the message at *p (not past end) into m and moves *p past it; 0 with the error set. */
static int read_message(const uint8_t **p, const uint8_t *end, message *m) {
    if (end - *p < LOG_OVERHEAD)
        return fail(CORRUPT_MESSAGE, "truncated message set entry") != NULL;
    m->offset = get_i64be(*p);
    int32_t size = get_i32be(*p + 8);
    const uint8_t *body = *p + LOG_OVERHEAD;
    if (size < 14 || size > end - body)
        return fail(CORRUPT_MESSAGE, "message size out of bounds") != NULL;
    const uint8_t *body_end = body + size;
    if (crc32_ieee(body + 4, (size_t)size - 4) != get_u32be(body))
        return fail(CORRUPT_MESSAGE, "message CRC-32 mismatch") != NULL;
    m->magic = body[4];
    m->attributes = body[5];
    const uint8_t *q = body + 6;
    if (m->magic == 1) {
        if (body_end - q < 8)
            return fail(CORRUPT_MESSAGE, "truncated message timestamp") != NULL;
        m->timestamp = get_i64be(q);
        q += 8;
    } else if (m->magic == 0) {
        m->timestamp = -1;
    } else {
        return fail(CORRUPT_MESSAGE, "message magic is neither 0 nor 1") != NULL;
    }
    if (!bytes_field(&q, body_end, &m->key, &m->key_len) ||
        !bytes_field(&q, body_end, &m->value, &m->value_len))
        return fail(CORRUPT_MESSAGE, "truncated message key or value") != NULL;
    if (q != body_end)
        return fail(CORRUPT_MESSAGE, "message size does not match its fields") != NULL;
    *p = body_end;
    return 1;
}

/* The v2 record of m at offset delta `delta`, timestamp delta `ts_delta`, no headers. */
static int append_v2_record(buffer *out, const message *m, int64_t delta, int64_t ts_delta) {
    uint8_t head[1 + 10 + 10 + 10];
    int n = 0;
    head[n++] = 0; /* attributes */
    n += put_varint(head + n, ts_delta);
    n += put_varint(head + n, delta);
    n += put_varint(head + n, m->key ? m->key_len : -1);
    uint8_t vlen[10];
    int vn = put_varint(vlen, m->value ? m->value_len : -1);
    int64_t body = n + (m->key ? m->key_len : 0) + vn + (m->value ? m->value_len : 0) + 1;
    return append_varint(out, body) && append(out, head, (size_t)n) &&
           (!m->key || append(out, m->key, (size_t)m->key_len)) && append(out, vlen, (size_t)vn) &&
           (!m->value || append(out, m->value, (size_t)m->value_len)) && append(out, "\0", 1);
}

typedef struct {
    buffer out;
    int64_t count, first_ts, max_ts;
    int codec;
} upconversion;

static int up_message(upconversion *u, const message *m) {
    if (u->count == 0)
        u->first_ts = m->timestamp;
    if (m->timestamp > u->max_ts)
        u->max_ts = m->timestamp;
    if (!append_v2_record(&u->out, m, u->count, m->timestamp - u->first_ts)) {
        PyErr_NoMemory();
        return 0;
    }
    u->count++;
    return 1;
}

/* XXH32 (seed 0) of at most 15 bytes: an LZ4 frame descriptor's checksum is its second byte. */
static uint32_t xxh32_short(const uint8_t *p, size_t n) {
    const uint32_t P1 = 2654435761u, P2 = 2246822519u, P3 = 3266489917u, P4 = 668265263u,
                   P5 = 374761393u;
    uint32_t h = P5 + (uint32_t)n;
    for (; n >= 4; p += 4, n -= 4) {
        h += ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24)
             * P3;
        h = ((h << 17) | (h >> 15)) * P4;
    }
    for (; n; p++, n--) {
        h += *p * P5;
        h = ((h << 11) | (h >> 21)) * P1;
    }
    h ^= h >> 15;
    h *= P2;
    h ^= h >> 13;
    h *= P3;
    return h ^ (h >> 16);
}

/* Kafka before 0.10 (magic 0) computed an LZ4 frame's header checksum over the magic number
 * too (KAFKA-3160), and librdkafka writes it so for magic 0: put the right one in place. */
static void fix_lz4_header_checksum(uint8_t *frame, size_t size) {
    if (size < 7)
        return;
    size_t descriptor = 2 + (frame[4] & 0x08 ? 8 : 0) + (frame[4] & 0x01 ? 4 : 0);
    if (size > 4 + descriptor)
        frame[4 + descriptor] = (uint8_t)(xxh32_short(frame + 4, descriptor) >> 8);
}

/* The inner messages of a compressed wrapper. */
static int up_wrapper(upconversion *u, const message *wrapper, PyObject *decompress) {
    if (wrapper->value == NULL)
        return fail(INVALID_RECORD, "compressed wrapper message without a value") != NULL;
    int codec = wrapper->attributes & CODEC_MASK;
    PyObject *value = PyBytes_FromStringAndSize((const char *)wrapper->value,
                                                (Py_ssize_t)wrapper->value_len);
    if (value == NULL)
        return 0;
    if (codec == LZ4 && wrapper->magic == 0)    /* a new object: its bytes are ours to fix */
        fix_lz4_header_checksum((uint8_t *)PyBytes_AS_STRING(value), (size_t)wrapper->value_len);
    PyObject *inner = PyObject_CallFunction(decompress, "iO", codec, value);
    Py_DECREF(value);
    if (inner == NULL)
        return 0;
    char *data;
    Py_ssize_t len;
    int ok = PyBytes_AsStringAndSize(inner, &data, &len) == 0;
    const uint8_t *p = (const uint8_t *)data, *end = p + (ok ? len : 0);
    if (ok && p == end)
        ok = fail(CORRUPT_MESSAGE, "compressed wrapper message holds no messages") != NULL;
    while (ok && p < end) {
        message m;
        ok = read_message(&p, end, &m);
        if (ok && (m.attributes & CODEC_MASK))
            ok = fail(INVALID_RECORD, "Compressed outer record should not have an inner record "
                                      "with a compression attribute set") != NULL;
        if (ok && m.magic != wrapper->magic)
            ok = fail(INVALID_RECORD, "inner message magic differs from its wrapper's") != NULL;
        ok = ok && up_message(u, &m);
    }
    Py_DECREF(inner);
    return ok;
}

static PyObject *up(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    PyObject *decompress;
    if (!PyArg_ParseTuple(args, "y*O", &view, &decompress))
        return NULL;
    upconversion u = {{NULL, 0, 0}, 0, -1, -1, 0};
    const uint8_t *p = view.buf, *end = p + view.len;
    /* Uncompressed, v2 records are smaller than the messages they come from: one allocation
     * of the input's size is enough unless wrappers hold more. */
    int ok = reserve(&u.out, (size_t)view.len) || PyErr_NoMemory() != NULL;
    if (p == end)
        ok = fail(CORRUPT_MESSAGE, "empty message set") != NULL;
    while (ok && p < end) {
        message m;
        ok = read_message(&p, end, &m);
        if (!ok)
            break;
        int codec = m.attributes & CODEC_MASK;
        if (codec == ZSTD)
            ok = fail(UNSUPPORTED_COMPRESSION_TYPE, "zstd needs message format v2") != NULL;
        else if (codec) {
            u.codec = codec;
            ok = up_wrapper(&u, &m, decompress);
        } else
            ok = up_message(&u, &m);
    }
    PyBuffer_Release(&view);
    PyObject *result = NULL;
    if (ok)
        result = Py_BuildValue("(y#LLLi)", (const char *)u.out.data, (Py_ssize_t)u.out.size,
                               (long long)u.count, (long long)u.first_ts, (long long)u.max_ts,
                               u.codec);
    free(u.out.data);
    return result;
}

/* A v0/v1 message at `offset` into out. */
static int append_message(buffer *out, int magic, int64_t offset, int attributes,
                          int64_t timestamp, const uint8_t *key, int64_t key_len,
                          const uint8_t *value, int64_t value_len) {
    int64_t size = 4 + 1 + 1 + (magic ? 8 : 0) + 4 + (key_len > 0 ? key_len : 0) + 4 +
                   (value_len > 0 ? value_len : 0);
    if (!reserve(out, (size_t)(LOG_OVERHEAD + size)))
        return 0;
    uint8_t *m = out->data + out->size;
    put_i64be(m, offset);
    put_u32be(m + 8, (uint32_t)size);
    uint8_t *q = m + 16;
    *q++ = (uint8_t)magic;
    *q++ = (uint8_t)attributes;
    if (magic) {
        put_i64be(q, timestamp);
        q += 8;
    }
    put_u32be(q, (uint32_t)(key ? key_len : -1));
    q += 4;
    if (key_len > 0) {
        memcpy(q, key, (size_t)key_len);
        q += key_len;
    }
    put_u32be(q, (uint32_t)(value ? value_len : -1));
    q += 4;
    if (value_len > 0) {
        memcpy(q, value, (size_t)value_len);
        q += value_len;
    }
    put_u32be(m + 12, crc32_ieee(m + 16, (size_t)(q - (m + 16))));
    out->size += (size_t)(q - m);
    return 1;
}

/* One stored v2 batch, as down() needs it. */
typedef struct {
    int64_t base_offset, first_ts, max_ts;
    int attributes;
} batch;

/* The records of a batch (uncompressed bytes p..end) as messages into out: inner messages of a
 * wrapper when `inner`; *count and *last_offset / *max_ts report what was written. */
static int down_records(buffer *out, const batch *b, const uint8_t *p, const uint8_t *end,
                        int magic, int64_t first_offset, int inner, int64_t *count,
                        int64_t *first_written, int64_t *last_offset, int64_t *max_ts) {
    int log_append = b->attributes & LOG_APPEND_TIME;
    while (p < end) {
        int64_t len, ts_delta, delta, key_len, value_len, headers;
        if (!varint(&p, end, &len) || len < 1 || len > end - p)
            return fail(CORRUPT_MESSAGE, "stored record out of bounds") != NULL;
        const uint8_t *q = p + 1, *record_end = p + len;
        p = record_end;
        if (!varint(&q, record_end, &ts_delta) || !varint(&q, record_end, &delta) ||
            !varint(&q, record_end, &key_len) || key_len > record_end - q)
            return fail(CORRUPT_MESSAGE, "stored record is malformed") != NULL;
        const uint8_t *key = key_len >= 0 ? q : NULL;
        q += key_len > 0 ? key_len : 0;
        if (!varint(&q, record_end, &value_len) || value_len > record_end - q)
            return fail(CORRUPT_MESSAGE, "stored record is malformed") != NULL;
        const uint8_t *value = value_len >= 0 ? q : NULL;
        q += value_len > 0 ? value_len : 0;
        if (!varint(&q, record_end, &headers))
            return fail(CORRUPT_MESSAGE, "stored record is malformed") != NULL;
        int64_t offset = b->base_offset + delta;
        if (offset < first_offset)
            continue;
        int64_t ts = log_append ? b->max_ts : b->first_ts + ts_delta;
        if (*count == 0)
            *first_written = offset;
        /* v1 wrappers' inner offsets are relative to the wrapper's first; v0 keeps them. */
        int64_t written = inner && magic == 1 ? offset - *first_written : offset;
        if (!append_message(out, magic, written, magic && log_append ? LOG_APPEND_TIME : 0, ts,
                            key, key_len, value, value_len)) {
            PyErr_NoMemory();
            return 0;
        }
        (*count)++;
        *last_offset = offset;
        if (ts > *max_ts)
            *max_ts = ts;
    }
    return 1;
}

/* A compressed batch as one wrapper message of its codec; as plain messages for v0 LZ4, whose
 * frames Kafka 0.8-0.9 checksummed wrongly (KAFKA-3160) and old clients expect so. *written
 * is the number of records converted. */
static int down_compressed(buffer *out, const batch *b, const uint8_t *payload, size_t size,
                           int magic, int64_t first_offset, PyObject *decompress,
                           PyObject *compress, int64_t *written) {
    int codec = b->attributes & CODEC_MASK;
    int wrap = !(magic == 0 && codec == LZ4);
    PyObject *records = PyObject_CallFunction(decompress, "iy#", codec, (const char *)payload,
                                              (Py_ssize_t)size);
    if (records == NULL)
        return 0;
    char *data;
    Py_ssize_t len;
    if (PyBytes_AsStringAndSize(records, &data, &len) != 0) {
        Py_DECREF(records);
        return 0;
    }
    buffer inner = {NULL, 0, 0};
    int64_t count = 0, first = 0, last = -1, max_ts = -1;
    int ok = down_records(wrap ? &inner : out, b, (const uint8_t *)data,
                          (const uint8_t *)data + len, magic, first_offset, wrap, &count, &first,
                          &last, &max_ts);
    Py_DECREF(records);
    *written = count;
    if (ok && wrap && count > 0) {
        PyObject *packed = PyObject_CallFunction(compress, "iy#", codec, (const char *)inner.data,
                                                 (Py_ssize_t)inner.size);
        char *value;
        Py_ssize_t value_len;
        ok = packed != NULL && PyBytes_AsStringAndSize(packed, &value, &value_len) == 0;
        int log_append = magic && (b->attributes & LOG_APPEND_TIME);
        if (ok && !append_message(out, magic, last, codec | (log_append ? LOG_APPEND_TIME : 0),
                                  log_append ? b->max_ts : max_ts, NULL, -1,
                                  (const uint8_t *)value, value_len)) {
            PyErr_NoMemory();
            ok = 0;
        }
        Py_XDECREF(packed);
    }
    free(inner.data);
    return ok;
}

enum { MESSAGE_OVERHEAD = LOG_OVERHEAD + 4 + 1 + 1 + 8 + 4 + 4 };

/* The most bytes down() can write for the batches at p..end (compressed ones: their own size
 * and one wrapper's overhead per record, a guess reserve() grows past if need be). */
static size_t down_bound(const uint8_t *p, const uint8_t *end) {
    size_t bound = 0;
    while (end - p >= V2_HEADER) {
        int64_t size = LOG_OVERHEAD + (int64_t)get_i32be(p + 8);
        if (size < V2_HEADER || size > end - p)
            break;
        int64_t records = get_i32be(p + 57);
        bound += (size_t)size + (size_t)(records > 0 ? records : 0) * MESSAGE_OVERHEAD;
        p += size;
    }
    return bound;
}

static PyObject *down(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    int magic;
    long long first_offset;
    PyObject *decompress, *compress;
    if (!PyArg_ParseTuple(args, "y*iLOO", &view, &magic, &first_offset, &decompress, &compress))
        return NULL;
    buffer out = {NULL, 0, 0};
    int64_t total = 0;
    const uint8_t *p = view.buf, *end = p + view.len;
    int ok = magic == 0 || magic == 1;
    if (!ok)
        PyErr_SetString(PyExc_ValueError, "magic must be 0 or 1");
    /* One allocation of the whole output (growing it by doubling was most of the time): a
     * message is at most MESSAGE_OVERHEAD bytes more than its record's key and value. */
    else if (!reserve(&out, down_bound(p, end)))
        ok = PyErr_NoMemory() != NULL;
    /* Whole batches only: a partial one at the end (a fetch's size limit) is left out. */
    while (ok && end - p >= V2_HEADER) {
        int64_t size = LOG_OVERHEAD + (int64_t)get_i32be(p + 8);
        if (size < V2_HEADER || size > end - p)
            break;
        batch b = {get_i64be(p), get_i64be(p + 27), get_i64be(p + 35), (p[21] << 8) | p[22]};
        const uint8_t *payload = p + V2_HEADER, *batch_end = p + size;
        p = batch_end;
        if (b.attributes & CONTROL)
            continue; /* transaction markers: v0/v1 have none */
        int codec = b.attributes & CODEC_MASK;
        int64_t count = 0, first = 0, last = -1, max_ts = -1;
        if (codec == ZSTD)
            ok = fail(UNSUPPORTED_COMPRESSION_TYPE, "zstd batches cannot be read as message "
                                                    "format v0/v1") != NULL;
        else if (codec)
            ok = down_compressed(&out, &b, payload, (size_t)(batch_end - payload), magic,
                                 first_offset, decompress, compress, &count);
        else
            ok = down_records(&out, &b, payload, batch_end, magic, first_offset, 0, &count, &first,
                              &last, &max_ts);
        total += count;
    }
    PyBuffer_Release(&view);
    PyObject *result = ok ? Py_BuildValue("(y#L)", (const char *)out.data,
                                          (Py_ssize_t)out.size, (long long)total)
                          : NULL;
    free(out.data);
    return result;
}

static PyMethodDef methods[] = {
    {"up", up, METH_VARARGS, "A v0/v1 message set as one v2 batch's records."},
    {"down", down, METH_VARARGS, "v2 batches as a v0/v1 message set and its record count."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_message_sets", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__message_sets(void) {
    crc_init();
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    LegacyFormatError = PyErr_NewException("bmq.protocol._message_sets.LegacyFormatError",
                                           PyExc_ValueError, NULL);
    if (LegacyFormatError == NULL || PyModule_AddObjectRef(m, "LegacyFormatError",
                                                           LegacyFormatError) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
