/* The per-record loops of scheduled delivery (bmq/coordinators/timers/records.py), in C:
 *
 * hold_records: read the records of a produced batch (uncompressed record bytes), find each
 *   one's schedule header (bmq.deliver.at or bmq.delay.ms), and write the timer log's
 *   wrapper records: key = the due time (8 bytes, big-endian), value = the record's key,
 *   value and headers with bmq.scheduled.at added; timestamp and offset deltas as produced.
 * frame_records: frame held records' fields into a batch's record bytes for delivery.
 * merge_entries: merge sorted runs' entries (16 bytes each: due, offset, big-endian) into one
 *   sorted sequence, without the GIL.
 * sort_entries: the timer's new entries (native int64 pairs) sorted as a run's entries.
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

#include "_kafka_bytes.h"

/* A length-prefixed field (length -1: null) at *p, not past end: its bytes start at *start;
 * -1 and a ValueError if truncated. */
static int field(const uint8_t **p, const uint8_t *end, const uint8_t **start, int64_t *len) {
    if (!varint(p, end, len)) {
        PyErr_SetString(PyExc_ValueError, "truncated varint");
        return -1;
    }
    *start = *p;
    if (*len < 0) return 0;
    if (*len > end - *p) {
        PyErr_SetString(PyExc_ValueError, "truncated record field");
        return -1;
    }
    *p += *len;
    return 0;
}

/* A varint that must be there: -1 and a ValueError if truncated. */
static int need_varint(const uint8_t **p, const uint8_t *end, int64_t *out) {
    if (varint(p, end, out)) return 0;
    PyErr_SetString(PyExc_ValueError, "truncated varint");
    return -1;
}

static int decimal(const uint8_t *s, int64_t len, const char *name, int64_t *out) {
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

/* hold_records(records, count, base_ts, accepted, floor, max_delay, keep_until)
 *   -> (wrapper record bytes, [(due, timestamp, fields), ...]) ; ValueError if malformed.
 * fields is None for records due at keep_until or later: the timer reads those back from
 * the timer log when they come due, and a bytes object each would only churn the heap. */
static PyObject *hold_records(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t count;
    long long base_ts, accepted, floor_ms, max_delay, keep_until;
    if (!PyArg_ParseTuple(args, "y*nLLLLL", &view, &count, &base_ts, &accepted, &floor_ms,
                          &max_delay, &keep_until))
        return NULL;
    const uint8_t *p = view.buf, *total_end = p + view.len;
    char stamp[24];
    int stamp_len = snprintf(stamp, sizeof stamp, "%lld", accepted);
    buffer out = {0}, fields = {0};
    PyObject *held = PyList_New(0);
    if (!held) goto fail;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, ts_delta, offset_delta, key_len, value_len, header_count;
        const uint8_t *key_start, *value_start;
        if (need_varint(&p, total_end, &length) < 0) goto fail;
        if (length < 1 || length > total_end - p) {
            PyErr_SetString(PyExc_ValueError, "record length does not match the batch");
            goto fail;
        }
        const uint8_t *end = p + length;
        p++;                                     /* attributes */
        if (need_varint(&p, end, &ts_delta) < 0) goto fail;
        if (need_varint(&p, end, &offset_delta) < 0) goto fail;
        const uint8_t *fields_start = p;
        if (field(&p, end, &key_start, &key_len) < 0) goto fail;
        if (field(&p, end, &value_start, &value_len) < 0) goto fail;
        const uint8_t *kv_end = p;
        if (need_varint(&p, end, &header_count) < 0) goto fail;
        if (header_count < 0) {
            PyErr_SetString(PyExc_ValueError, "negative header count");
            goto fail;
        }
        const uint8_t *headers_start = p;
        int64_t due = accepted;
        int found = 0;
        for (int64_t h = 0; h < header_count; h++) {
            const uint8_t *name, *value;
            int64_t name_len, hv_len;
            if (field(&p, end, &name, &name_len) < 0) goto fail;
            if (name_len < 0) {
                PyErr_SetString(PyExc_ValueError, "null header key");
                goto fail;
            }
            if (field(&p, end, &value, &hv_len) < 0) goto fail;
            if (found) continue;
            if (name_len == (int64_t)strlen(DELIVER_AT) && !memcmp(name, DELIVER_AT, name_len)) {
                if (decimal(value, hv_len, DELIVER_AT, &due) < 0) goto fail;
                found = 1;
            } else if (name_len == (int64_t)strlen(DELAY_MS) &&
                       !memcmp(name, DELAY_MS, name_len)) {
                int64_t delay;
                if (decimal(value, hv_len, DELAY_MS, &delay) < 0) goto fail;
                due = accepted + delay;
                found = 1;
            }
        }
        if (p != end) {
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
        fields.size = 0;
        if (!append(&fields, fields_start, kv_end - fields_start) ||
            !append_varint(&fields, header_count + 1) ||
            !append(&fields, headers_start, end - headers_start) ||
            !append_varint(&fields, (int64_t)strlen(SCHEDULED_AT)) ||
            !append(&fields, SCHEDULED_AT, strlen(SCHEDULED_AT)) ||
            !append_varint(&fields, stamp_len) || !append(&fields, stamp, stamp_len))
            goto no_memory;
        /* The wrapper record. */
        uint8_t head[64];
        int n = 0;
        head[n++] = 0;                                          /* attributes */
        n += put_varint(head + n, ts_delta);
        n += put_varint(head + n, (int64_t)i);
        n += put_varint(head + n, 8);                           /* key: the due time */
        for (int shift = 56; shift >= 0; shift -= 8) head[n++] = (uint8_t)(due >> shift);
        n += put_varint(head + n, (int64_t)fields.size);        /* value: the fields */
        uint8_t tail = 0;                                       /* no headers */
        if (!append_varint(&out, n + (int64_t)fields.size + 1) || !append(&out, head, n) ||
            !append(&out, fields.data, fields.size) || !append(&out, &tail, 1))
            goto no_memory;
        PyObject *item = due >= keep_until
            ? Py_BuildValue("(LLO)", (long long)due, base_ts + ts_delta, Py_None)
            : Py_BuildValue("(LLy#)", (long long)due, base_ts + ts_delta,
                            (const char *)fields.data, (Py_ssize_t)fields.size);
        if (!item || PyList_Append(held, item) < 0) { Py_XDECREF(item); goto fail; }
        Py_DECREF(item);
        (void)offset_delta;
    }
    if (p != total_end) {
        PyErr_SetString(PyExc_ValueError, "bytes after the batch's last record");
        goto fail;
    }
    PyObject *payload = PyBytes_FromStringAndSize(out.data ? (const char *)out.data : "",
                                                  (Py_ssize_t)out.size);
    free(out.data);
    free(fields.data);
    PyBuffer_Release(&view);
    if (!payload) { Py_DECREF(held); return NULL; }
    return Py_BuildValue("(NN)", payload, held);
no_memory:
    PyErr_NoMemory();
fail:
    free(out.data);
    free(fields.data);
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
    buffer out = {0};
    for (Py_ssize_t i = 0; i < count; i++) {
        long long ts = PyLong_AsLongLong(PyTuple_GET_ITEM(items[i], 0));
        char *fields;
        Py_ssize_t fields_len;
        if (PyBytes_AsStringAndSize(PyTuple_GET_ITEM(items[i], 1), &fields, &fields_len) < 0)
            goto fail;
        uint8_t head[32];
        int n = 0;
        head[n++] = 0;
        n += put_varint(head + n, ts - first);
        n += put_varint(head + n, (int64_t)i);
        if (!append_varint(&out, n + fields_len) || !append(&out, head, n) ||
            !append(&out, fields, fields_len)) {
            PyErr_NoMemory();
            goto fail;
        }
    }
    Py_DECREF(seq);
    PyObject *payload = PyBytes_FromStringAndSize(out.data ? (const char *)out.data : "",
                                                  (Py_ssize_t)out.size);
    free(out.data);
    if (!payload) return NULL;
    return Py_BuildValue("(NLL)", payload, first, last);
fail:
    Py_DECREF(seq);
    free(out.data);
    return NULL;
}

/* merge_entries([entries, ...], after_due, after_offset) -> (entries, smallest offset)
 * Each input is sorted; entries at or before (after_due, after_offset) are dropped. */
static PyObject *merge_entries(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *list;
    long long after_due, after_offset;
    if (!PyArg_ParseTuple(args, "O!LL", &PyList_Type, &list, &after_due, &after_offset))
        return NULL;
    Py_ssize_t k = PyList_GET_SIZE(list), total = 0;
    Py_buffer *views = PyMem_Calloc(k ? k : 1, sizeof(Py_buffer));
    Py_ssize_t *at = PyMem_Calloc(k ? k : 1, sizeof(Py_ssize_t));
    PyObject *merged = NULL;
    Py_ssize_t got = 0;
    if (!views || !at) { PyErr_NoMemory(); goto done; }
    for (; got < k; got++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(list, got), &views[got], PyBUF_SIMPLE) < 0)
            goto done;
        if (views[got].len % 16) {
            PyBuffer_Release(&views[got]);
            PyErr_SetString(PyExc_ValueError, "entries are 16 bytes each");
            goto done;
        }
        total += views[got].len;
    }
    merged = PyBytes_FromStringAndSize(NULL, total);
    if (!merged) goto done;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(merged);
    Py_ssize_t size = 0;
    int64_t low = INT64_MAX;
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        Py_ssize_t best = -1;
        int64_t best_due = 0, best_offset = 0;
        for (Py_ssize_t i = 0; i < k; i++) {
            if (at[i] >= views[i].len) continue;
            const uint8_t *e = (const uint8_t *)views[i].buf + at[i];
            int64_t due = get_i64be(e), offset = get_i64be(e + 8);
            if (best < 0 || due < best_due || (due == best_due && offset < best_offset)) {
                best = i;
                best_due = due;
                best_offset = offset;
            }
        }
        if (best < 0) break;
        if (best_due > after_due || (best_due == after_due && best_offset > after_offset)) {
            memcpy(out + size, (const uint8_t *)views[best].buf + at[best], 16);
            size += 16;
            if (best_offset < low) low = best_offset;
        }
        at[best] += 16;
    }
    Py_END_ALLOW_THREADS
    if (_PyBytes_Resize(&merged, size) < 0) { merged = NULL; goto done; }
    PyObject *result = Py_BuildValue("(NL)", merged, (long long)(size ? low : -1));
    merged = result;
done:
    for (Py_ssize_t i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(at);
    return merged;
}

static int compare_pairs(const void *a, const void *b) {
    const int64_t *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

/* sort_entries(pairs, after_due, after_offset) -> (entries, smallest offset)
 * pairs: native int64 (due, offset) pairs (an array('q')); the result: those after
 * (after_due, after_offset), sorted, 16 big-endian bytes each. */
static PyObject *sort_entries(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    long long after_due, after_offset;
    if (!PyArg_ParseTuple(args, "y*LL", &view, &after_due, &after_offset))
        return NULL;
    Py_ssize_t count = view.len / 16;
    int64_t *pairs = malloc(count ? count * 16 : 1);
    PyObject *sorted = pairs ? PyBytes_FromStringAndSize(NULL, count * 16) : PyErr_NoMemory();
    if (!sorted) {
        free(pairs);
        PyBuffer_Release(&view);
        return NULL;
    }
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(sorted);
    Py_ssize_t size = 0;
    int64_t low = INT64_MAX;
    Py_BEGIN_ALLOW_THREADS
    memcpy(pairs, view.buf, count * 16);
    qsort(pairs, count, 16, compare_pairs);
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t due = pairs[2 * i], offset = pairs[2 * i + 1];
        if (due < after_due || (due == after_due && offset <= after_offset)) continue;
        for (int b = 0; b < 8; b++) {
            out[size + b] = (uint8_t)((uint64_t)due >> (56 - 8 * b));
            out[size + 8 + b] = (uint8_t)((uint64_t)offset >> (56 - 8 * b));
        }
        size += 16;
        if (offset < low) low = offset;
    }
    Py_END_ALLOW_THREADS
    free(pairs);
    PyBuffer_Release(&view);
    if (_PyBytes_Resize(&sorted, size) < 0) return NULL;
    return Py_BuildValue("(NL)", sorted, (long long)(size ? low : -1));
}

static PyMethodDef methods[] = {
    {"hold_records", hold_records, METH_VARARGS,
     "hold_records(records, count, base_ts, accepted, floor, max_delay, keep_until) -> "
     "(wrapper record bytes, [(due, timestamp, fields or None from keep_until on)]); "
     "ValueError for a malformed record or header."},
    {"frame_records", frame_records, METH_O,
     "frame_records([(timestamp, fields)]) -> (record bytes, first timestamp, max timestamp)"},
    {"merge_entries", merge_entries, METH_VARARGS,
     "merge_entries([sorted 16-byte entries], after_due, after_offset) -> (merged entries past "
     "(after_due, after_offset), their smallest offset or -1)"},
    {"sort_entries", sort_entries, METH_VARARGS,
     "sort_entries(native int64 (due, offset) pairs, after_due, after_offset) -> (sorted "
     "16-byte big-endian entries past (after_due, after_offset), their smallest offset or -1)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_timerrec",
                                    "Scheduled delivery's per-record loops.", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__timerrec(void) { return PyModule_Create(&module); }
