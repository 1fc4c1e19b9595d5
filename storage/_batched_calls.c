/*
 * storage._batched_calls: the sink's system calls for many partitions made in one call each, in C, with the
 * interpreter's lock released once for all of them: a group commit's (storage/group_commit.py) and the
 * taking up of kept logs (storage/open_logs.py). The reference, and the fallback where this is
 * not built, is storage/batched_calls.py; tests/unit/test_batched_calls.py demands the same files and errors of both.
 *
 * write_all(writes, records) -> None
 *   writes   a sequence of (fd, buffers, position): the buffers (bytes-like) written back to back at
 *            `position` of `fd` with pwritev(2), a write cut short continued where it stopped;
 *   records  a sequence of (path, data): each commit record's tmp file opened (made when missing, 0644),
 *            `data` written at 0, padded with spaces to the file's length when shorter (JSON allows them).
 *   Every write first, then every record, in order; the first failure raises OSError (the records' with
 *   their path) and nothing after it is done.
 *
 * exchange_all(pairs) -> None
 *   pairs    a sequence of (tmp, record) paths: each swapped atomically (renameat2 RENAME_EXCHANGE); where
 *            the filesystem cannot, or the record is missing, the tmp file renamed over the record.
 *
 * resume_all(probes) -> list of (lock_fd, error, record, marked, log_size)
 *   probes   a sequence of (lock, record, marker, log_fd): a kept log's lock file, commit record, recovery
 *            marker and its active segment's `.log` descriptor (-1: none);
 *   each     the lock file opened (made when missing, 0644) and locked exclusively, waiting (an open file
 *            description's lock, F_OFD_SETLKW; flock where there is none): its descriptor, or -1; then the
 *            record's bytes (None when missing; read with O_NOATIME where the file is ours, as a record
 *            rewritten every commit would otherwise have its inode dirtied by each read), whether the
 *            marker exists, and the `.log`'s length (-1 without one). `error`: the errno of the first step
 *            that failed (0: none), the steps after it not made; a lock taken before it stays held, for the
 *            caller to release.
 */

#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef O_NOATIME /* Linux's: elsewhere a read leaves the access time as the mount says */
#define O_NOATIME 0
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#define MAX_IOV 1024 /* IOV_MAX on Linux */

typedef struct {
    int fd;
    off_t position;
    Py_ssize_t first; /* its buffers: views[first .. first + count) */
    Py_ssize_t count;
} Write;

typedef struct {
    Write *writes;
    Py_ssize_t n_writes;
    Py_buffer *views;
    Py_ssize_t n_views;
    PyObject **paths; /* the records' paths (bytes, new references) */
    Py_buffer *data;  /* the records' data */
    Py_ssize_t n_records;
    /* the failure: its errno, and which write or record */
    int error;
    Py_ssize_t failed_write;
    Py_ssize_t failed_record;
} Plan;

static void
plan_free(Plan *p)
{
    for (Py_ssize_t i = 0; i < p->n_views; i++)
        PyBuffer_Release(&p->views[i]);
    for (Py_ssize_t i = 0; i < p->n_records; i++) {
        Py_XDECREF(p->paths[i]);
        if (p->data[i].obj != NULL)
            PyBuffer_Release(&p->data[i]);
    }
    PyMem_Free(p->writes);
    PyMem_Free(p->views);
    PyMem_Free(p->paths);
    PyMem_Free(p->data);
}

/* One write's buffers from `at` on, at most MAX_IOV of them, cut short by `skip` bytes of the first. */
static int
write_one(const Write *w, const Py_buffer *views)
{
    struct iovec iov[MAX_IOV];
    Py_ssize_t at = 0, skip = 0;
    off_t position = w->position;
    while (at < w->count) {
        int n = 0;
        size_t total = 0;
        for (Py_ssize_t i = at; i < w->count && n < MAX_IOV; i++, n++) {
            const Py_buffer *v = &views[w->first + i];
            Py_ssize_t from = i == at ? skip : 0;
            iov[n].iov_base = (char *)v->buf + from;
            iov[n].iov_len = (size_t)(v->len - from);
            total += iov[n].iov_len;
        }
        ssize_t written = pwritev(w->fd, iov, n, position);
        if (written < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (written == 0 && total > 0)
            return EIO; /* a regular file takes at least a byte; never loop on nothing */
        position += written;
        /* past the buffers written whole; the rest of one cut short comes first in the next call */
        while (at < w->count) {
            Py_ssize_t left = views[w->first + at].len - skip;
            if (written < left) {
                skip += written;
                break;
            }
            written -= left;
            skip = 0;
            at++;
        }
    }
    return 0;
}

static int
write_record(const char *path, const Py_buffer *data)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return e;
    }
    Py_ssize_t size = data->len < st.st_size ? (Py_ssize_t)st.st_size : data->len;
    char *out = (char *)data->buf;
    char *padded = NULL;
    if (size > data->len) {
        padded = malloc((size_t)size);
        if (padded == NULL) {
            close(fd);
            return ENOMEM;
        }
        memcpy(padded, data->buf, (size_t)data->len);
        memset(padded + data->len, ' ', (size_t)(size - data->len));
        out = padded;
    }
    Py_ssize_t done = 0;
    int e = 0;
    while (done < size) {
        ssize_t n = pwrite(fd, out + done, (size_t)(size - done), done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            e = errno;
            break;
        }
        done += n;
    }
    free(padded);
    if (close(fd) != 0 && e == 0)
        e = errno;
    return e;
}

/* `item`, a tuple of `arity` items whose first `count` are paths: each converted to bytes into `out` (new
 * references). -1 with an exception, nothing left in `out`. */
static int
tuple_paths(PyObject *item, Py_ssize_t arity, int count, PyObject **out, const char *shape)
{
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != arity) {
        PyErr_Format(PyExc_TypeError, "expected %s", shape);
        return -1;
    }
    for (int k = 0; k < count; k++) {
        if (!PyUnicode_FSConverter(PyTuple_GET_ITEM(item, k), &out[k])) {
            while (k-- > 0)
                Py_CLEAR(out[k]);
            return -1;
        }
    }
    return 0;
}

static void
free_paths(PyObject **names, Py_ssize_t total)
{
    if (names == NULL)
        return;
    for (Py_ssize_t i = 0; i < total; i++)
        Py_XDECREF(names[i]);
    PyMem_Free(names);
}

/* Every item of `seq` a tuple as `tuple_paths` takes: its paths, `count` an item, in one array (free_paths). NULL
 * with an exception. */
static PyObject **
sequence_paths(PyObject *seq, Py_ssize_t arity, int count, const char *shape)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **names = PyMem_Calloc((size_t)(count * (n ? n : 1)), sizeof(PyObject *));
    if (names == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (tuple_paths(PySequence_Fast_GET_ITEM(seq, i), arity, count, &names[i * count], shape) < 0) {
            free_paths(names, i * count);
            return NULL;
        }
    }
    return names;
}

static int
plan_writes(Plan *p, PyObject *writes)
{
    PyObject *seq = PySequence_Fast(writes, "writes must be a sequence");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Py_ssize_t views = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
            PyErr_SetString(PyExc_TypeError, "a write is (fd, buffers, position)");
            goto fail;
        }
        Py_ssize_t count = PyObject_Length(PyTuple_GET_ITEM(item, 1));
        if (count < 0)
            goto fail;
        views += count;
    }
    p->writes = PyMem_Calloc(n ? n : 1, sizeof(Write));
    p->views = PyMem_Calloc(views ? views : 1, sizeof(Py_buffer));
    if (p->writes == NULL || p->views == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        Write *w = &p->writes[i];
        w->fd = PyLong_AsLong(PyTuple_GET_ITEM(item, 0));
        w->position = (off_t)PyLong_AsLongLong(PyTuple_GET_ITEM(item, 2));
        if (PyErr_Occurred())
            goto fail;
        PyObject *buffers = PySequence_Fast(PyTuple_GET_ITEM(item, 1), "a write's buffers must be a sequence");
        if (buffers == NULL)
            goto fail;
        w->first = p->n_views;
        for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(buffers); j++) {
            if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(buffers, j), &p->views[p->n_views], PyBUF_SIMPLE) < 0) {
                Py_DECREF(buffers);
                goto fail;
            }
            p->n_views++;
            w->count++;
        }
        Py_DECREF(buffers);
        p->n_writes++;
    }
    Py_DECREF(seq);
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

static int
plan_records(Plan *p, PyObject *records)
{
    PyObject *seq = PySequence_Fast(records, "records must be a sequence");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    p->paths = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
    p->data = PyMem_Calloc(n ? n : 1, sizeof(Py_buffer));
    if (p->paths == NULL || p->data == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        p->n_records++;
        if (tuple_paths(item, 2, 1, &p->paths[i], "a record (path, data)") < 0)
            goto fail;
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(item, 1), &p->data[i], PyBUF_SIMPLE) < 0)
            goto fail;
    }
    Py_DECREF(seq);
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

/* OSError(error) naming the paths (given as bytes) as str, as Python's own calls name them. */
static void
raise_with_paths(int error, PyObject *path, PyObject *other)
{
    PyObject *name = PyUnicode_DecodeFSDefaultAndSize(PyBytes_AS_STRING(path), PyBytes_GET_SIZE(path));
    PyObject *name2 = other == NULL ? NULL
                      : PyUnicode_DecodeFSDefaultAndSize(PyBytes_AS_STRING(other), PyBytes_GET_SIZE(other));
    if (name != NULL && (other == NULL || name2 != NULL)) {
        errno = error;
        PyErr_SetFromErrnoWithFilenameObjects(PyExc_OSError, name, name2);
    }
    Py_XDECREF(name);
    Py_XDECREF(name2);
}

static PyObject *
write_all(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *writes, *records;
    if (!PyArg_ParseTuple(args, "OO:write_all", &writes, &records))
        return NULL;
    Plan p = {0};
    p.failed_write = p.failed_record = -1;
    if (plan_writes(&p, writes) < 0 || plan_records(&p, records) < 0) {
        plan_free(&p);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < p.n_writes && !p.error; i++) {
        p.error = write_one(&p.writes[i], p.views);
        if (p.error)
            p.failed_write = i;
    }
    for (Py_ssize_t i = 0; i < p.n_records && !p.error; i++) {
        p.error = write_record(PyBytes_AS_STRING(p.paths[i]), &p.data[i]);
        if (p.error)
            p.failed_record = i;
    }
    Py_END_ALLOW_THREADS
    PyObject *result = Py_None;
    if (p.failed_record >= 0) {
        raise_with_paths(p.error, p.paths[p.failed_record], NULL);
        result = NULL;
    } else if (p.failed_write >= 0) {
        PyObject *error = PyObject_CallFunction(PyExc_OSError, "is", p.error, strerror(p.error));
        if (error != NULL) {
            PyErr_SetObject((PyObject *)Py_TYPE(error), error);
            Py_DECREF(error);
        }
        result = NULL;
    }
    plan_free(&p);
    return Py_XNewRef(result);
}

static PyObject *
exchange_all(PyObject *Py_UNUSED(module), PyObject *pairs)
{
    PyObject *seq = PySequence_Fast(pairs, "pairs must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), failed = -1;
    PyObject **names = sequence_paths(seq, 2, 2, "a pair (tmp, record)");
    PyObject *result = NULL;
    int error = 0;
    if (names == NULL)
        goto done;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *tmp = PyBytes_AS_STRING(names[2 * i]), *record = PyBytes_AS_STRING(names[2 * i + 1]);
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, record, RENAME_EXCHANGE) == 0)
            continue;
        if (errno == ENOENT || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP) {
            if (rename(tmp, record) == 0)
                continue;
        }
        error = errno;
        failed = i;
        break;
    }
    Py_END_ALLOW_THREADS
    if (failed >= 0) {
        raise_with_paths(error, names[2 * failed], names[2 * failed + 1]);
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    free_paths(names, 2 * n);
    Py_DECREF(seq);
    return result;
}

typedef struct {
    int lock_fd;
    int error;
    char *record; /* malloc'd, NULL when missing */
    Py_ssize_t record_len;
    int marked;
    long long log_size;
} Resumed;

static int
lock_exclusive(int fd)
{
#ifdef F_OFD_SETLKW
    struct flock whole = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0, .l_pid = 0};
    while (fcntl(fd, F_OFD_SETLKW, &whole) != 0) {
        if (errno != EINTR)
            return errno;
    }
#else
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR)
            return errno;
    }
#endif
    return 0;
}

/* The whole file, or NULL with `*error` (0 when it does not exist). */
static char *
read_file(const char *path, Py_ssize_t *len, int *error)
{
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOATIME);
    if (fd < 0 && errno == EPERM)
        fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *error = errno == ENOENT ? 0 : errno;
        return NULL;
    }
    Py_ssize_t capacity = 8192;
    char *data = malloc((size_t)capacity);
    while (data != NULL) {
        if (*len == capacity) {
            char *more = realloc(data, (size_t)capacity * 2);
            if (more == NULL) {
                free(data);
                data = NULL;
                break;
            }
            data = more;
            capacity *= 2;
        }
        ssize_t n = read(fd, data + *len, (size_t)(capacity - *len));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            *error = errno;
            free(data);
            data = NULL;
            break;
        }
        if (n == 0)
            break;
        *len += n;
    }
    if (data == NULL && *error == 0)
        *error = ENOMEM;
    close(fd);
    return data;
}

static void
resume_one(const char *lock, const char *record, const char *marker, int log_fd, Resumed *r)
{
    r->lock_fd = -1;
    r->log_size = -1;
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        r->error = errno;
        return;
    }
    if ((r->error = lock_exclusive(fd)) != 0) {
        close(fd);
        return;
    }
    r->lock_fd = fd;
    r->record = read_file(record, &r->record_len, &r->error);
    if (r->error)
        return;
    struct stat st;
    if (stat(marker, &st) == 0)
        r->marked = 1;
    else if (errno != ENOENT) {
        r->error = errno;
        return;
    }
    if (log_fd >= 0) {
        if (fstat(log_fd, &st) != 0) {
            r->error = errno;
            return;
        }
        r->log_size = (long long)st.st_size;
    }
}

static PyObject *
resume_all(PyObject *Py_UNUSED(module), PyObject *probes)
{
    PyObject *seq = PySequence_Fast(probes, "probes must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **names = sequence_paths(seq, 4, 3, "a probe (lock, record, marker, log_fd)");
    int *log_fds = PyMem_Calloc(n ? n : 1, sizeof(int));
    Resumed *out = PyMem_Calloc(n ? n : 1, sizeof(Resumed));
    PyObject *result = NULL;
    if (names == NULL)
        goto done;
    if (log_fds == NULL || out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        log_fds[i] = PyLong_AsLong(PyTuple_GET_ITEM(PySequence_Fast_GET_ITEM(seq, i), 3));
        if (PyErr_Occurred())
            goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++)
        resume_one(PyBytes_AS_STRING(names[3 * i]), PyBytes_AS_STRING(names[3 * i + 1]),
                   PyBytes_AS_STRING(names[3 * i + 2]), log_fds[i], &out[i]);
    Py_END_ALLOW_THREADS
    result = PyList_New(n);
    for (Py_ssize_t i = 0; result != NULL && i < n; i++) {
        PyObject *record = out[i].record == NULL ? Py_NewRef(Py_None)
                           : PyBytes_FromStringAndSize(out[i].record, out[i].record_len);
        PyObject *t = record == NULL ? NULL
                      : Py_BuildValue("(iiNOL)", out[i].lock_fd, out[i].error, record,
                                      out[i].marked ? Py_True : Py_False, out[i].log_size);
        if (t == NULL) {
            Py_CLEAR(result);
            break;
        }
        PyList_SET_ITEM(result, i, t);
    }
    if (result == NULL) { /* nothing handed over: no lock left held */
        for (Py_ssize_t i = 0; i < n; i++)
            if (out[i].lock_fd >= 0)
                close(out[i].lock_fd);
    }
done:
    if (out != NULL)
        for (Py_ssize_t i = 0; i < n; i++)
            free(out[i].record);
    free_paths(names, 3 * n);
    PyMem_Free(log_fds);
    PyMem_Free(out);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef methods[] = {
    {"write_all", write_all, METH_VARARGS, "A group commit's writes, then its tmp records (module comment)."},
    {"exchange_all", exchange_all, METH_O, "Each (tmp, record) pair swapped, or renamed over (module comment)."},
    {"resume_all", resume_all, METH_O, "Kept logs' locks taken and their state read (module comment)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_batched_calls", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__batched_calls(void)
{
    return PyModule_Create(&module);
}
