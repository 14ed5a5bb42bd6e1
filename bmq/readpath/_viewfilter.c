/* The hot loop of views (bmq.readpath.views): keep the records of Kafka v2 record batches whose
 * headers match a filter, in batches rewritten so that offsets stay the source's.
 *
 * filter_batches(data, program, headers, decompress) -> bytes
 *   data:       bytes-like, whole record batches as the log holds them (a partial batch at the
 *               end is left out)
 *   program:    the compiled filter (bmq.readpath.filters: a prefix-order tree of opcodes)
 *   headers:    tuple of bytes, the header keys the program's slots refer to
 *   decompress: callable(codec, payload) -> bytes, for compressed batches
 *
 * Each batch becomes one batch with the same header (base offset, last offset delta, producer
 * id, epoch and sequence, timestamps), holding only the matching records, byte for byte
 * (their offset and timestamp deltas are relative to the unchanged base), uncompressed, with
 * its record count, length and CRC-32C made anew. A batch none of whose records match stays as
 * an empty batch, so consumers move past its offsets (as after compaction). Control batches
 * are kept whole. A batch whose records cannot be parsed is kept empty: nothing unchecked is
 * ever passed on.
 *
 * A record's header is looked up by key (its first occurrence); a missing header or a null
 * value is SQL's NULL. Logic is three-valued (true, false, unknown); a record is kept when the
 * program is true.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_kafka_bytes.h"

#define HEADER_SIZE 61
#define LOG_OVERHEAD 12
#define CRC_FROM 21
#define COMPRESSION_MASK 0x07
#define CONTROL_FLAG 0x20
#define MAX_SLOTS 255

enum { F = 0, T = 1, U = 2 };
enum { OP_TRUE, OP_FALSE, OP_AND, OP_OR, OP_NOT, OP_IS_NULL, OP_STR_EQ, OP_NUM_CMP, OP_BETWEEN,
       OP_IN };

/* ------------------------------------------------------------------ CRC-32C */
static uint32_t crc_table[8][256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_HW_CRC 1
__attribute__((target("sse4.2")))
static uint32_t crc32c_hw(const uint8_t *p, size_t n) {
    uint64_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32 ^ 0xFFFFFFFFu;
}
static int hw_crc;
#endif

static uint32_t crc32c_sw(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);   /* little-endian machines only (checked at import) */
        memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
            crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
            crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
            crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return c ^ 0xFFFFFFFFu;
}

static uint32_t crc32c(const uint8_t *p, size_t n) {
#ifdef HAVE_HW_CRC
    if (hw_crc)
        return crc32c_hw(p, n);
#endif
    return crc32c_sw(p, n);
}

/* ------------------------------------------------------------------ evaluation */
typedef struct {
    const uint8_t *value[MAX_SLOTS];   /* NULL: the record has no such header (or a null value) */
    int64_t length[MAX_SLOTS];
} slots;

typedef struct {
    const uint8_t *code, *end;
    int bad;
} program;

static int read_bytes(program *pr, void *out, size_t n) {
    if ((size_t)(pr->end - pr->code) < n) {
        pr->bad = 1;
        memset(out, 0, n);
        return 0;
    }
    memcpy(out, pr->code, n);
    pr->code += n;
    return 1;
}

static int slot_number(const uint8_t *v, int64_t n, double *out) {
    char text[64];
    if (v == NULL || n <= 0 || n >= (int64_t)sizeof text)
        return 0;
    memcpy(text, v, (size_t)n);
    text[n] = 0;
    char *stop;
    *out = strtod(text, &stop);
    return stop == text + n;
}

static int eval(program *pr, const slots *s);

static int eval_group(program *pr, const slots *s, int is_and) {
    uint16_t n;
    read_bytes(pr, &n, 2);
    int result = is_and ? T : F;
    for (uint16_t i = 0; i < n && !pr->bad; i++) {
        int v = eval(pr, s);
        if (is_and) {
            if (v == F || result == F)
                result = F;
            else if (v == U)
                result = U;
        } else {
            if (v == T || result == T)
                result = T;
            else if (v == U)
                result = U;
        }
    }
    return result;
}

static int eval(program *pr, const slots *s) {
    uint8_t op = 0, slot = 0;
    if (!read_bytes(pr, &op, 1))
        return U;
    switch (op) {
    case OP_TRUE:
        return T;
    case OP_FALSE:
        return F;
    case OP_AND:
    case OP_OR:
        return eval_group(pr, s, op == OP_AND);
    case OP_NOT: {
        int v = eval(pr, s);
        return v == U ? U : (v == T ? F : T);
    }
    case OP_IS_NULL:
        read_bytes(pr, &slot, 1);
        return s->value[slot] == NULL ? T : F;
    case OP_STR_EQ: {
        uint32_t n = 0;
        read_bytes(pr, &slot, 1);
        read_bytes(pr, &n, 4);
        if ((size_t)(pr->end - pr->code) < n) {
            pr->bad = 1;
            return U;
        }
        const uint8_t *want = pr->code;
        pr->code += n;
        if (s->value[slot] == NULL)
            return U;
        return s->length[slot] == (int64_t)n && memcmp(s->value[slot], want, n) == 0 ? T : F;
    }
    case OP_NUM_CMP: {
        uint8_t cmp = 0;
        double want = 0, have;
        read_bytes(pr, &slot, 1);
        read_bytes(pr, &cmp, 1);
        read_bytes(pr, &want, 8);
        if (!slot_number(s->value[slot], s->length[slot], &have))
            return U;
        switch (cmp) {
        case 0: return have == want ? T : F;
        case 1: return have < want ? T : F;
        case 2: return have <= want ? T : F;
        case 3: return have > want ? T : F;
        default: return have >= want ? T : F;
        }
    }
    case OP_BETWEEN: {
        double low = 0, high = 0, have;
        read_bytes(pr, &slot, 1);
        read_bytes(pr, &low, 8);
        read_bytes(pr, &high, 8);
        if (!slot_number(s->value[slot], s->length[slot], &have))
            return U;
        return low <= have && have <= high ? T : F;
    }
    case OP_IN: {
        uint16_t count = 0;
        int found = 0;
        read_bytes(pr, &slot, 1);
        read_bytes(pr, &count, 2);
        for (uint16_t i = 0; i < count && !pr->bad; i++) {
            uint32_t n = 0;
            read_bytes(pr, &n, 4);
            if ((size_t)(pr->end - pr->code) < n) {
                pr->bad = 1;
                return U;
            }
            if (s->value[slot] != NULL && s->length[slot] == (int64_t)n &&
                memcmp(s->value[slot], pr->code, n) == 0)
                found = 1;
            pr->code += n;
        }
        if (s->value[slot] == NULL)
            return U;
        return found ? T : F;
    }
    default:
        pr->bad = 1;
        return U;
    }
}

/* ------------------------------------------------------------------ filtering */
typedef struct {
    const uint8_t *program;
    Py_ssize_t program_size;
    Py_ssize_t nheaders;
    const uint8_t *key[MAX_SLOTS];
    Py_ssize_t key_length[MAX_SLOTS];
} filter;

/* Parse one record's headers into s; 0 if the record is malformed. */
static int record_headers(const filter *f, const uint8_t *p, const uint8_t *end, slots *s) {
    int64_t n;
    p += 1;                                           /* attributes */
    if (p > end || !varint(&p, end, &n) || !varint(&p, end, &n))   /* timestamp, offset deltas */
        return 0;
    for (int field = 0; field < 2; field++) {         /* key, value */
        if (!varint(&p, end, &n) || n < -1 || (n > 0 && n > end - p))
            return 0;
        if (n > 0)
            p += n;
    }
    for (Py_ssize_t i = 0; i < f->nheaders; i++)
        s->value[i] = NULL;
    int64_t count;
    if (!varint(&p, end, &count) || count < 0)
        return 0;
    for (int64_t h = 0; h < count; h++) {
        int64_t key_length, value_length;
        if (!varint(&p, end, &key_length) || key_length < 0 || key_length > end - p)
            return 0;
        const uint8_t *key = p;
        p += key_length;
        if (!varint(&p, end, &value_length) || value_length < -1 || value_length > end - p)
            return 0;
        const uint8_t *value = p;
        if (value_length > 0)
            p += value_length;
        if (value_length < 0)
            continue;
        for (Py_ssize_t i = 0; i < f->nheaders; i++) {
            if (s->value[i] == NULL && f->key_length[i] == key_length &&
                memcmp(f->key[i], key, (size_t)key_length) == 0) {
                s->value[i] = value;
                s->length[i] = value_length;
            }
        }
    }
    return p == end;
}

/* Append the matching records of one batch body to out; returns how many, -1 if malformed. */
static int64_t filter_records(const filter *f, const uint8_t *p, const uint8_t *end,
                              buffer *out, slots *s) {
    int64_t kept = 0;
    while (p < end) {
        const uint8_t *start = p;
        int64_t length;
        if (!varint(&p, end, &length) || length <= 0 || length > end - p)
            return -1;
        const uint8_t *record_end = p + length;
        if (!record_headers(f, p, record_end, s))
            return -1;
        program pr = {f->program, f->program + f->program_size, 0};
        if (eval(&pr, s) == T && !pr.bad) {
            size_t n = (size_t)(record_end - start);
            if (!reserve(out, n))
                return -2;
            memcpy(out->data + out->size, start, n);
            out->size += n;
            kept++;
        }
        p = record_end;
    }
    return kept;
}

static int filter_batch(const filter *f, const uint8_t *batch, size_t size,
                        PyObject *decompress, buffer *out, slots *s) {
    uint16_t attributes = (uint16_t)((batch[21] << 8) | batch[22]);
    if (batch[16] != 2 || (attributes & CONTROL_FLAG)) {
        if (!reserve(out, size))
            return -1;
        memcpy(out->data + out->size, batch, size);
        out->size += size;
        return 0;
    }
    if (!reserve(out, HEADER_SIZE))
        return -1;
    size_t at = out->size;
    memcpy(out->data + at, batch, HEADER_SIZE);
    out->size += HEADER_SIZE;
    const uint8_t *body = batch + HEADER_SIZE, *end = batch + size;
    PyObject *inflated = NULL;
    int codec = attributes & COMPRESSION_MASK;
    if (codec) {
        inflated = PyObject_CallFunction(decompress, "iy#", codec, (const char *)body,
                                         (Py_ssize_t)(end - body));
        if (inflated == NULL || !PyBytes_Check(inflated)) {
            /* Undecodable: kept empty, like a malformed batch. */
            PyErr_Clear();
            Py_XDECREF(inflated);
            inflated = NULL;
            body = end;
        } else {
            body = (const uint8_t *)PyBytes_AS_STRING(inflated);
            end = body + PyBytes_GET_SIZE(inflated);
        }
    }
    int64_t kept = filter_records(f, body, end, out, s);
    Py_XDECREF(inflated);
    if (kept == -2)
        return -1;
    if (kept < 0) {                  /* malformed: nothing of it is passed on */
        out->size = at + HEADER_SIZE;
        kept = 0;
    }
    uint8_t *h = out->data + at;
    size_t length = out->size - at;
    put_u32be(h + 8, (uint32_t)(length - LOG_OVERHEAD));
    attributes &= (uint16_t)~COMPRESSION_MASK;
    h[21] = (uint8_t)(attributes >> 8);
    h[22] = (uint8_t)attributes;
    put_u32be(h + 57, (uint32_t)kept);
    put_u32be(h + 17, crc32c(h + CRC_FROM, length - CRC_FROM));
    return 0;
}

static PyObject *filter_batches(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, code;
    PyObject *headers, *decompress, *result = NULL;
    if (!PyArg_ParseTuple(args, "y*y*O!O", &data, &code, &PyTuple_Type, &headers, &decompress))
        return NULL;
    filter f;
    f.program = code.buf;
    f.program_size = code.len;
    f.nheaders = PyTuple_GET_SIZE(headers);
    buffer out = {NULL, 0, 0};
    slots *s = NULL;
    if (f.nheaders > MAX_SLOTS) {
        PyErr_SetString(PyExc_ValueError, "too many header names");
        goto done;
    }
    for (Py_ssize_t i = 0; i < f.nheaders; i++) {
        PyObject *key = PyTuple_GET_ITEM(headers, i);
        if (!PyBytes_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "header names must be bytes");
            goto done;
        }
        f.key[i] = (const uint8_t *)PyBytes_AS_STRING(key);
        f.key_length[i] = PyBytes_GET_SIZE(key);
    }
    s = calloc(1, sizeof *s);
    if (s == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const uint8_t *p = data.buf;
    size_t n = (size_t)data.len, pos = 0;
    while (pos + HEADER_SIZE <= n) {
        size_t size = (size_t)get_u32be(p + pos + 8) + LOG_OVERHEAD;
        if (size < HEADER_SIZE || size > n - pos)
            break;
        if (filter_batch(&f, p + pos, size, decompress, &out, s) < 0) {
            PyErr_NoMemory();
            goto done;
        }
        pos += size;
    }
    result = PyBytes_FromStringAndSize((const char *)out.data, (Py_ssize_t)out.size);
done:
    free(out.data);
    free(s);
    PyBuffer_Release(&data);
    PyBuffer_Release(&code);
    return result;
}

static PyMethodDef methods[] = {
    {"filter_batches", filter_batches, METH_VARARGS,
     "filter_batches(data, program, headers, decompress) -> bytes: the batches of data with "
     "only the records the program keeps (offsets unchanged)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_viewfilter", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__viewfilter(void) {
    const uint16_t probe = 1;
    if (*(const uint8_t *)&probe != 1) {
        PyErr_SetString(PyExc_ImportError, "_viewfilter needs a little-endian machine");
        return NULL;
    }
    crc_init();
#ifdef HAVE_HW_CRC
    __builtin_cpu_init();
    hw_crc = __builtin_cpu_supports("sse4.2");
#endif
    return PyModule_Create(&module);
}
