/* Record batches as the log cleaner (_keymap.c) reads them: Kafka v2 batch header fields,
 * records and their keys, transaction markers, aborted transactions, and the 128-bit key hash
 * of the offset map.
 * Static functions, included by _keymap.c only. */
#ifndef BMQ_CLEANER_BATCHES_H
#define BMQ_CLEANER_BATCHES_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_kafka_bytes.h"

#define HEADER_SIZE 61
#define LOG_OVERHEAD 12
#define COMPRESSION_MASK 0x07
#define TRANSACTIONAL_FLAG 0x10
#define CONTROL_FLAG 0x20

/* ------------------------------------------------------------------ MurmurHash3 x64/128 */
static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t fmix64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return k;
}

static void murmur3_128(const uint8_t *data, size_t len, uint64_t out[2]) {
    const size_t nblocks = len / 16;
    uint64_t h1 = 0x9368e53c2f6af274ULL, h2 = 0x586dcd208f7cd3fdULL;
    const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
    for (size_t i = 0; i < nblocks; i++) {
        uint64_t k1, k2;
        memcpy(&k1, data + i * 16, 8);
        memcpy(&k2, data + i * 16 + 8, 8);
        k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
        h1 = rotl64(h1, 27); h1 += h2; h1 = h1 * 5 + 0x52dce729;
        k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2;
        h2 = rotl64(h2, 31); h2 += h1; h2 = h2 * 5 + 0x38495ab5;
    }
    const uint8_t *tail = data + nblocks * 16;
    uint64_t k1 = 0, k2 = 0;
    switch (len & 15) {
    case 15: k2 ^= (uint64_t)tail[14] << 48; /* fall through */
    case 14: k2 ^= (uint64_t)tail[13] << 40; /* fall through */
    case 13: k2 ^= (uint64_t)tail[12] << 32; /* fall through */
    case 12: k2 ^= (uint64_t)tail[11] << 24; /* fall through */
    case 11: k2 ^= (uint64_t)tail[10] << 16; /* fall through */
    case 10: k2 ^= (uint64_t)tail[9] << 8;   /* fall through */
    case 9:  k2 ^= (uint64_t)tail[8];
             k2 *= c2; k2 = rotl64(k2, 33); k2 *= c1; h2 ^= k2; /* fall through */
    case 8:  k1 ^= (uint64_t)tail[7] << 56;  /* fall through */
    case 7:  k1 ^= (uint64_t)tail[6] << 48;  /* fall through */
    case 6:  k1 ^= (uint64_t)tail[5] << 40;  /* fall through */
    case 5:  k1 ^= (uint64_t)tail[4] << 32;  /* fall through */
    case 4:  k1 ^= (uint64_t)tail[3] << 24;  /* fall through */
    case 3:  k1 ^= (uint64_t)tail[2] << 16;  /* fall through */
    case 2:  k1 ^= (uint64_t)tail[1] << 8;   /* fall through */
    case 1:  k1 ^= (uint64_t)tail[0];
             k1 *= c1; k1 = rotl64(k1, 31); k1 *= c2; h1 ^= k1;
    }
    h1 ^= len; h2 ^= len;
    h1 += h2; h2 += h1;
    h1 = fmix64(h1); h2 = fmix64(h2);
    h1 += h2; h2 += h1;
    out[0] = h1;
    out[1] = h2;
}


/* ------------------------------------------------------------------ records */
typedef struct {
    const uint8_t *start, *end;   /* the whole record, length prefix included */
    int64_t offset_delta;
    const uint8_t *key;           /* NULL: null key */
    int64_t key_length;
    int tombstone;
} record;

/* Parse the record at *p; 0 if malformed. */
static int next_record(const uint8_t **p, const uint8_t *end, record *r) {
    int64_t length, n;
    r->start = *p;
    if (!varint(p, end, &length) || length <= 0 || length > end - *p)
        return 0;
    const uint8_t *q = *p, *record_end = *p + length;
    q += 1;                                           /* attributes */
    if (q > record_end || !varint(&q, record_end, &n) ||
        !varint(&q, record_end, &r->offset_delta))
        return 0;
    if (!varint(&q, record_end, &r->key_length) || r->key_length < -1 ||
        r->key_length > record_end - q)
        return 0;
    r->key = r->key_length >= 0 ? q : NULL;
    if (r->key_length > 0)
        q += r->key_length;
    if (!varint(&q, record_end, &n) || n < -1 || n > record_end - q)
        return 0;
    r->tombstone = n < 0;
    *p = r->end = record_end;
    return 1;
}

#define CONTROL_ABORT 0
#define CONTROL_COMMIT 1

/* The control type of a marker batch (CONTROL_ABORT, CONTROL_COMMIT), -1 if it cannot be read
 * here. */
static int marker_type(const uint8_t *batch, size_t size) {
    uint16_t attributes = (uint16_t)((batch[21] << 8) | batch[22]);
    const uint8_t *p = batch + HEADER_SIZE, *end = batch + size;
    record r;
    if ((attributes & COMPRESSION_MASK) || !next_record(&p, end, &r) || r.key_length < 4)
        return -1;
    return (r.key[2] << 8) | r.key[3];
}

typedef struct {
    const uint8_t *data;
    Py_ssize_t count;    /* triples */
} aborted_list;

static int is_aborted(const aborted_list *a, const uint8_t *batch) {
    uint16_t attributes = (uint16_t)((batch[21] << 8) | batch[22]);
    if (!(attributes & TRANSACTIONAL_FLAG))
        return 0;
    int64_t pid = get_i64be(batch + 43), base = get_i64be(batch);
    for (Py_ssize_t i = 0; i < a->count; i++) {
        int64_t t[3];
        memcpy(t, a->data + i * 24, 24);
        if (t[0] == pid && t[1] <= base && base < t[2])
            return 1;
    }
    return 0;
}

/* The records of a batch, decompressed if need be: *owner holds the bytes (NULL if none). */
static int batch_records(const uint8_t *batch, size_t size, PyObject *decompress,
                         const uint8_t **body, const uint8_t **end, PyObject **owner) {
    uint16_t attributes = (uint16_t)((batch[21] << 8) | batch[22]);
    int codec = attributes & COMPRESSION_MASK;
    *owner = NULL;
    *body = batch + HEADER_SIZE;
    *end = batch + size;
    if (!codec)
        return 1;
    PyObject *inflated = PyObject_CallFunction(decompress, "iy#", codec, (const char *)*body,
                                               (Py_ssize_t)(*end - *body));
    if (inflated == NULL)
        return 0;
    if (!PyBytes_Check(inflated)) {
        Py_DECREF(inflated);
        PyErr_SetString(PyExc_TypeError, "decompress must return bytes");
        return 0;
    }
    *owner = inflated;
    *body = (const uint8_t *)PyBytes_AS_STRING(inflated);
    *end = *body + PyBytes_GET_SIZE(inflated);
    return 1;
}

/* Calls f(batch position, size) for each whole batch of data; stops at a partial one. */
#define FOR_EACH_BATCH(data, n, pos, size)                                        \
    for (size_t pos = 0, size = 0;                                                \
         pos + HEADER_SIZE <= (n) &&                                              \
         (size = (size_t)get_u32be((data) + pos + 8) + LOG_OVERHEAD) >= HEADER_SIZE && \
         size <= (n) - pos;                                                       \
         pos += size)

static int parse_aborted(PyObject *obj, aborted_list *a) {
    if (!PyBytes_Check(obj) || PyBytes_GET_SIZE(obj) % 24) {
        PyErr_SetString(PyExc_TypeError, "aborted must be bytes of int64 triples");
        return 0;
    }
    a->data = (const uint8_t *)PyBytes_AS_STRING(obj);
    a->count = PyBytes_GET_SIZE(obj) / 24;
    return 1;
}

#endif
