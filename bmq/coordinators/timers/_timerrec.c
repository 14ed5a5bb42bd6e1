/* The per-record loops of scheduled delivery (bmq/coordinators/timers/records.py), in C:
 *
 * hold_records: read the records of a produced batch (uncompressed record bytes), find each
 *   one's schedule header (bmq.deliver.at or bmq.delay.ms), and write the timer log's
 *   wrapper records: key = the due time (8 bytes, big-endian), value = the record's key,
 *   value and headers with bmq.scheduled.at added; timestamp and offset deltas as produced.
 * frame_records: frame held records' fields into a batch's record bytes for delivery.
 *
 * Record format (Kafka's RecordBatch v2): length varint, attributes int8, timestamp delta
 * varlong, offset delta varint, key length varint + key, value length varint + value, header
 * count varint, then each header: key length varint + key, value length varint + value.
 * Varints are zig-zag encoded. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t extra) {
    if (b->len + extra <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *data = PyMem_Realloc(b->data, cap);
    if (!data) { PyErr_NoMemory(); return -1; }
    b->data = data;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

/* Zig-zag varint of v into out (at most 10 bytes); returns its length. */
static int varint_encode(int64_t v, unsigned char *out) {
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    int n = 0;
    while (u >= 0x80) { out[n++] = (unsigned char)(u | 0x80); u >>= 7; }
    out[n++] = (unsigned char)u;
    return n;
}

static int buf_varint(Buf *b, int64_t v) {
    unsigned char tmp[10];
    return buf_put(b, tmp, varint_encode(v, tmp));
}

/* Zig-zag varint at *pos (below end); -1 and a ValueError if truncated. */
static int varint_decode(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, int64_t *out) {
    uint64_t u = 0;
    int shift = 0;
    while (*pos < end && shift <= 63) {
        unsigned char byte = p[(*pos)++];
        u |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) { *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1); return 0; }
        shift += 7;
    }
    PyErr_SetString(PyExc_ValueError, "truncated varint");
    return -1;
}

/* A length-prefixed field (length -1: null) at *pos; its bytes start at *start. */
static int field(const unsigned char *p, Py_ssize_t *pos, Py_ssize_t end, Py_ssize_t *start,
                 int64_t *len) {
    if (varint_decode(p, pos, end, len) < 0) return -1;
    *start = *pos;
    if (*len < 0) return 0;
    if (*len > end - *pos) {
        PyErr_SetString(PyExc_ValueError, "truncated record field");
        return -1;
    }
    *pos += *len;
    return 0;
}

static int decimal(const unsigned char *s, int64_t len, const char *name, int64_t *out) {
    if (len < 1 || len > 18) goto bad;
    int64_t v = 0;
    for (int64_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') goto bad;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
bad:
    PyErr_Format(PyExc_ValueError, "header %s must be an ASCII decimal number", name);
    return -1;
}

static const char DELIVER_AT[] = "bmq.deliver.at";
static const char DELAY_MS[] = "bmq.delay.ms";
static const char SCHEDULED_AT[] = "bmq.scheduled.at";

/* hold_records(records, count, base_ts, accepted, floor, max_delay)
 *   -> (wrapper record bytes, [(due, timestamp, fields), ...]) ; ValueError if malformed. */
static PyObject *hold_records(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t count;
    long long base_ts, accepted, floor_ms, max_delay;
    if (!PyArg_ParseTuple(args, "y*nLLLL", &view, &count, &base_ts, &accepted, &floor_ms,
                          &max_delay))
        return NULL;
    const unsigned char *p = view.buf;
    Py_ssize_t pos = 0, total = view.len;
    char stamp[24];
    int stamp_len = snprintf(stamp, sizeof stamp, "%lld", accepted);
    Buf out = {0}, fields = {0};
    PyObject *held = PyList_New(0);
    if (!held) goto fail;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, ts_delta, offset_delta, key_len, value_len, header_count;
        Py_ssize_t key_start, value_start;
        if (varint_decode(p, &pos, total, &length) < 0) goto fail;
        if (length < 1 || length > total - pos) {
            PyErr_SetString(PyExc_ValueError, "record length does not match the batch");
            goto fail;
        }
        Py_ssize_t end = pos + length;
        pos++;                                   /* attributes */
        if (varint_decode(p, &pos, end, &ts_delta) < 0) goto fail;
        if (varint_decode(p, &pos, end, &offset_delta) < 0) goto fail;
        Py_ssize_t fields_start = pos;
        if (field(p, &pos, end, &key_start, &key_len) < 0) goto fail;
        if (field(p, &pos, end, &value_start, &value_len) < 0) goto fail;
        Py_ssize_t kv_end = pos;
        if (varint_decode(p, &pos, end, &header_count) < 0) goto fail;
        if (header_count < 0) {
            PyErr_SetString(PyExc_ValueError, "negative header count");
            goto fail;
        }
        Py_ssize_t headers_start = pos;
        int64_t due = accepted;
        int found = 0;
        for (int64_t h = 0; h < header_count; h++) {
            Py_ssize_t name_start, hv_start;
            int64_t name_len, hv_len;
            if (field(p, &pos, end, &name_start, &name_len) < 0) goto fail;
            if (name_len < 0) {
                PyErr_SetString(PyExc_ValueError, "null header key");
                goto fail;
            }
            if (field(p, &pos, end, &hv_start, &hv_len) < 0) goto fail;
            if (found) continue;
            if (name_len == (int64_t)strlen(DELIVER_AT) &&
                    !memcmp(p + name_start, DELIVER_AT, name_len)) {
                if (decimal(p + hv_start, hv_len, DELIVER_AT, &due) < 0) goto fail;
                found = 1;
            } else if (name_len == (int64_t)strlen(DELAY_MS) &&
                       !memcmp(p + name_start, DELAY_MS, name_len)) {
                int64_t delay;
                if (decimal(p + hv_start, hv_len, DELAY_MS, &delay) < 0) goto fail;
                due = accepted + delay;
                found = 1;
            }
        }
        if (pos != end) {
            PyErr_SetString(PyExc_ValueError, "record length does not match its fields");
            goto fail;
        }
        if (due > accepted + max_delay) {
            PyErr_Format(PyExc_ValueError, "a record may be scheduled at most %lld ms ahead",
                         max_delay);
            goto fail;
        }
        if (due < floor_ms) due = floor_ms;
        /* The delivered record's fields: key, value, headers + bmq.scheduled.at. */
        fields.len = 0;
        if (buf_put(&fields, p + fields_start, kv_end - fields_start) < 0 ||
            buf_varint(&fields, header_count + 1) < 0 ||
            buf_put(&fields, p + headers_start, end - headers_start) < 0 ||
            buf_varint(&fields, (int64_t)strlen(SCHEDULED_AT)) < 0 ||
            buf_put(&fields, SCHEDULED_AT, strlen(SCHEDULED_AT)) < 0 ||
            buf_varint(&fields, stamp_len) < 0 || buf_put(&fields, stamp, stamp_len) < 0)
            goto fail;
        /* The wrapper record. */
        unsigned char head[64];
        int n = 0;
        head[n++] = 0;                                          /* attributes */
        n += varint_encode(ts_delta, head + n);
        n += varint_encode((int64_t)i, head + n);
        n += varint_encode(8, head + n);                        /* key: the due time */
        for (int shift = 56; shift >= 0; shift -= 8) head[n++] = (unsigned char)(due >> shift);
        n += varint_encode(fields.len, head + n);               /* value: the fields */
        unsigned char tail = 0;                                 /* no headers */
        if (buf_varint(&out, n + fields.len + 1) < 0 || buf_put(&out, head, n) < 0 ||
            buf_put(&out, fields.data, fields.len) < 0 || buf_put(&out, &tail, 1) < 0)
            goto fail;
        PyObject *item = Py_BuildValue("(LLy#)", (long long)due, base_ts + ts_delta,
                                       fields.data, fields.len);
        if (!item || PyList_Append(held, item) < 0) { Py_XDECREF(item); goto fail; }
        Py_DECREF(item);
        (void)offset_delta;
    }
    if (pos != total) {
        PyErr_SetString(PyExc_ValueError, "bytes after the batch's last record");
        goto fail;
    }
    PyObject *payload = PyBytes_FromStringAndSize(out.data ? out.data : "", out.len);
    PyMem_Free(out.data);
    PyMem_Free(fields.data);
    PyBuffer_Release(&view);
    if (!payload) { Py_DECREF(held); return NULL; }
    PyObject *result = Py_BuildValue("(NN)", payload, held);
    return result;
fail:
    PyMem_Free(out.data);
    PyMem_Free(fields.data);
    Py_XDECREF(held);
    PyBuffer_Release(&view);
    return NULL;
}

/* frame_records([(timestamp, fields), ...]) -> (record bytes, first timestamp, max timestamp) */
static PyObject *frame_records(PyObject *self, PyObject *arg) {
    (void)self;
    PyObject *seq = PySequence_Fast(arg, "frame_records takes a sequence");
    if (!seq) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    long long first = LLONG_MAX, last = LLONG_MIN;
    for (Py_ssize_t i = 0; i < count; i++) {
        long long ts = PyLong_AsLongLong(PyTuple_GET_ITEM(items[i], 0));
        if (ts == -1 && PyErr_Occurred()) { Py_DECREF(seq); return NULL; }
        if (ts < first) first = ts;
        if (ts > last) last = ts;
    }
    Buf out = {0};
    for (Py_ssize_t i = 0; i < count; i++) {
        long long ts = PyLong_AsLongLong(PyTuple_GET_ITEM(items[i], 0));
        char *fields;
        Py_ssize_t fields_len;
        if (PyBytes_AsStringAndSize(PyTuple_GET_ITEM(items[i], 1), &fields, &fields_len) < 0)
            goto fail;
        unsigned char head[32];
        int n = 0;
        head[n++] = 0;
        n += varint_encode(ts - first, head + n);
        n += varint_encode((int64_t)i, head + n);
        if (buf_varint(&out, n + fields_len) < 0 || buf_put(&out, head, n) < 0 ||
            buf_put(&out, fields, fields_len) < 0)
            goto fail;
    }
    Py_DECREF(seq);
    PyObject *payload = PyBytes_FromStringAndSize(out.data ? out.data : "", out.len);
    PyMem_Free(out.data);
    if (!payload) return NULL;
    return Py_BuildValue("(NLL)", payload, first, last);
fail:
    Py_DECREF(seq);
    PyMem_Free(out.data);
    return NULL;
}

static PyMethodDef methods[] = {
    {"hold_records", hold_records, METH_VARARGS,
     "hold_records(records, count, base_ts, accepted, floor, max_delay) -> (wrapper record "
     "bytes, [(due, timestamp, fields)]); ValueError for a malformed record or header."},
    {"frame_records", frame_records, METH_O,
     "frame_records([(timestamp, fields)]) -> (record bytes, first timestamp, max timestamp)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_timerrec",
                                    "Scheduled delivery's per-record loops.", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__timerrec(void) { return PyModule_Create(&module); }
