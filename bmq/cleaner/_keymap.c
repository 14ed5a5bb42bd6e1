/* The hot loops of the log cleaner (bmq.cleaner): Kafka's offset map, key hash -> latest offset,
 * in a fixed amount of memory, and the filter that keeps each key's latest record.
 *
 * KeyMap(slots)                        an open-addressing table of `slots` entries (a power of
 *                                      two), 24 bytes each: a 128-bit key hash (MurmurHash3
 *                                      x64/128, as Kafka's map keeps MD5's 16 bytes) and the
 *                                      offset; allocated zeroed, so untouched pages cost nothing.
 * KeyMap.add_batches(data, aborted, from_offset, decompress) -> (position, full)
 *                                      records every key of the data batches of `data` with its
 *                                      offset, skipping control batches, aborted transactional
 *                                      batches and batches wholly before `from_offset`; stops
 *                                      before the first batch that could take the table past 3/4
 *                                      full and returns its position with full=True (ValueError
 *                                      if not even one batch fits the empty table).
 * KeyMap.retain_batches(data, aborted, drop_tombstones, decompress, compress, crc)
 *        -> (bytes, kept, removed, consumed, tombstones, markers, aborts)
 *                                      the whole batches of `data` (`consumed` bytes of it) with
 *                                      only the records to keep (`tombstones` of them null): a
 *                                      record is removed when the map holds a later offset for its
 *                                      key, when it is a tombstone (null value) and
 *                                      `drop_tombstones`, or when its batch belongs to an aborted
 *                                      transaction. A batch keeping every record is copied byte
 *                                      for byte; one keeping none is left out; the others are
 *                                      rebuilt with the same header (base offset, last offset
 *                                      delta, producer id, epoch and base sequence, timestamps,
 *                                      codec), as Kafka's cleaner rebuilds them, with the kept
 *                                      records byte for byte (their deltas are relative to the
 *                                      unchanged base). Control batches (transaction markers) are
 *                                      kept whole, but for those whose transaction has no data
 *                                      left (Kafka's rule): a COMMIT marker when no batch of its
 *                                      producer since that producer's previous marker keeps a
 *                                      record in this pass, an ABORT marker always (the batches
 *                                      of an aborted transaction never stay). Such a marker goes
 *                                      with `drop_tombstones` (`markers` counts them) and
 *                                      otherwise counts among `tombstones` (what goes once
 *                                      delete.retention.ms has passed). `aborts` lists the
 *                                      offsets of the ABORT markers removed (native int64): the
 *                                      caller removes their aborted-transaction index entries
 *                                      with them, in the same swap.
 *
 * A KeyMap serves one pass, whose retain_batches calls see the log in offset order from its
 * start: it also keeps which producers still have transactional data since their last marker.
 *
 * `aborted` is a bytes object of native int64 triples (producer id, first offset, marker offset);
 * a transactional batch of that producer starting in [first, marker) is aborted. `decompress`
 * and `compress` are callables (codec, bytes) -> bytes, `crc` is CRC-32C of a bytes-like.
 * Record parsing runs without the GIL. Malformed records raise ValueError: the cleaner never
 * rewrites what it cannot read.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_batches.h"

/* ------------------------------------------------------------------ the table */
typedef struct {
    uint64_t h1, h2;
    int64_t stored;     /* offset + 1; 0: empty slot */
} entry;

/* A producer id and whether the pass kept transactional data of it since its last marker. */
typedef struct {
    int64_t pid;        /* -1: empty slot */
    int data;
} producer_slot;

typedef struct {
    PyObject_HEAD
    entry *table;
    size_t mask, size, limit;
    producer_slot *producers;
    size_t producers_mask, producers_size;
} KeyMap;

static entry *find(KeyMap *m, const uint64_t h[2]) {
    size_t i = (size_t)h[0] & m->mask;
    for (;;) {
        entry *e = &m->table[i];
        if (e->stored == 0 || (e->h1 == h[0] && e->h2 == h[1]))
            return e;
        i = (i + 1) & m->mask;
    }
}


/* The slot of producer `pid` (created, the table grown, as needed); NULL if out of memory. */
static producer_slot *producer(KeyMap *m, int64_t pid) {
    if (m->producers == NULL || (m->producers_size + 1) * 2 > m->producers_mask + 1) {
        size_t slots = m->producers == NULL ? 64 : (m->producers_mask + 1) * 2;
        producer_slot *grown = malloc(slots * sizeof *grown);
        if (grown == NULL)
            return NULL;
        for (size_t i = 0; i < slots; i++)
            grown[i].pid = -1;
        producer_slot *old = m->producers;
        size_t old_slots = old == NULL ? 0 : m->producers_mask + 1;
        m->producers = grown;
        m->producers_mask = slots - 1;
        m->producers_size = 0;
        for (size_t i = 0; i < old_slots; i++)
            if (old[i].pid >= 0)
                *producer(m, old[i].pid) = old[i];   /* fits: no growth, no NULL */
        free(old);
    }
    size_t i = (size_t)fmix64((uint64_t)pid) & m->producers_mask;
    while (m->producers[i].pid >= 0 && m->producers[i].pid != pid)
        i = (i + 1) & m->producers_mask;
    producer_slot *slot = &m->producers[i];
    if (slot->pid < 0) {
        slot->pid = pid;
        slot->data = 0;
        m->producers_size++;
    }
    return slot;
}

/* ------------------------------------------------------------------ KeyMap methods */
static PyObject *keymap_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    Py_ssize_t slots;
    static char *names[] = {"slots", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "n", names, &slots))
        return NULL;
    if (slots < 16 || (slots & (slots - 1))) {
        PyErr_SetString(PyExc_ValueError, "slots must be a power of two, at least 16");
        return NULL;
    }
    KeyMap *m = (KeyMap *)type->tp_alloc(type, 0);
    if (m == NULL)
        return NULL;
    m->table = calloc((size_t)slots, sizeof(entry));
    if (m->table == NULL) {
        Py_DECREF(m);
        return PyErr_NoMemory();
    }
    m->mask = (size_t)slots - 1;
    m->limit = (size_t)slots / 4 * 3;
    m->size = 0;
    m->producers = NULL;
    m->producers_mask = m->producers_size = 0;
    return (PyObject *)m;
}

static void keymap_dealloc(KeyMap *m) {
    free(m->table);
    free(m->producers);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

/* Adds the keys of one batch's records to the map; 0 if they are malformed. */
static int map_records(KeyMap *m, const uint8_t *body, const uint8_t *end, int64_t base) {
    const uint8_t *p = body;
    record r;
    while (p < end) {
        if (!next_record(&p, end, &r))
            return 0;
        if (r.key == NULL)
            continue;
        uint64_t h[2];
        murmur3_128(r.key, (size_t)r.key_length, h);
        entry *e = find(m, h);
        if (e->stored == 0) {
            if (m->size >= m->limit)     /* more records than the header said */
                return 0;
            e->h1 = h[0];
            e->h2 = h[1];
            m->size++;
        }
        e->stored = base + r.offset_delta + 1;
    }
    return 1;
}

/* The loops below run without the GIL (Py_BEGIN_ALLOW_THREADS around all the batches of a
 * call: the cleaner's thread then never competes with the event loop for it batch by batch)
 * and take it back only to call into Python: to decompress or compress a batch. */

static PyObject *keymap_add_batches(KeyMap *m, PyObject *args) {
    Py_buffer view;
    PyObject *aborted_obj, *decompress;
    long long from_offset;
    if (!PyArg_ParseTuple(args, "y*OLO", &view, &aborted_obj, &from_offset, &decompress))
        return NULL;
    aborted_list aborted;
    PyObject *result = NULL;
    if (!parse_aborted(aborted_obj, &aborted)) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const uint8_t *data = view.buf;
    size_t n = (size_t)view.len, stop = 0;
    int full = 0, failed = 0;
    int64_t bad_offset = -1;
    Py_BEGIN_ALLOW_THREADS
    FOR_EACH_BATCH(data, n, pos, size) {
        const uint8_t *batch = data + pos;
        stop = pos;
        uint16_t attributes = (uint16_t)((batch[21] << 8) | batch[22]);
        int64_t last = get_i64be(batch) + (int32_t)get_u32be(batch + 23);
        if (batch[16] != 2 || (attributes & CONTROL_FLAG) || last < from_offset ||
                is_aborted(&aborted, batch)) {
            stop = pos + size;
            continue;
        }
        if (m->size + get_u32be(batch + 57) > m->limit) {
            full = 1;
            if (m->size == 0)
                bad_offset = get_i64be(batch);
            break;
        }
        const uint8_t *body = batch + HEADER_SIZE, *end = batch + size;
        PyObject *owner = NULL;
        if (attributes & COMPRESSION_MASK) {
            Py_BLOCK_THREADS
            failed = !batch_records(batch, size, decompress, &body, &end, &owner);
            Py_UNBLOCK_THREADS
            if (failed)
                break;
        }
        int ok = map_records(m, body, end, get_i64be(batch));
        if (owner != NULL) {
            Py_BLOCK_THREADS
            Py_DECREF(owner);
            Py_UNBLOCK_THREADS
        }
        if (!ok) {
            bad_offset = get_i64be(batch);
            break;
        }
        stop = pos + size;
    }
    Py_END_ALLOW_THREADS
    if (bad_offset >= 0)
        PyErr_Format(PyExc_ValueError, full ? "the offset map cannot hold the batch at offset "
                     "%lld (log.cleaner.dedupe.buffer.size)" : "malformed records in the batch "
                     "at offset %lld", (long long)bad_offset);
    else if (!failed)
        result = Py_BuildValue("nO", (Py_ssize_t)stop, full ? Py_True : Py_False);
    PyBuffer_Release(&view);
    return result;
}

/* Keeps the records of one batch body to keep in `kept_records`; -1 if malformed. */
static int64_t retain_records(KeyMap *m, const uint8_t *body, const uint8_t *end, int64_t base,
                              int drop_tombstones, buffer *kept_records, int64_t *seen,
                              int64_t *tombstones) {
    const uint8_t *p = body;
    record r;
    int64_t kept = 0;
    while (p < end) {
        if (!next_record(&p, end, &r))
            return -1;
        (*seen)++;
        int keep = !(r.tombstone && drop_tombstones);
        if (keep && r.key != NULL) {
            uint64_t h[2];
            murmur3_128(r.key, (size_t)r.key_length, h);
            entry *e = find(m, h);
            keep = e->stored == 0 || e->stored - 1 <= base + r.offset_delta;
        }
        if (keep) {
            kept++;
            *tombstones += r.tombstone;
            if (!append(kept_records, r.start, (size_t)(r.end - r.start)))
                return -2;
        }
    }
    return kept;
}

/* Appends one rebuilt batch: the original header, then `body` (the kept records, compressed
 * again with the batch's codec by the caller), with its length and record count made anew;
 * its CRC is set once the GIL is back (`rebuilt` keeps where the batch is). */
static int rebuild(buffer *out, const uint8_t *batch, const uint8_t *body, size_t body_size,
                   int64_t kept, buffer *rebuilt) {
    size_t at = out->size;
    if (!append(out, batch, HEADER_SIZE) || !append(out, body, body_size) ||
        !append(rebuilt, &at, sizeof at))
        return 0;
    uint8_t *h = out->data + at;
    put_u32be(h + 8, (uint32_t)(HEADER_SIZE + body_size - LOG_OVERHEAD));
    put_u32be(h + 57, (uint32_t)kept);
    return 1;
}

static int set_crcs(buffer *out, const buffer *rebuilt, PyObject *crc) {
    for (size_t i = 0; i < rebuilt->size / sizeof(size_t); i++) {
        size_t at;
        memcpy(&at, rebuilt->data + i * sizeof at, sizeof at);
        uint8_t *h = out->data + at;
        size_t length = get_u32be(h + 8) + LOG_OVERHEAD;
        PyObject *sum = PyObject_CallFunction(crc, "y#", (const char *)h + 21,
                                              (Py_ssize_t)(length - 21));
        if (sum == NULL)
            return 0;
        unsigned long value = PyLong_AsUnsignedLong(sum);
        Py_DECREF(sum);
        if (value == (unsigned long)-1 && PyErr_Occurred())
            return 0;
        put_u32be(h + 17, (uint32_t)value);
    }
    return 1;
}

static PyObject *keymap_retain_batches(KeyMap *m, PyObject *args) {
    Py_buffer view;
    PyObject *aborted_obj, *decompress, *compress, *crc;
    int drop_tombstones;
    if (!PyArg_ParseTuple(args, "y*OpOOO", &view, &aborted_obj, &drop_tombstones, &decompress,
                          &compress, &crc))
        return NULL;
    aborted_list aborted;
    if (!parse_aborted(aborted_obj, &aborted)) {
        PyBuffer_Release(&view);
        return NULL;
    }
    buffer out = {NULL, 0, 0}, kept_records = {NULL, 0, 0}, rebuilt = {NULL, 0, 0},
           aborts = {NULL, 0, 0};
    int64_t kept_total = 0, removed_total = 0, tombstones = 0, markers = 0, bad_offset = -1;
    int failed = 0, nomem = 0;
    size_t consumed = 0;
    const uint8_t *data = view.buf;
    size_t n = (size_t)view.len;
    Py_BEGIN_ALLOW_THREADS
    FOR_EACH_BATCH(data, n, pos, size) {
        const uint8_t *batch = data + pos;
        uint16_t attributes = (uint16_t)((batch[21] << 8) | batch[22]);
        int64_t count = get_u32be(batch + 57);
        consumed = pos + size;
        producer_slot *txn = NULL;
        if (batch[16] == 2 && (attributes & TRANSACTIONAL_FLAG)) {
            if ((txn = producer(m, get_i64be(batch + 43))) == NULL) {
                nomem = 1;
                break;
            }
        }
        if (batch[16] != 2 || (attributes & CONTROL_FLAG)) {
            int type = -1, had_data = 1;
            if (txn != NULL) {
                type = marker_type(batch, size);
                had_data = txn->data;
                txn->data = 0;    /* the marker ends the producer's transaction */
            }
            if (type == CONTROL_ABORT || (type == CONTROL_COMMIT && !had_data)) {
                /* a marker of a transaction with no data left (an aborted one has none once
                 * this pass is over: its batches are removed below) */
                if (drop_tombstones) {
                    int64_t offset = get_i64be(batch) + (int32_t)get_u32be(batch + 23);
                    if (type == CONTROL_ABORT && !append(&aborts, &offset, sizeof offset)) {
                        nomem = 1;
                        break;
                    }
                    markers++;
                    continue;
                }
                tombstones++;
            }
            if (!append(&out, batch, size)) {
                nomem = 1;
                break;
            }
            continue;
        }
        if (is_aborted(&aborted, batch)) {
            removed_total += count;
            continue;
        }
        int codec = attributes & COMPRESSION_MASK;
        const uint8_t *body = batch + HEADER_SIZE, *end = batch + size;
        PyObject *owner = NULL;
        if (codec) {
            Py_BLOCK_THREADS
            failed = !batch_records(batch, size, decompress, &body, &end, &owner);
            Py_UNBLOCK_THREADS
            if (failed)
                break;
        }
        int64_t base = get_i64be(batch), seen = 0;
        kept_records.size = 0;
        int64_t kept = retain_records(m, body, end, base, drop_tombstones, &kept_records, &seen,
                                      &tombstones);
        if (owner != NULL) {
            Py_BLOCK_THREADS
            Py_DECREF(owner);
            Py_UNBLOCK_THREADS
        }
        if (kept < 0) {
            if (kept == -2)
                nomem = 1;
            else
                bad_offset = base;
            break;
        }
        kept_total += kept;
        removed_total += seen - kept;
        if (txn != NULL && kept > 0)
            txn->data = 1;
        if (kept == seen) {
            if (!append(&out, batch, size)) {
                nomem = 1;
                break;
            }
            continue;
        }
        if (kept == 0)
            continue;
        const uint8_t *packed = kept_records.data;
        size_t packed_size = kept_records.size;
        PyObject *compressed = NULL;
        if (codec) {
            Py_BLOCK_THREADS
            compressed = PyObject_CallFunction(compress, "iy#", codec,
                                               (const char *)kept_records.data,
                                               (Py_ssize_t)kept_records.size);
            if (compressed != NULL && !PyBytes_Check(compressed)) {
                Py_CLEAR(compressed);
                PyErr_SetString(PyExc_TypeError, "compress must return bytes");
            }
            Py_UNBLOCK_THREADS
            if (compressed == NULL) {
                failed = 1;
                break;
            }
            packed = (const uint8_t *)PyBytes_AS_STRING(compressed);
            packed_size = (size_t)PyBytes_GET_SIZE(compressed);
        }
        int ok = rebuild(&out, batch, packed, packed_size, kept, &rebuilt);
        if (compressed != NULL) {
            Py_BLOCK_THREADS
            Py_DECREF(compressed);
            Py_UNBLOCK_THREADS
        }
        if (!ok) {
            nomem = 1;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (nomem)
        PyErr_NoMemory();
    else if (bad_offset >= 0)
        PyErr_Format(PyExc_ValueError, "malformed records in the batch at offset %lld",
                     (long long)bad_offset);
    else if (!failed && set_crcs(&out, &rebuilt, crc))
        result = Py_BuildValue("y#LLnLLy#", out.data ? (const char *)out.data : "",
                               (Py_ssize_t)out.size, (long long)kept_total,
                               (long long)removed_total, (Py_ssize_t)consumed,
                               (long long)tombstones, (long long)markers,
                               aborts.data ? (const char *)aborts.data : "",
                               (Py_ssize_t)aborts.size);
    free(out.data);
    free(aborts.data);
    free(kept_records.data);
    free(rebuilt.data);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *keymap_get_size(KeyMap *m, void *closure) {
    (void)closure;
    return PyLong_FromSize_t(m->size);
}

static PyObject *keymap_get_limit(KeyMap *m, void *closure) {
    (void)closure;
    return PyLong_FromSize_t(m->limit);
}

static PyMethodDef keymap_methods[] = {
    {"add_batches", (PyCFunction)keymap_add_batches, METH_VARARGS,
     "add_batches(data, aborted, from_offset, decompress) -> (position, full)"},
    {"retain_batches", (PyCFunction)keymap_retain_batches, METH_VARARGS,
     "retain_batches(data, aborted, drop_tombstones, decompress, compress, crc) -> "
     "(bytes, kept, removed, consumed, tombstones, markers, aborts)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef keymap_getset[] = {
    {"size", (getter)keymap_get_size, NULL, "keys in the map", NULL},
    {"limit", (getter)keymap_get_limit, NULL, "keys the map takes before it is full", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject KeyMapType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "bmq.cleaner._keymap.KeyMap",
    .tp_basicsize = sizeof(KeyMap),
    .tp_dealloc = (destructor)keymap_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Kafka's offset map: 128-bit key hash -> latest offset, in fixed memory.",
    .tp_methods = keymap_methods,
    .tp_getset = keymap_getset,
    .tp_new = keymap_new,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_keymap", NULL, -1, NULL,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__keymap(void) {
    if (PyType_Ready(&KeyMapType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&KeyMapType);
    if (PyModule_AddObject(m, "KeyMap", (PyObject *)&KeyMapType) < 0) {
        Py_DECREF(&KeyMapType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
