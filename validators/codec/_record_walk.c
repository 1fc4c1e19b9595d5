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

    /* positions are relative to `start`: the records area is buffer[start:end] */
    const uint8_t *buf = (const uint8_t *)view.buf + start;
    end -= start;
    Py_ssize_t pos = 0;
    uint32_t raw = 0;
    PyObject *error = NULL;
    PyObject *errors = PyList_New(0);
    int64_t max_ts = NO_TIMESTAMP;
    Py_ssize_t future = 0;
    int contiguous = 1;
    const uint64_t now = (uint64_t)now_ms;
    const uint64_t base = (uint64_t)base_timestamp;

    if (errors == NULL)
        goto fail;
    if (count < 0) { /* DefaultRecordBatch.iterator: "Found invalid record count" */
        error = text("Found invalid record count %zd in magic v2 batch", count);
        goto done;
    }

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
            if (r == VAR_EOF) {
                error = PyUnicode_FromString(PREMATURE_EOF);
                goto done;
            }
            if (r == VAR_TOO_LONG) {
                error = text("Varint is too long, the most significant bit in the 5th byte is set, "
                             "converted value: %x", (unsigned int)raw);
                goto done;
            }
        }
        /* DefaultRecord.readFrom: buffer.remaining() < sizeOfBodyInBytes */
        if (end - pos < (Py_ssize_t)size) {
            error = text("Invalid record size: expected %d bytes in record payload, but instead the buffer "
                         "has only %zd remaining bytes.", (int)size, end - pos);
            goto done;
        }
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
            if (header_count < 0) {
                error = text("Found invalid number of record headers %d", (int)header_count);
                goto done;
            }
            if ((Py_ssize_t)header_count > end - pos) {
                error = text("Found invalid number of record headers. %d is larger than the remaining size "
                             "of the buffer", (int)header_count);
                goto done;
            }
            for (int32_t h = 0; h < header_count; h++) { /* DefaultRecord.readHeaders */
                int32_t header_key_size, header_value_size;
                BODY_VARINT(header_key_size);
                if (header_key_size < 0) {
                    error = text("Invalid negative header key size %d", (int)header_key_size);
                    goto done;
                }
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
            error = text("Invalid record size: expected to read %d bytes in record payload, but instead "
                         "read %zd", (int)size, pos - record_start);
            goto done;
        }

        /* LogValidator.validateRecord (reference section 1.2) */
        if (offset_delta != index)
            contiguous = 0;
        int64_t ts = batch_lat ? (int64_t)lat_timestamp : (int64_t)(base + (uint64_t)timestamp_delta);
        int kind = 0;
        if (compacted && key_size < 0) {
            kind = KIND_NULL_KEY; /* validateKey; a key error suppresses the timestamp check */
        } else if (check_timestamps && ts != NO_TIMESTAMP) {
            /* recordHasInvalidTimestamp: diff = now - ts; diff > before || -diff > after (Java long) */
            int64_t diff = (int64_t)(now - (uint64_t)ts);
            int64_t negated = (int64_t)(0ull - (uint64_t)diff);
            if (diff > before_max_ms || negated > after_max_ms)
                kind = KIND_TIMESTAMP;
        } else if (batch_lat) {
            kind = KIND_LOG_APPEND_TIME; /* "Producer should not set timestamp type to LogAppendTime" */
        }
        if (kind) {
            PyObject *item = Py_BuildValue("(niiLii)", index, kind, (int)offset_delta, (long long)ts,
                                           (int)key_size, (int)value_size);
            if (item == NULL || PyList_Append(errors, item) < 0) {
                Py_XDECREF(item);
                goto fail;
            }
            Py_DECREF(item);
            continue;
        }
        if (ts > max_ts)
            max_ts = ts;
        /* KIP-937: ts - now > one hour, in exact (unbounded) arithmetic */
        if (check_timestamps && ts > now_ms && (uint64_t)ts - now > FUTURE_TIMESTAMP_WARN_MS)
            future++;
    }
    if (count > 0 && pos != end) /* RecordIterator: bytes left after the declared count */
        error = PyUnicode_FromString(RECORDS_REMAINING);
    goto done;

structure: /* DefaultRecord.readFrom: BufferUnderflowException | IllegalArgumentException */
    error = PyUnicode_FromString(STRUCTURE);

done:
    PyBuffer_Release(&view);
    if (error != NULL) {
        Py_DECREF(errors);
        return Py_BuildValue("(NLnON)", error, (long long)NO_TIMESTAMP, (Py_ssize_t)0, Py_False, PyList_New(0));
    }
    if (PyErr_Occurred()) {
        Py_DECREF(errors);
        return NULL;
    }
    return Py_BuildValue("(OLnON)", Py_None, (long long)max_ts, future, contiguous ? Py_True : Py_False, errors);

fail:
    PyBuffer_Release(&view);
    Py_XDECREF(errors);
    return NULL;
}

static PyMethodDef methods[] = {
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
    return PyModule_Create(&module_def);
}
