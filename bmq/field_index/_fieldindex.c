/* The hot loops of field indexes (bmq.field_index), run without the GIL so that index building
 * never holds up the broker's event loop:
 *
 * scan(records, base_offset, count, fields[, by_record]) -> (malformed, entries)
 *   records:     bytes-like, the (decompressed) records section of one v2 batch
 *   base_offset: the batch's base offset, recorded with every value found (with by_record,
 *                the position of the record in ``records`` instead: queries then decode
 *                only the records that match)
 *   count:       the batch's record count
 *   fields:      tuple of (kind, steps): kind 0 the key, 1 a header (steps: (name,)),
 *                2 a JSON dot path into the value (steps: its names), names as bytes
 *   Returns how many values are not JSON (only counted when a JSON field is asked for) and,
 *   per field, bytes of (uint64 hash, uint64 base_offset) little-endian pairs, one per record
 *   that has the field. Raises ValueError when the records do not parse (the batch is then
 *   counted as malformed by the caller).
 *
 * build(entries, start, end, records, malformed, bits) -> bytes
 *   An index chunk (bmq/field_index/chunk.py) from entries as scan returns them (any order,
 *   duplicates allowed): sorted, deduplicated, with its bucket table.
 *
 * hash(text) -> int: the 64-bit hash of a field's text (FNV-1a, then splitmix64's finalizer so
 * that the top bits, which pick a bucket, are well mixed).
 *
 * A field's text is bmq/field_index/fields.py's: the key's or the header value's bytes; for JSON
 * the unescaped UTF-8 of a string, the literal of a number, true, false or null; objects and arrays
 * have none. A value is JSON when it is valid UTF-8 and RFC 8259 JSON (Python's json.loads less
 * NaN and Infinity); the last of duplicate keys wins, as in Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_kafka_bytes.h"   /* zigzag varints and the growable output buffer */

#define MAX_FIELDS 16
#define MAX_STEPS 32
#define MAX_DEPTH 900
#define HEADER_SIZE 56

/* ------------------------------------------------------------------ hashing */
static uint64_t hash_bytes(const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h;
}

static int put_entry(buffer *b, uint64_t hashed, uint64_t offset) {
    unsigned char e[16];
    for (int i = 0; i < 8; i++) {
        e[i] = (unsigned char)(hashed >> (8 * i));
        e[8 + i] = (unsigned char)(offset >> (8 * i));
    }
    return append(b, e, 16) ? 0 : -1;
}

/* ------------------------------------------------------------------ UTF-8 (strict) */
static int utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t len;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; }
        else return 0;
        if (i + len > n) return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += len;
    }
    return 1;
}

/* ------------------------------------------------------------------ JSON */
typedef struct {
    const unsigned char *p, *end;
    const Py_buffer *steps;   /* the path looked for */
    int nsteps;
    buffer key;                  /* scratch: an object key, unescaped */
    buffer *text;                /* where a found string's text goes */
    const unsigned char *lit; /* a found number or literal: its bytes */
    size_t lit_len;
    int found;                /* 0 none, 1 text in *text, 2 literal at lit */
} Json;

static void ws(Json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int hex4(const unsigned char *p, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

static int put_code_point(buffer *b, uint32_t cp) {
    unsigned char u[4];
    size_t n;
    if (cp < 0x80) { u[0] = (unsigned char)cp; n = 1; }
    else if (cp < 0x800) { u[0] = (unsigned char)(0xC0 | (cp >> 6));
                           u[1] = (unsigned char)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) { u[0] = (unsigned char)(0xE0 | (cp >> 12));
                             u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
                             u[2] = (unsigned char)(0x80 | (cp & 0x3F)); n = 3; }
    else { u[0] = (unsigned char)(0xF0 | (cp >> 18)); u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
           u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (unsigned char)(0x80 | (cp & 0x3F));
           n = 4; }
    return append(b, u, n) ? 0 : -1;
}

/* A string at j->p (the opening quote), unescaped into ``out`` when not NULL. Lone surrogates
 * are kept as their 3-byte forms (Python's "surrogatepass"). */
static int string(Json *j, buffer *out) {
    j->p++;
    if (out) out->size = 0;
    while (j->p < j->end) {
        unsigned char c = *j->p;
        if (c == '"') { j->p++; return 0; }
        if (c < 0x20) return -1;
        if (c != '\\') {
            const unsigned char *run = j->p;
            while (j->p < j->end && *j->p != '"' && *j->p != '\\' && *j->p >= 0x20) j->p++;
            if (out && !append(out, run, (size_t)(j->p - run))) return -2;
            continue;
        }
        if (j->p + 1 >= j->end) return -1;
        unsigned char e = j->p[1];
        j->p += 2;
        unsigned char plain;
        switch (e) {
        case '"': plain = '"'; break;
        case '\\': plain = '\\'; break;
        case '/': plain = '/'; break;
        case 'b': plain = '\b'; break;
        case 'f': plain = '\f'; break;
        case 'n': plain = '\n'; break;
        case 'r': plain = '\r'; break;
        case 't': plain = '\t'; break;
        case 'u': {
            uint32_t cp;
            if (j->end - j->p < 4 || hex4(j->p, &cp)) return -1;
            j->p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && j->end - j->p >= 6 && j->p[0] == '\\' &&
                j->p[1] == 'u') {
                uint32_t low;
                if (hex4(j->p + 2, &low)) return -1;
                if (low >= 0xDC00 && low <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    j->p += 6;
                }
            }
            if (out && put_code_point(out, cp)) return -2;
            continue;
        }
        default: return -1;
        }
        if (out && !append(out, &plain, 1)) return -2;
    }
    return -1;
}

static int digits(Json *j) {
    const unsigned char *start = j->p;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
    return j->p > start ? 0 : -1;
}

static int number(Json *j) {
    if (*j->p == '-') j->p++;
    if (j->p >= j->end) return -1;
    if (*j->p == '0') j->p++;
    else if (digits(j)) return -1;
    if (j->p < j->end && *j->p == '.') { j->p++; if (digits(j)) return -1; }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
        if (digits(j)) return -1;
    }
    return 0;
}

static int word(Json *j, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n)) return -1;
    j->p += n;
    return 0;
}

/* A value at j->p. ``level``: how many steps of the path lead here (-1: off the path); the
 * value at the path's end is the field. */
static int value(Json *j, int level, int depth) {
    ws(j);
    if (j->p >= j->end || depth > MAX_DEPTH) return -1;
    int target = level == j->nsteps;
    unsigned char c = *j->p;
    if (c == '{' || c == '[') {
        if (target) j->found = 0;
        j->p++;
        ws(j);
        unsigned char close = c == '{' ? '}' : ']';
        if (j->p < j->end && *j->p == close) { j->p++; return 0; }
        for (;;) {
            int next = -1;
            if (c == '{') {
                ws(j);
                if (j->p >= j->end || *j->p != '"') return -1;
                int on_path = level >= 0 && level < j->nsteps;
                int r = string(j, on_path ? &j->key : NULL);
                if (r) return r;
                if (on_path && j->key.size == (size_t)j->steps[level].len &&
                    memcmp(j->key.data, j->steps[level].buf, j->key.size) == 0)
                    next = level + 1;
                ws(j);
                if (j->p >= j->end || *j->p != ':') return -1;
                j->p++;
            }
            int r = value(j, next, depth + 1);
            if (r) return r;
            ws(j);
            if (j->p >= j->end) return -1;
            if (*j->p == ',') { j->p++; continue; }
            if (*j->p == close) { j->p++; return 0; }
            return -1;
        }
    }
    const unsigned char *start = j->p;
    int r;
    if (c == '"') {
        r = string(j, target ? j->text : NULL);
        if (!r && target) j->found = 1;
        return r;
    }
    if (c == '-' || (c >= '0' && c <= '9')) r = number(j);
    else if (c == 't') r = word(j, "true");
    else if (c == 'f') r = word(j, "false");
    else if (c == 'n') r = word(j, "null");
    else return -1;
    if (!r && target) {
        j->found = 2;
        j->lit = start;
        j->lit_len = (size_t)(j->p - start);
    }
    return r;
}

/* The field at ``steps`` of a JSON document: 1 found (hash in *out), 0 absent, -1 not JSON,
 * -2 out of memory. */
static int json_field(const unsigned char *doc, size_t n, const Py_buffer *steps, int nsteps,
                      buffer *key, buffer *text, uint64_t *out) {
    Json j = {doc, doc + n, steps, nsteps, *key, text, NULL, 0, 0};
    int r = value(&j, 0, 0);
    *key = j.key;
    if (r) return r == -2 ? -2 : -1;
    ws(&j);
    if (j.p != j.end) return -1;
    if (j.found == 1) { *out = hash_bytes(text->data, text->size); return 1; }
    if (j.found == 2) { *out = hash_bytes(j.lit, j.lit_len); return 1; }
    return 0;
}

/* ------------------------------------------------------------------ records */
typedef struct {
    int kind;
    int nsteps;
    Py_buffer steps[MAX_STEPS];
} FieldSpec;

static int bytes_field(const unsigned char **p, const unsigned char *end,
                       const unsigned char **data, int64_t *len) {
    if (!varint(p, end, len)) return -1;
    if (*len < 0) { *data = NULL; return 0; }
    if (*len > end - *p) return -1;
    *data = *p;
    *p += *len;
    return 0;
}

/* 0 done; -1 records that do not parse; -2 out of memory. */
static int scan_records(const unsigned char *p, const unsigned char *end, uint64_t base,
                        int by_record, int64_t count, const FieldSpec *fields, int nfields,
                        buffer *outs, long *malformed) {
    const unsigned char *first = p;
    buffer key = {0}, text = {0};
    int wants_json = 0, rc = 0;
    for (int f = 0; f < nfields; f++) wants_json |= fields[f].kind == 2;
    for (int64_t r = 0; r < count && !rc; r++) {
        int64_t length, ts, delta, klen, vlen, nheaders;
        uint64_t where = by_record ? (uint64_t)(p - first) : base;
        const unsigned char *k, *v;
        if (!varint(&p, end, &length) || length < 1 || length > end - p) { rc = -1; break; }
        const unsigned char *rec_end = p + length;
        p++;   /* attributes */
        if (!varint(&p, rec_end, &ts) || !varint(&p, rec_end, &delta) ||
            bytes_field(&p, rec_end, &k, &klen) || bytes_field(&p, rec_end, &v, &vlen) ||
            !varint(&p, rec_end, &nheaders) || nheaders < 0) { rc = -1; break; }
        const unsigned char *headers = p;
        for (int64_t h = 0; h < nheaders; h++) {
            const unsigned char *hk, *hv;
            int64_t hklen, hvlen;
            if (bytes_field(&p, rec_end, &hk, &hklen) || hk == NULL ||
                bytes_field(&p, rec_end, &hv, &hvlen)) { rc = -1; break; }
        }
        if (rc || p != rec_end) { rc = -1; break; }
        int is_json = !wants_json || v == NULL || utf8_valid(v, (size_t)vlen);
        for (int f = 0; f < nfields && !rc; f++) {
            uint64_t hashed = 0;
            int have = 0;
            if (fields[f].kind == 0) {
                if (k) { hashed = hash_bytes(k, (size_t)klen); have = 1; }
            } else if (fields[f].kind == 1) {
                const unsigned char *q = headers;
                for (int64_t h = 0; h < nheaders; h++) {
                    const unsigned char *hk, *hv;
                    int64_t hklen, hvlen;
                    bytes_field(&q, rec_end, &hk, &hklen);
                    bytes_field(&q, rec_end, &hv, &hvlen);
                    if (hklen == fields[f].steps[0].len &&
                        memcmp(hk, fields[f].steps[0].buf, (size_t)hklen) == 0) {
                        if (hv) { hashed = hash_bytes(hv, (size_t)hvlen); have = 1; }
                        break;
                    }
                }
            } else if (v != NULL && is_json) {
                int found = json_field(v, (size_t)vlen, fields[f].steps, fields[f].nsteps,
                                       &key, &text, &hashed);
                if (found == -2) rc = -2;
                else if (found < 0) is_json = 0;
                else have = found;
            }
            if (have && put_entry(&outs[f], hashed, where)) rc = -2;
        }
        if (!is_json) (*malformed)++;
        p = rec_end;
    }
    free(key.data);
    free(text.data);
    return rc;
}

static void release_fields(FieldSpec *fields, int nfields) {
    for (int f = 0; f < nfields; f++)
        for (int s = 0; s < fields[f].nsteps; s++) PyBuffer_Release(&fields[f].steps[s]);
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer data;
    unsigned long long base;
    long long count;
    PyObject *spec;
    int by_record = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*KLO!|p", &data, &base, &count, &PyTuple_Type, &spec,
                          &by_record))
        return NULL;
    int nfields = (int)PyTuple_GET_SIZE(spec);
    FieldSpec fields[MAX_FIELDS];
    buffer outs[MAX_FIELDS];
    memset(outs, 0, sizeof outs);
    int ready = 0;
    PyObject *result = NULL;
    for (int f = 0; f < MAX_FIELDS; f++) fields[f].nsteps = 0;
    if (nfields > MAX_FIELDS) {
        PyErr_SetString(PyExc_ValueError, "too many fields");
        goto done;
    }
    for (; ready < nfields; ready++) {
        PyObject *steps;
        FieldSpec *fs = &fields[ready];
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(spec, ready), "iO!", &fs->kind, &PyTuple_Type,
                              &steps))
            goto done;
        if (PyTuple_GET_SIZE(steps) > MAX_STEPS) {
            PyErr_SetString(PyExc_ValueError, "path too long");
            goto done;
        }
        for (Py_ssize_t s = 0; s < PyTuple_GET_SIZE(steps); s++) {
            if (PyObject_GetBuffer(PyTuple_GET_ITEM(steps, s), &fs->steps[s], PyBUF_SIMPLE))
                goto done;
            fs->nsteps++;
        }
    }
    long malformed = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = scan_records(data.buf, (const unsigned char *)data.buf + data.len, base, by_record,
                      count, fields, nfields, outs, &malformed);
    Py_END_ALLOW_THREADS
    if (rc == -2) { PyErr_NoMemory(); goto done; }
    if (rc == -1) { PyErr_SetString(PyExc_ValueError, "records do not parse"); goto done; }
    PyObject *entries = PyTuple_New(nfields);
    if (!entries) goto done;
    for (int f = 0; f < nfields; f++) {
        PyObject *b = PyBytes_FromStringAndSize((const char *)outs[f].data,
                                                (Py_ssize_t)outs[f].size);
        if (!b) { Py_DECREF(entries); goto done; }
        PyTuple_SET_ITEM(entries, f, b);
    }
    result = Py_BuildValue("(lN)", malformed, entries);
done:
    for (int f = 0; f < MAX_FIELDS; f++) free(outs[f].data);
    release_fields(fields, MAX_FIELDS);
    PyBuffer_Release(&data);
    return result;
}

/* ------------------------------------------------------------------ chunks */
static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

typedef struct {
    uint64_t hash, offset;
} Entry;

static int by_entry(const void *a, const void *b) {
    const Entry *x = a, *y = b;
    if (x->hash != y->hash) return x->hash < y->hash ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int entry_less(const Entry *x, const Entry *y) {
    return x->hash < y->hash || (x->hash == y->hash && x->offset < y->offset);
}

/* Sort ``n`` entries: a linear merge when they are two sorted runs (what merging two chunks
 * gives), else qsort. Returns the sorted array (``entries`` or ``spare``). */
static Entry *sort_entries(Entry *entries, Entry *spare, size_t n) {
    size_t cut = 1, i;
    while (cut < n && !entry_less(&entries[cut], &entries[cut - 1])) cut++;
    for (i = cut + 1; i < n && !entry_less(&entries[i], &entries[i - 1]); i++) {}
    if (cut >= n || i < n) {
        if (cut < n) qsort(entries, n, sizeof(Entry), by_entry);
        return entries;
    }
    size_t a = 0, b = cut, o = 0;
    while (a < cut && b < n)
        spare[o++] = entry_less(&entries[b], &entries[a]) ? entries[b++] : entries[a++];
    while (a < cut) spare[o++] = entries[a++];
    while (b < n) spare[o++] = entries[b++];
    return spare;
}

static void put_le(unsigned char *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static PyObject *build(PyObject *self, PyObject *args) {
    Py_buffer raw;
    long long start, end, records, malformed;
    int max_bits, target;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*LLLLii", &raw, &start, &end, &records, &malformed,
                          &max_bits, &target))
        return NULL;
    size_t n = (size_t)raw.len / 16;
    Entry *entries = malloc(n ? 2 * n * sizeof(Entry) : 1), *spare = entries + n;
    if (!entries) { PyBuffer_Release(&raw); return PyErr_NoMemory(); }
    const unsigned char *in = raw.buf;
    size_t unique = 0;
    Py_BEGIN_ALLOW_THREADS
    for (size_t i = 0; i < n; i++) {
        entries[i].hash = le64(in + 16 * i);
        entries[i].offset = le64(in + 16 * i + 8);
    }
    Entry *sorted = sort_entries(entries, spare, n);
    for (size_t i = 0; i < n; i++)
        if (unique == 0 || entries[unique - 1].hash != sorted[i].hash ||
            entries[unique - 1].offset != sorted[i].offset)
            entries[unique++] = sorted[i];
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&raw);
    int bits = 0;
    while (bits < max_bits && (unique >> bits) > (size_t)target) bits++;
    size_t nbuckets = ((size_t)1 << bits) + 1;
    size_t size = HEADER_SIZE + nbuckets * 4 + unique * 16;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (!out) { free(entries); return NULL; }
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    memcpy(o, "BMQFIDX1", 8);
    put_le(o + 8, (uint64_t)start, 8);
    put_le(o + 16, (uint64_t)end, 8);
    put_le(o + 24, (uint64_t)records, 8);
    put_le(o + 32, (uint64_t)malformed, 8);
    put_le(o + 40, (uint64_t)unique, 8);
    put_le(o + 48, (uint64_t)bits, 4);
    put_le(o + 52, 0, 4);
    unsigned char *buckets = o + HEADER_SIZE;
    unsigned char *body = buckets + nbuckets * 4;
    Py_BEGIN_ALLOW_THREADS
    size_t index = 0;
    for (size_t bucket = 0; bucket + 1 < nbuckets; bucket++) {
        put_le(buckets + bucket * 4, index, 4);
        while (index < unique && (bits ? entries[index].hash >> (64 - bits) : 0) == bucket)
            index++;
    }
    put_le(buckets + (nbuckets - 1) * 4, unique, 4);
    for (size_t i = 0; i < unique; i++) {
        put_le(body + 16 * i, entries[i].hash, 8);
        put_le(body + 16 * i + 8, entries[i].offset, 8);
    }
    Py_END_ALLOW_THREADS
    free(entries);
    return out;
}

static PyObject *hash(PyObject *self, PyObject *args) {
    Py_buffer text;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*", &text)) return NULL;
    uint64_t h = hash_bytes(text.buf, (size_t)text.len);
    PyBuffer_Release(&text);
    return PyLong_FromUnsignedLongLong(h);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "Index entries of one batch's records."},
    {"build", build, METH_VARARGS, "An index chunk from entries."},
    {"hash", hash, METH_VARARGS, "The 64-bit hash of a field's text."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fieldindex", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fieldindex(void) { return PyModule_Create(&module); }
