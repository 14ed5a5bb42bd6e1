/* The bytes of Kafka's record format as BMQ's C modules read and write them: big-endian
 * integers, zigzag varints, and a growable output buffer. Static inline functions, included by
 * the C modules that need them (setup.py puts bmq/protocol on their include path). */
#ifndef BMQ_KAFKA_BYTES_H
#define BMQ_KAFKA_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline uint32_t get_u32be(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline int64_t get_i64be(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline void put_u32be(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* A zigzag varint (int64) at *p, not past end; 0 if malformed. */
static inline int varint(const uint8_t **p, const uint8_t *end, int64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return 0;
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
            return 1;
        }
    }
    return 0;
}

/* An output buffer that doubles as it fills (from 64 KiB); the caller frees data. */
typedef struct {
    uint8_t *data;
    size_t size, capacity;
} buffer;

/* Room for `more` bytes past size; 0 if out of memory. */
static inline int reserve(buffer *b, size_t more) {
    if (b->size + more <= b->capacity)
        return 1;
    size_t capacity = b->capacity ? b->capacity : 1 << 16;
    while (capacity < b->size + more)
        capacity *= 2;
    uint8_t *data = realloc(b->data, capacity);
    if (data == NULL)
        return 0;
    b->data = data;
    b->capacity = capacity;
    return 1;
}

/* Append n bytes; 0 if out of memory. */
static inline int append(buffer *b, const void *src, size_t n) {
    if (!reserve(b, n))
        return 0;
    memcpy(b->data + b->size, src, n);
    b->size += n;
    return 1;
}

#endif
