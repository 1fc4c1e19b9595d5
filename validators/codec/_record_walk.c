/*
 * validators.codec._record_walk: the `full` record walk of an uncompressed v2 records area, in C.
 *
 * One pass does what `records.scan_records` + the per-record loop of `log_validator._full_walk`
 * (the pure-Python reference, `log_validator._walk_py`) do:
 *
 *   1. Kafka's `DefaultRecordBatch.RecordIterator` over a ByteBuffer, reading every record as
 *      `DefaultRecord.readFrom(ByteBuffer)` does (reference section 4.3): length varint (outside
 *      readFrom's try block), attributes, timestampDelta varlong, offsetDelta varint, key length
 *      + key, value length + value, header count, every header key length + key and value
 *      length + value; fields are read against the end of the whole area, the bytes consumed
 *      must equal the declared length, and after `count` records the area must end.
 *      A structural error ends the walk with Kafka's `InvalidRecordException` text.
 *   2. `LogValidator.validateRecord` per record (reference section 1.2): validateKey (compacted
 *      topic, null key), then validateTimestamp with Java long arithmetic (section 2.2), or the
 *      LogAppendTime-flag error; accepted records raise maxTimestamp (from -1) and count towards
 *      KIP-937's one-hour future warning.
 *
 * walk(buffer, start, end, count, base_timestamp, batch_lat, lat_timestamp, check_timestamps,
 *      now_ms, before_max_ms, after_max_ms, compacted)
 *   -> (error, max_timestamp, future_count, contiguous, record_errors)
 *
 *   error          None, or the InvalidRecordException text of the first structural error
 *                  (the other fields are then meaningless: 0 / [])
 *   contiguous     offsetDeltas are 0, 1, 2, ... (LogValidator's in-place condition, path B)
 *   record_errors  [(batch_index, kind, offset, timestamp, key_size, value_size)] in record
 *                  order; kind 1 = null key on a compacted topic, 2 = timestamp out of range,
 *                  3 = LogAppendTime flag set by the producer; sizes are raw (-1 = null)
 *
 * The Python reference must give identical results (tests/unit/test_record_walk_native.py).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>

#define KIND_NULL_KEY 1
#define KIND_TIMESTAMP 2
#define KIND_LOG_APPEND_TIME 3

#define NO_TIMESTAMP (-1LL)                   /* RecordBatch.NO_TIMESTAMP */
#define FUTURE_TIMESTAMP_WARN_MS 3600000ULL   /* KIP-937's one-hour WARN threshold */

enum { VAR_OK = 0, VAR_EOF = 1, VAR_TOO_LONG = 2 };

static const char PREMATURE_EOF[] = "Incorrect declared batch size, premature EOF reached";
static const char RECORDS_REMAINING[] = "Incorrect declared batch size, records still remaining in file";
static const char STRUCTURE[] = "Found invalid record structure";

/* ByteUtils.readVarint(ByteBuffer): zigzag LEB128, at most 5 bytes (the MSB of the 5th set is an
 * IllegalArgumentException), bits above 32 dropped as Java's int arithmetic drops them. Running
 * past `end` is a BufferUnderflowException. `raw` gets the value read so far for the error text. */
static inline int
read_varint(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos, int32_t *out, uint32_t *raw)
{
    Py_ssize_t p = *pos;
    uint32_t value = 0;
    int shift = 0;
    for (;;) {
        if (p >= end)
            return VAR_EOF;
        uint8_t b = buf[p++];
        value |= (uint32_t)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
        shift += 7;
        if (shift > 28) {
            *raw = value;
            return VAR_TOO_LONG;
        }
    }
    *out = (int32_t)((value >> 1) ^ (0u - (value & 1u)));
    *pos = p;
    return VAR_OK;
}

/* ByteUtils.readVarlong(ByteBuffer): at most 10 bytes, bits above 64 dropped. */
static inline int
read_varlong(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos, int64_t *out)
{
    Py_ssize_t p = *pos;
    uint64_t value = 0;
    int shift = 0;
    for (;;) {
        if (p >= end)
            return VAR_EOF;
        uint8_t b = buf[p++];
        value |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
        shift += 7;
        if (shift > 63)
            return VAR_TOO_LONG;
    }
    *out = (int64_t)((value >> 1) ^ (0ull - (value & 1ull)));
    *pos = p;
    return VAR_OK;
}

/* One-byte varints (the common case) inline; anything longer through read_varint. Inside
 * DefaultRecord.readFrom's try block every underflow / too-long varint is
 * "Found invalid record structure", so the body reads only need a yes/no. */
#define BODY_VARINT(dst)                                                        \
    do {                                                                        \
        if (pos < end && buf[pos] < 0x80) {                                     \
            uint32_t u_ = buf[pos++];                                           \
            (dst) = (int32_t)((u_ >> 1) ^ (0u - (u_ & 1u)));                    \
        } else if (read_varint(buf, end, &pos, &(dst), &raw) != VAR_OK) {       \
            goto structure;                                                     \
        }                                                                       \
    } while (0)

static PyObject *
text(const char *fmt, ...)
{
    char message[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return PyUnicode_FromString(message);
}

/* What one walk needs besides the bytes (the parameters of `walk` below). */
typedef struct {
    int64_t base_timestamp, lat_timestamp, now_ms, before_max_ms, after_max_ms;
    int batch_lat, check_timestamps, compacted;
} WalkParams;

typedef struct {
    int64_t max_ts;
    Py_ssize_t future;
    int contiguous;
    PyObject *error;  /* the structural error's text (collecting walks only) */
    PyObject *errors; /* the record errors list; NULL: a clean-or-bail walk */
} WalkOut;

enum { WALK_DONE = 0, WALK_BAIL = 1, WALK_FAIL = -1 };

/* The walk over buf[0:end]. Collecting (out->errors a list): WALK_DONE with out->error set on a
 * structural error, record errors appended to out->errors. Clean-or-bail (out->errors NULL): WALK_BAIL
 * at the first structural or record error, before any text is made. WALK_FAIL: a Python exception. */
#define FAIL_WITH(make)                                                         \
    do {                                                                        \
        if (out->errors == NULL)                                                \
            return WALK_BAIL;                                                   \
        out->error = (make);                                                    \
        return out->error == NULL ? WALK_FAIL : WALK_DONE;                      \
    } while (0)

static int
walk_area(const uint8_t *buf, Py_ssize_t end, Py_ssize_t count, const WalkParams *p, WalkOut *out)
{
    Py_ssize_t pos = 0;
    uint32_t raw = 0;
    const uint64_t now = (uint64_t)p->now_ms;
    const uint64_t base = (uint64_t)p->base_timestamp;

    out->max_ts = NO_TIMESTAMP;
    out->future = 0;
    out->contiguous = 1;
    out->error = NULL;
    if (count < 0) /* DefaultRecordBatch.iterator: "Found invalid record count" */
        FAIL_WITH(text("Found invalid record count %zd in magic v2 batch", count));

    for (Py_ssize_t index = 0; index < count; index++) {
        int32_t size, offset_delta, key_size, value_size, header_count;
        int64_t timestamp_delta;

        /* length prefix, read outside DefaultRecord.readFrom's try block: an underflow is the
         * iterator's premature EOF, a too-long varint escapes as the IllegalArgumentException text */
        if (pos < end && buf[pos] < 0x80) {
            uint32_t u = buf[pos++];
            size = (int32_t)((u >> 1) ^ (0u - (u & 1u)));
        } else {
            int r = read_varint(buf, end, &pos, &size, &raw);
            if (r == VAR_EOF)
                FAIL_WITH(PyUnicode_FromString(PREMATURE_EOF));
            if (r == VAR_TOO_LONG)
                FAIL_WITH(text("Varint is too long, the most significant bit in the 5th byte is set, "
                               "converted value: %x", (unsigned int)raw));
        }
        /* DefaultRecord.readFrom: buffer.remaining() < sizeOfBodyInBytes */
        if (end - pos < (Py_ssize_t)size)
            FAIL_WITH(text("Invalid record size: expected %d bytes in record payload, but instead the buffer "
                           "has only %zd remaining bytes.", (int)size, end - pos));
        const Py_ssize_t record_start = pos;

        pos += 1; /* attributes (unused in v2); its absence is caught by the next read */
        if (pos < end && buf[pos] < 0x80) {
            uint64_t u = buf[pos++];
            timestamp_delta = (int64_t)((u >> 1) ^ (0ull - (u & 1ull)));
        } else if (read_varlong(buf, end, &pos, &timestamp_delta) != VAR_OK) {
            goto structure;
        }
        BODY_VARINT(offset_delta);
        BODY_VARINT(key_size); /* < 0: null key */
        if (key_size > 0)
            pos += key_size; /* a key running past the end fails the next read */
        BODY_VARINT(value_size);
        if (value_size > 0)
            pos += value_size;
        BODY_VARINT(header_count);
        if (header_count != 0) {
            if (header_count < 0)
                FAIL_WITH(text("Found invalid number of record headers %d", (int)header_count));
            if ((Py_ssize_t)header_count > end - pos)
                FAIL_WITH(text("Found invalid number of record headers. %d is larger than the remaining size "
                               "of the buffer", (int)header_count));
            for (int32_t h = 0; h < header_count; h++) { /* DefaultRecord.readHeaders */
                int32_t header_key_size, header_value_size;
                BODY_VARINT(header_key_size);
                if (header_key_size < 0)
                    FAIL_WITH(text("Invalid negative header key size %d", (int)header_key_size));
                pos += header_key_size;
                BODY_VARINT(header_value_size); /* < 0: null value */
                if (header_value_size > 0)
                    pos += header_value_size;
            }
        }
        if (pos - record_start != (Py_ssize_t)size || pos > end) {
            if (pos > end) /* the last slice ran past the buffer (BufferUnderflowException) */
                goto structure;
            /* "validate whether we have read all header bytes in the current record" */
            FAIL_WITH(text("Invalid record size: expected to read %d bytes in record payload, but instead "
                           "read %zd", (int)size, pos - record_start));
        }

        /* LogValidator.validateRecord (reference section 1.2) */
        if (offset_delta != index)
            out->contiguous = 0;
        int64_t ts = p->batch_lat ? p->lat_timestamp : (int64_t)(base + (uint64_t)timestamp_delta);
        int kind = 0;
        if (p->compacted && key_size < 0) {
            kind = KIND_NULL_KEY; /* validateKey; a key error suppresses the timestamp check */
        } else if (p->check_timestamps && ts != NO_TIMESTAMP) {
            /* recordHasInvalidTimestamp: diff = now - ts; diff > before || -diff > after (Java long) */
            int64_t diff = (int64_t)(now - (uint64_t)ts);
            int64_t negated = (int64_t)(0ull - (uint64_t)diff);
            if (diff > p->before_max_ms || negated > p->after_max_ms)
                kind = KIND_TIMESTAMP;
        } else if (p->batch_lat) {
            kind = KIND_LOG_APPEND_TIME; /* "Producer should not set timestamp type to LogAppendTime" */
        }
        if (kind) {
            if (out->errors == NULL)
                return WALK_BAIL;
            PyObject *item = Py_BuildValue("(niiLii)", index, kind, (int)offset_delta, (long long)ts,
                                           (int)key_size, (int)value_size);
            if (item == NULL || PyList_Append(out->errors, item) < 0) {
                Py_XDECREF(item);
                return WALK_FAIL;
            }
            Py_DECREF(item);
            continue;
        }
        if (ts > out->max_ts)
            out->max_ts = ts;
        /* KIP-937: ts - now > one hour, in exact (unbounded) arithmetic */
        if (p->check_timestamps && ts > p->now_ms && (uint64_t)ts - now > FUTURE_TIMESTAMP_WARN_MS)
            out->future++;
    }
    if (count > 0 && pos != end) /* RecordIterator: bytes left after the declared count */
        FAIL_WITH(PyUnicode_FromString(RECORDS_REMAINING));
    return WALK_DONE;

structure: /* DefaultRecord.readFrom: BufferUnderflowException | IllegalArgumentException */
    FAIL_WITH(PyUnicode_FromString(STRUCTURE));
}

static PyObject *
walk(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, end, count;
    long long base_timestamp, lat_timestamp, now_ms, before_max_ms, after_max_ms;
    int batch_lat, check_timestamps, compacted;

    if (!PyArg_ParseTuple(args, "y*nnnLpLpLLLp:walk", &view, &start, &end, &count, &base_timestamp,
                          &batch_lat, &lat_timestamp, &check_timestamps, &now_ms, &before_max_ms,
                          &after_max_ms, &compacted))
        return NULL;
    if (start < 0 || end < start || end > view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "walk: need 0 <= start <= end <= len(buffer)");
        return NULL;
    }
    WalkParams params = {base_timestamp, lat_timestamp, now_ms, before_max_ms, after_max_ms,
                         batch_lat, check_timestamps, compacted};
    WalkOut out;
    out.errors = PyList_New(0);
    if (out.errors == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    /* positions are relative to `start`: the records area is buffer[start:end] */
    int rc = walk_area((const uint8_t *)view.buf + start, end - start, count, &params, &out);
    PyBuffer_Release(&view);
    if (rc == WALK_FAIL) {
        Py_DECREF(out.errors);
        return NULL;
    }
    if (out.error != NULL) {
        Py_DECREF(out.errors);
        return Py_BuildValue("(NLnON)", out.error, (long long)NO_TIMESTAMP, (Py_ssize_t)0, Py_False, PyList_New(0));
    }
    return Py_BuildValue("(OLnON)", Py_None, (long long)out.max_ts, out.future, out.contiguous ? Py_True : Py_False,
                         out.errors);
}

/* Big-endian reads and writes of the v2 batch header (reference section 4.1). */
static inline int64_t
get_i64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | b[i];
    return (int64_t)v;
}

static inline int32_t
get_i32(const uint8_t *b)
{
    return (int32_t)(((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3]);
}

static inline void
put_u64(uint8_t *b, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        b[i] = (uint8_t)v;
}

static inline void
put_u32(uint8_t *b, uint32_t v)
{
    for (int i = 3; i >= 0; i--, v >>= 8)
        b[i] = (uint8_t)v;
}

#define V2_OVERHEAD 61
#define ATTR_CODEC 0x07
#define ATTR_TIMESTAMP_TYPE 0x08
#define ATTR_TRANSACTIONAL 0x10
#define ATTR_CONTROL 0x20
#define ATTR_DELETE_HORIZON 0x40

/* The CRC of a v2 batch covers data[21:]; of that only attributes (21-22) and maxTimestamp (35-42) are
 * ever rewritten, so the part from producerId (43) on is summed once and combined with each header. */
#define CRC_START 21
#define CRC_UNCHANGED 43
/* Below this many bytes a second pass costs less than the split's extra calls (make bench's core table). */
#define CRC_SPLIT_MIN 65536

/* crc32c(data[start:end]) through the given callable (the `crc32c` package: CRC-32C stays its job). */
static int
crc_of(PyObject *crc32c, PyObject *bytes, Py_ssize_t start, Py_ssize_t end, uint32_t *crc)
{
    PyObject *view = PyMemoryView_FromObject(bytes);
    if (view == NULL)
        return -1;
    PyObject *part = PySequence_GetSlice(view, start, end);
    Py_DECREF(view);
    if (part == NULL)
        return -1;
    PyObject *value = PyObject_CallOneArg(crc32c, part);
    Py_DECREF(part);
    if (value == NULL)
        return -1;
    unsigned long v = PyLong_AsUnsignedLong(value);
    Py_DECREF(value);
    if (v == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    *crc = (uint32_t)v;
    return 0;
}

/* crc32c(A + B) from crc32c(A), crc32c(B) and len(B): zlib's crc32_combine (multiplication modulo the
 * polynomial by x^(8 len(B))) with CRC-32C's reflected polynomial; the `crc32c` package has no combine.
 * tests/unit/test_decide_in_place_native.py checks it against the package on every split. */
#define CRC32C_POLY 0x82f63b78u
static uint32_t x2n_table[32]; /* x^(2^n) mod p, filled by PyInit */

static uint32_t
multmodp(uint32_t a, uint32_t b)
{
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = (b & 1) ? (b >> 1) ^ CRC32C_POLY : b >> 1;
    }
    return p;
}

static uint32_t
x2nmodp(uint64_t n, unsigned k)
{
    uint32_t p = 1u << 31; /* x^0 */
    while (n) {
        if (n & 1)
            p = multmodp(x2n_table[k & 31], p);
        n >>= 1;
        k++;
    }
    return p;
}

static uint32_t
crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
    return multmodp(x2nmodp(len_b, 3), crc_a) ^ crc_b;
}

static void
init_x2n_table(void)
{
    uint32_t p = 1u << 30; /* x^1 */
    x2n_table[0] = p;
    for (int n = 1; n < 32; n++)
        x2n_table[n] = p = multmodp(p, p);
}

/* crc32c_combine(crc_a, crc_b, len_b) for the tests: the combine above, exposed. */
static PyObject *
combine(PyObject *Py_UNUSED(module), PyObject *args)
{
    unsigned int crc_a, crc_b;
    unsigned long long len_b;
    if (!PyArg_ParseTuple(args, "IIK:crc32c_combine", &crc_a, &crc_b, &len_b))
        return NULL;
    return PyLong_FromUnsignedLong(crc32c_combine(crc_a, crc_b, len_b));
}

/*
 * decide_in_place(batch, log_end_offset, leader_epoch, max_message_bytes, segment_bytes, lat_topic,
 *                 append_time, now_ms, before_max_ms, after_max_ms, compacted, crc32c)
 *   -> (stored, max_timestamp, future_count, producer_id, producer_epoch, base_sequence,
 *       last_offset_delta, count, producer_max_timestamp) | None
 *
 * LogValidator's path A for the batch that needs no judgement: one complete uncompressed v2 batch,
 * baseOffset 0, within max.message.bytes, valid CRC, neither transactional nor control nor flagged
 * LogAppendTime, offsets consistent with the count, a sequence when it has a producer id, every
 * record clean under the `full` walk, and stored within segment.bytes (reference section 1.1 steps
 * 11-15, 1.2, 1.2.1). It returns the stored bytes — baseOffset, partitionLeaderEpoch and, when they
 * change, the timestamp type and maxTimestamp rewritten with the CRC recomputed, as
 * `record_batch.assign_offsets_and_timestamp` does — and what the producer-state step needs. Anything
 * else is None: the Python reference (log_validator._decide_v2) decides it, with Kafka's texts.
 * tests/unit/test_decide_in_place_native.py holds the two to identical results.
 */
static PyObject *
decide_in_place(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *batch, *crc32c;
    long long log_end_offset, max_message_bytes, segment_bytes, append_time, now_ms, before_max_ms, after_max_ms;
    int leader_epoch, lat_topic, compacted;

    if (!PyArg_ParseTuple(args, "SLiLLpLLLLpO:decide_in_place", &batch, &log_end_offset, &leader_epoch,
                          &max_message_bytes, &segment_bytes, &lat_topic, &append_time, &now_ms, &before_max_ms,
                          &after_max_ms, &compacted, &crc32c))
        return NULL;
    const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(batch);
    const Py_ssize_t n = PyBytes_GET_SIZE(batch);
    if (n < V2_OVERHEAD || b[16] != 2 || (int64_t)get_i32(b + 8) + 12 != n || get_i64(b) != 0
        || n > max_message_bytes || n > segment_bytes)
        Py_RETURN_NONE;
    const int attributes = b[22]; /* the low byte: every flag read here */
    const int32_t last_offset_delta = get_i32(b + 23);
    const int64_t base_timestamp = get_i64(b + 27);
    const int64_t max_timestamp = get_i64(b + 35);
    const int64_t producer_id = get_i64(b + 43);
    const int producer_epoch = (int16_t)(((unsigned)b[51] << 8) | b[52]);
    const int32_t base_sequence = get_i32(b + 53);
    const int32_t count = get_i32(b + 57);
    if ((attributes & (ATTR_CODEC | ATTR_TIMESTAMP_TYPE | ATTR_TRANSACTIONAL | ATTR_CONTROL)) != 0
        || count <= 0 || (int64_t)last_offset_delta + 1 != count || (producer_id >= 0 && base_sequence < 0))
        Py_RETURN_NONE;
    const int split = n - CRC_UNCHANGED >= CRC_SPLIT_MIN;
    uint32_t crc, head_crc, tail_crc = 0;
    if (split) {
        if (crc_of(crc32c, batch, CRC_UNCHANGED, n, &tail_crc) < 0
            || crc_of(crc32c, batch, CRC_START, CRC_UNCHANGED, &head_crc) < 0)
            return NULL;
        crc = crc32c_combine(head_crc, tail_crc, (uint64_t)(n - CRC_UNCHANGED));
    } else if (crc_of(crc32c, batch, CRC_START, n, &crc) < 0) {
        return NULL;
    }
    if (crc != (uint32_t)get_i32(b + 17))
        Py_RETURN_NONE;

    WalkParams params = {base_timestamp, max_timestamp, now_ms, before_max_ms, after_max_ms, 0, !lat_topic, compacted};
    WalkOut out;
    out.errors = NULL; /* clean or bail */
    int rc = walk_area(b + V2_OVERHEAD, n - V2_OVERHEAD, count, &params, &out);
    if (rc == WALK_FAIL)
        return NULL;
    if (rc == WALK_BAIL)
        Py_RETURN_NONE;

    const int64_t stored_max = lat_topic ? append_time : out.max_ts;
    PyObject *stored = PyBytes_FromStringAndSize((const char *)b, n);
    if (stored == NULL)
        return NULL;
    uint8_t *w = (uint8_t *)PyBytes_AS_STRING(stored);
    put_u64(w, (uint64_t)log_end_offset);
    put_u32(w + 12, (uint32_t)leader_epoch);
    /* setMaxTimestamp: a no-op unless the type or the value changes; then computeAttributes keeps the
     * codec, transactional, control and delete-horizon bits and clears bits 7-15 */
    if (lat_topic || stored_max != max_timestamp) {
        int kept = attributes & (ATTR_CODEC | ATTR_TRANSACTIONAL | ATTR_CONTROL | ATTR_DELETE_HORIZON);
        w[21] = 0;
        w[22] = (uint8_t)(kept | (lat_topic ? ATTR_TIMESTAMP_TYPE : 0));
        put_u64(w + 35, (uint64_t)stored_max);
        if (crc_of(crc32c, stored, CRC_START, split ? CRC_UNCHANGED : n, &crc) < 0) {
            Py_DECREF(stored);
            return NULL;
        }
        put_u32(w + 17, split ? crc32c_combine(crc, tail_crc, (uint64_t)(n - CRC_UNCHANGED)) : crc);
    }
    return Py_BuildValue("(NLnLiiiiL)", stored, (long long)stored_max, out.future, (long long)producer_id,
                         producer_epoch, (int)base_sequence, (int)last_offset_delta, (int)count,
                         (long long)max_timestamp);
}

static PyMethodDef methods[] = {
    {"decide_in_place", decide_in_place, METH_VARARGS,
     "decide_in_place(batch, log_end_offset, leader_epoch, max_message_bytes, segment_bytes, lat_topic, append_time, "
     "now_ms, before_max_ms, after_max_ms, compacted, crc32c) -> (stored, max_timestamp, future_count, producer_id, "
     "producer_epoch, base_sequence, last_offset_delta, count, producer_max_timestamp) | None\n\n"
     "LogValidator path A for a clean uncompressed v2 batch; None: the Python reference decides."},
    {"crc32c_combine", combine, METH_VARARGS,
     "crc32c_combine(crc_a, crc_b, len_b) -> crc32c(a + b) from crc32c(a), crc32c(b) and len(b)"},
    {"walk", walk, METH_VARARGS,
     "walk(buffer, start, end, count, base_timestamp, batch_lat, lat_timestamp, check_timestamps, now_ms, "
     "before_max_ms, after_max_ms, compacted) -> (error, max_timestamp, future_count, contiguous, "
     "record_errors)\n\nKafka's DefaultRecord walk + LogValidator.validateRecord over buffer[start:end]."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "validators.codec._record_walk",
    .m_doc = "Kafka's v2 record walk (DefaultRecord.readFrom + LogValidator.validateRecord) in C.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__record_walk(void)
{
    init_x2n_table();
    return PyModule_Create(&module_def);
}
