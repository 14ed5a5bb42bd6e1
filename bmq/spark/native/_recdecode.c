/* Kafka v2 record batches (their decompressed bodies) to Arrow column buffers.
 *
 * The hot loop of bmq.spark.decode: one C pass walks every record of every batch of a chunk
 * (length varint, attributes, timestamp and offset deltas, key, value, headers), checking each
 * field against the end of its record and of its batch, and counts what the columns need; a
 * second pass over the same, now checked, records copies keys, values and headers straight
 * from the batch bodies into Arrow's binary layout (int32 offsets, data, validity bitmap).
 * Records whose offset is outside [start_offset, end_offset) are checked but not kept.
 *
 * decode(bodies, meta, start_offset, end_offset, want_headers) -> tuple
 *   bodies: sequence of bytes-like batch bodies (the records, after the 61-byte batch header)
 *   meta:   bytes-like of native int64, 5 per batch: base offset, base timestamp, max
 *           timestamp, timestamp type (1 = LogAppendTime), record count
 * Returns (n, offsets, timestamps_us, timestamp_types, key, value, headers) where offsets and
 * timestamps are int64 buffers, timestamp_types int32, key and value each a (validity or None,
 * int32 offsets, data) triple, and headers None or (validity or None, int32 list offsets,
 * header count, key triple, value triple). Malformed input raises ValueError; nothing is read
 * outside the given buffers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint8_t *valid;     /* NULL in the counting pass, and when no value is null */
    int32_t *offsets;
    char *data;
    int64_t bytes;      /* counting pass: total bytes; writing pass: bytes written */
    int64_t nulls;
} column;

typedef struct {
    int fill;                       /* 0: check and count; 1: write */
    int want_headers;
    int64_t start_offset, end_offset;
    int64_t n;                      /* records kept so far */
    int64_t *offsets, *timestamps;
    int32_t *ts_types;
    column key, value;
    /* headers: one list entry per record; hkey/hvalue one entry per header */
    uint8_t *list_valid;
    int32_t *list_offsets;
    int64_t n_headers, no_headers;
    column hkey, hvalue;
    const char *error;
    int64_t error_batch;
} state;

static inline int read_varint(const uint8_t **pp, const uint8_t *end, int64_t *out,
                              const char **error) {
    const uint8_t *p = *pp;
    if (p < end && *p < 0x80) {   /* one byte: most lengths and deltas */
        uint64_t raw = *p;
        *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
        *pp = p + 1;
        return 0;
    }
    uint64_t raw = 0;
    int shift = 0;
    for (;;) {
        if (p >= end) {
            *error = "truncated varint";
            return -1;
        }
        uint8_t b = *p++;
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80))
            break;
        shift += 7;
        if (shift > 63) {
            *error = "varint longer than 10 bytes";
            return -1;
        }
    }
    *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
    *pp = p;
    return 0;
}

static inline void set_bit(uint8_t *bits, int64_t i) {
    bits[i >> 3] |= (uint8_t)(1u << (i & 7));
}

/* A length-prefixed field (length -1 = null unless !nullable) at *pp, inside the record. */
static inline int field(state *s, column *c, int64_t index, int keep, const uint8_t **pp,
                        const uint8_t *rend, int nullable, const char *what) {
    int64_t len;
    if (read_varint(pp, rend, &len, &s->error) < 0)
        return -1;
    if (len < -1 || (len == -1 && !nullable)) {
        s->error = what;
        return -1;
    }
    if (len > rend - *pp) {
        s->error = "record field runs past the record";
        return -1;
    }
    if (!keep)
        goto skip;
    if (len < 0) {
        if (s->fill)
            c->offsets[index + 1] = (int32_t)c->bytes;
        else
            c->nulls++;
        return 0;
    }
    if (s->fill) {
        memcpy(c->data + c->bytes, *pp, (size_t)len);
        if (c->valid)
            set_bit(c->valid, index);
        c->offsets[index + 1] = (int32_t)(c->bytes + len);
    }
    c->bytes += len;
skip:
    if (len > 0)
        *pp += len;
    return 0;
}

/* Every record of one batch body. */
static int walk_batch(state *s, const uint8_t *p, const uint8_t *end, const int64_t *meta) {
    const int64_t base_offset = meta[0], base_ts = meta[1], max_ts = meta[2];
    const int log_append = meta[3] != 0;
    const int64_t count = meta[4];
    for (int64_t i = 0; i < count; i++) {
        int64_t length, ts_delta, off_delta, hcount;
        if (p >= end) {
            s->error = "fewer records than the batch header counts";
            return -1;
        }
        if (read_varint(&p, end, &length, &s->error) < 0)
            return -1;
        if (length < 1 || length > end - p) {
            s->error = length < 1 ? "bad record length" : "record runs past the batch";
            return -1;
        }
        const uint8_t *rend = p + length;
        p++;   /* record attributes, unused */
        if (read_varint(&p, rend, &ts_delta, &s->error) < 0 ||
            read_varint(&p, rend, &off_delta, &s->error) < 0)
            return -1;
        const int64_t offset = (int64_t)((uint64_t)base_offset + (uint64_t)off_delta);
        const int keep = offset >= s->start_offset && offset < s->end_offset;
        const int64_t k = s->n;
        if (field(s, &s->key, k, keep, &p, rend, 1, "negative key length") < 0 ||
            field(s, &s->value, k, keep, &p, rend, 1, "negative value length") < 0 ||
            read_varint(&p, rend, &hcount, &s->error) < 0)
            return -1;
        /* A header takes at least 2 bytes (two length varints). */
        if (hcount < 0 || hcount > (rend - p) / 2) {
            s->error = "bad header count";
            return -1;
        }
        const int keep_headers = keep && s->want_headers;
        for (int64_t j = 0; j < hcount; j++) {
            const int64_t h = s->n_headers;
            if (field(s, &s->hkey, h, keep_headers, &p, rend, 0, "null header key") < 0 ||
                field(s, &s->hvalue, h, keep_headers, &p, rend, 1,
                      "negative header value length") < 0)
                return -1;
            if (keep_headers)
                s->n_headers++;
        }
        if (p != rend) {
            s->error = "record length does not match its fields";
            return -1;
        }
        if (!keep)
            continue;
        if (s->fill) {
            s->offsets[k] = offset;
            const int64_t ts = log_append ? max_ts : (int64_t)((uint64_t)base_ts + (uint64_t)ts_delta);
            s->timestamps[k] = (int64_t)((uint64_t)ts * 1000u);
            s->ts_types[k] = log_append;
            if (s->want_headers) {
                if (hcount && s->list_valid)
                    set_bit(s->list_valid, k);
                s->list_offsets[k + 1] = (int32_t)s->n_headers;
            }
        } else if (s->want_headers && hcount == 0) {
            s->no_headers++;
        }
        s->n++;
    }
    if (p != end) {
        s->error = "records do not fill the batch";
        return -1;
    }
    return 0;
}

static int walk(state *s, Py_buffer *bodies, Py_ssize_t nb, const int64_t *meta) {
    for (Py_ssize_t b = 0; b < nb; b++) {
        const uint8_t *p = (const uint8_t *)bodies[b].buf;
        if (walk_batch(s, p, p + bodies[b].len, meta + 5 * b) < 0) {
            s->error_batch = b;
            return -1;
        }
    }
    return 0;
}

/* --------------------------------------------------------------------- Python objects */
static PyObject *new_bytes(int64_t size, char **data) {
    PyObject *o = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (o)
        *data = PyBytes_AS_STRING(o);
    return o;
}

/* Zeroed bitmap for n entries, or None (and *bits NULL) when none is null. */
static PyObject *new_bitmap(int64_t n, int64_t nulls, uint8_t **bits) {
    *bits = NULL;
    if (!nulls)
        Py_RETURN_NONE;
    char *data;
    PyObject *o = new_bytes((n + 7) / 8, &data);
    if (o) {
        memset(data, 0, (size_t)((n + 7) / 8));
        *bits = (uint8_t *)data;
    }
    return o;
}

/* (validity, offsets, data) buffers for a column of n entries counted in c; c is set up to
 * write into them. NULL on error. */
static PyObject *new_column(column *c, int64_t n) {
    char *offsets, *data;
    PyObject *valid = new_bitmap(n, c->nulls, &c->valid);
    PyObject *off = new_bytes(4 * (n + 1), &offsets);
    PyObject *dat = new_bytes(c->bytes, &data);
    if (!valid || !off || !dat) {
        Py_XDECREF(valid);
        Py_XDECREF(off);
        Py_XDECREF(dat);
        return NULL;
    }
    c->offsets = (int32_t *)offsets;
    c->offsets[0] = 0;
    c->data = data;
    c->bytes = 0;
    return Py_BuildValue("(NNN)", valid, off, dat);
}

static PyObject *decode(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *bodies_obj;
    Py_buffer meta = {0};
    state s;
    memset(&s, 0, sizeof s);
    if (!PyArg_ParseTuple(args, "Oy*LLp", &bodies_obj, &meta, &s.start_offset, &s.end_offset,
                          &s.want_headers))
        return NULL;
    PyObject *result = NULL, *seq = PySequence_Fast(bodies_obj, "bodies must be a sequence");
    Py_buffer *bodies = NULL;
    Py_ssize_t nb = 0, got = 0;
    if (!seq)
        goto done;
    nb = PySequence_Fast_GET_SIZE(seq);
    if (meta.len != (Py_ssize_t)(5 * sizeof(int64_t)) * nb) {
        PyErr_SetString(PyExc_ValueError, "meta must hold 5 int64 per body");
        goto done;
    }
    bodies = PyMem_Calloc((size_t)(nb ? nb : 1), sizeof(Py_buffer));
    if (!bodies) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < nb; got++)
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, got), &bodies[got], PyBUF_SIMPLE) < 0)
            goto done;
    const int64_t *m = (const int64_t *)meta.buf;

    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = walk(&s, bodies, nb, m);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_Format(PyExc_ValueError, "%s (batch at offset %lld)", s.error,
                     (long long)m[5 * s.error_batch]);
        goto done;
    }
    const int64_t n = s.n;
    if (s.key.bytes > INT32_MAX || s.value.bytes > INT32_MAX || s.n_headers > INT32_MAX ||
        s.hkey.bytes > INT32_MAX || s.hvalue.bytes > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "more than 2 GiB of keys, values or headers in one chunk");
        goto done;
    }
    char *offsets, *timestamps, *ts_types;
    PyObject *o_off = new_bytes(8 * n, &offsets);
    PyObject *o_ts = new_bytes(8 * n, &timestamps);
    PyObject *o_tt = new_bytes(4 * n, &ts_types);
    PyObject *o_key = new_column(&s.key, n);
    PyObject *o_value = new_column(&s.value, n);
    PyObject *o_headers = NULL, *o_lvalid = NULL, *o_loff = NULL, *o_hkey = NULL,
             *o_hvalue = NULL;
    int ok = o_off && o_ts && o_tt && o_key && o_value;
    if (ok && s.want_headers) {
        char *loff;
        o_lvalid = new_bitmap(n, s.no_headers, &s.list_valid);
        o_loff = new_bytes(4 * (n + 1), &loff);
        o_hkey = new_column(&s.hkey, s.n_headers);
        o_hvalue = new_column(&s.hvalue, s.n_headers);
        ok = o_lvalid && o_loff && o_hkey && o_hvalue;
        if (ok) {
            s.list_offsets = (int32_t *)loff;
            s.list_offsets[0] = 0;
        }
    }
    if (ok) {
        s.offsets = (int64_t *)offsets;
        s.timestamps = (int64_t *)timestamps;
        s.ts_types = (int32_t *)ts_types;
        s.fill = 1;
        s.n = 0;
        s.n_headers = 0;
        Py_BEGIN_ALLOW_THREADS
        (void)walk(&s, bodies, nb, m);   /* cannot fail: the same records passed the checks */
        Py_END_ALLOW_THREADS
        if (s.want_headers) {
            o_headers = Py_BuildValue("(NNLNN)", o_lvalid, o_loff, (long long)s.n_headers,
                                      o_hkey, o_hvalue);
            o_lvalid = o_loff = o_hkey = o_hvalue = NULL;
        } else {
            o_headers = Py_NewRef(Py_None);
        }
        if (o_headers)
            result = Py_BuildValue("(LNNNNNN)", (long long)n, o_off, o_ts, o_tt, o_key,
                                   o_value, o_headers);
        else
            ok = 0;
    }
    if (!ok) {
        Py_XDECREF(o_off);
        Py_XDECREF(o_ts);
        Py_XDECREF(o_tt);
        Py_XDECREF(o_key);
        Py_XDECREF(o_value);
    }
    Py_XDECREF(o_lvalid);
    Py_XDECREF(o_loff);
    Py_XDECREF(o_hkey);
    Py_XDECREF(o_hvalue);
done:
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&bodies[i]);
    PyMem_Free(bodies);
    Py_XDECREF(seq);
    PyBuffer_Release(&meta);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS,
     "decode(bodies, meta, start_offset, end_offset, want_headers) -> column buffers"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "bmq.spark._recdecode",
    .m_doc = "Kafka record batch bodies to Arrow column buffers (the hot loop of "
             "bmq.spark.decode).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__recdecode(void) {
    return PyModule_Create(&module);
}
