/*
 * sinks._response_avro: one produce response (contract/produce_response.avsc) in Avro single object
 * encoding, in C. The reference, and the fallback where this is not built, is fastavro's
 * `schemaless_writer` behind `contract.responses.encode_response`; tests/unit/test_response_avro_native.py
 * demands identical bytes for generated and edge-case responses.
 *
 * encode(prefix, request_id, client_id, topic, partition, error_code, error_name, error_message,
 *        base_offset, log_append_time_ms, log_start_offset, record_errors, record_count,
 *        ingress_partition, ingress_offset) -> bytes
 *
 *   prefix          C3 01 + the schema's CRC-64-AVRO fingerprint (contract.responses)
 *   record_errors   a sequence of (batch_index, message | None) pairs
 *
 * Avro binary encoding (specification, "Binary Encoding"): int and long are zigzag varints; a string
 * is its UTF-8 length as a long and the bytes; a union is the branch index as a long and the value
 * (branch 0 = null, 1 = string here); an array is written as fastavro writes it: one block of
 * `count` items and the terminating 0 block (just 0 when empty).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *data;
    Py_ssize_t size;
    Py_ssize_t capacity;
    char inline_buf[512];
} Buffer;

static int
reserve(Buffer *b, Py_ssize_t more)
{
    if (b->size + more <= b->capacity)
        return 0;
    Py_ssize_t capacity = b->capacity * 2;
    while (capacity < b->size + more)
        capacity *= 2;
    char *data;
    if (b->data == b->inline_buf) {
        data = PyMem_Malloc(capacity);
        if (data != NULL)
            memcpy(data, b->inline_buf, b->size);
    } else {
        data = PyMem_Realloc(b->data, capacity);
    }
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->capacity = capacity;
    return 0;
}

static int
put_long(Buffer *b, int64_t value)
{
    if (reserve(b, 10) < 0)
        return -1;
    uint64_t z = ((uint64_t)value << 1) ^ (uint64_t)(value >> 63);
    while (z >= 0x80) {
        b->data[b->size++] = (char)((z & 0x7F) | 0x80);
        z >>= 7;
    }
    b->data[b->size++] = (char)z;
    return 0;
}

static int
put_bytes(Buffer *b, const char *bytes, Py_ssize_t n)
{
    if (reserve(b, n) < 0)
        return -1;
    memcpy(b->data + b->size, bytes, n);
    b->size += n;
    return 0;
}

static int
put_int_object(Buffer *b, PyObject *value)
{
    int64_t v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred())
        return -1;
    return put_long(b, v);
}

static int
put_string(Buffer *b, PyObject *value)
{
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(value, &n);
    if (utf8 == NULL)
        return -1;
    if (put_long(b, n) < 0)
        return -1;
    return put_bytes(b, utf8, n);
}

/* ["null", "string"] */
static int
put_optional_string(Buffer *b, PyObject *value)
{
    if (value == Py_None)
        return put_long(b, 0);
    if (put_long(b, 1) < 0)
        return -1;
    return put_string(b, value);
}

static int
put_record_errors(Buffer *b, PyObject *errors)
{
    PyObject *seq = PySequence_Fast(errors, "record_errors must be a sequence of (batch_index, message) pairs");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int rc = 0;
    if (n > 0) {
        rc = put_long(b, n);
        for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
            PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
            if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
                PyErr_SetString(PyExc_TypeError, "a record error must be a (batch_index, message) tuple");
                rc = -1;
                break;
            }
            rc = put_int_object(b, PyTuple_GET_ITEM(item, 0));
            if (rc == 0)
                rc = put_optional_string(b, PyTuple_GET_ITEM(item, 1));
        }
    }
    if (rc == 0)
        rc = put_long(b, 0);
    Py_DECREF(seq);
    return rc;
}

static PyObject *
encode(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 15) {
        PyErr_Format(PyExc_TypeError, "encode() takes 15 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "prefix must be bytes");
        return NULL;
    }
    Buffer b;
    b.data = b.inline_buf;
    b.size = 0;
    b.capacity = sizeof(b.inline_buf);
    int rc = put_bytes(&b, PyBytes_AS_STRING(args[0]), PyBytes_GET_SIZE(args[0]));
    if (rc == 0) rc = put_string(&b, args[1]);              /* request_id */
    if (rc == 0) rc = put_optional_string(&b, args[2]);     /* client_id */
    if (rc == 0) rc = put_optional_string(&b, args[3]);     /* topic */
    if (rc == 0) rc = put_int_object(&b, args[4]);          /* partition */
    if (rc == 0) rc = put_int_object(&b, args[5]);          /* error_code */
    if (rc == 0) rc = put_optional_string(&b, args[6]);     /* error_name */
    if (rc == 0) rc = put_optional_string(&b, args[7]);     /* error_message */
    if (rc == 0) rc = put_int_object(&b, args[8]);          /* base_offset */
    if (rc == 0) rc = put_int_object(&b, args[9]);          /* log_append_time_ms */
    if (rc == 0) rc = put_int_object(&b, args[10]);         /* log_start_offset */
    if (rc == 0) rc = put_record_errors(&b, args[11]);      /* record_errors */
    if (rc == 0) rc = put_int_object(&b, args[12]);         /* record_count */
    if (rc == 0) rc = put_int_object(&b, args[13]);         /* ingress_partition */
    if (rc == 0) rc = put_int_object(&b, args[14]);         /* ingress_offset */
    PyObject *result = rc == 0 ? PyBytes_FromStringAndSize(b.data, b.size) : NULL;
    if (b.data != b.inline_buf)
        PyMem_Free(b.data);
    return result;
}

static PyMethodDef methods[] = {
    {"encode", (PyCFunction)(void (*)(void))encode, METH_FASTCALL,
     "encode(prefix, request_id, client_id, topic, partition, error_code, error_name, error_message, base_offset, "
     "log_append_time_ms, log_start_offset, record_errors, record_count, ingress_partition, ingress_offset) -> bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_response_avro", "A produce response in Avro single object encoding.", -1, methods,
};

PyMODINIT_FUNC
PyInit__response_avro(void)
{
    return PyModule_Create(&module_def);
}
