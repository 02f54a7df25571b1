/* HMAC-SHA256 with the keyed states kept as plain structs: the MAC primitive of shared.signatures.
 *
 * Why C: the edge checks one HMAC per request on granian's single Python thread. Through hashlib each MAC
 * is seven calls into OpenSSL's EVP layer, and every copy and digest there allocates a context (about 0.6 us
 * per MAC on the bench machine); here it is one call: copy two SHA256_CTX structs, hash, done (about
 * 0.17 us). Only the primitive lives here. Every signature scheme (which bytes are signed, how the MAC is
 * encoded and compared) stays in shared/signatures.py, which falls back to its pure-Python MAC when this
 * module was not built.
 *
 * Mac(key) precomputes the inner and outer states (RFC 2104: a key longer than the block is hashed
 * first); mac(prefix, body) returns HMAC(key, prefix || body) as 32 bytes. Both arguments take any
 * bytes-like object; the body is hashed in place, never concatenated.
 */
#define PY_SSIZE_T_CLEAN
#define OPENSSL_SUPPRESS_DEPRECATED /* the low-level SHA256_* API: plain structs, no EVP allocation */
#include <Python.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stddef.h>
#include <string.h>

#define BLOCK 64

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    SHA256_CTX inner;
    SHA256_CTX outer;
} MacObject;

static PyObject *
Mac_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    MacObject *self = (MacObject *)op;
    if (PyVectorcall_NARGS(nargsf) != 2 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)) {
        PyErr_SetString(PyExc_TypeError, "a MAC takes exactly two positional arguments: (prefix, body)");
        return NULL;
    }
    Py_buffer prefix, body;
    if (PyObject_GetBuffer(args[0], &prefix, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (PyObject_GetBuffer(args[1], &body, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&prefix);
        return NULL;
    }
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256_CTX ctx = self->inner;
    SHA256_Update(&ctx, prefix.buf, (size_t)prefix.len);
    if (body.len > 4096) { /* as hashlib does for large inputs: let other threads run meanwhile */
        Py_BEGIN_ALLOW_THREADS
        SHA256_Update(&ctx, body.buf, (size_t)body.len);
        Py_END_ALLOW_THREADS
    } else {
        SHA256_Update(&ctx, body.buf, (size_t)body.len);
    }
    SHA256_Final(digest, &ctx);
    PyBuffer_Release(&prefix);
    PyBuffer_Release(&body);
    ctx = self->outer;
    SHA256_Update(&ctx, digest, sizeof digest);
    SHA256_Final(digest, &ctx); /* Final wipes the block buffer; what is left is the MAC we return */
    return PyBytes_FromStringAndSize((const char *)digest, sizeof digest);
}

static PyObject *
Mac_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"key", NULL};
    Py_buffer key;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*:Mac", keywords, &key)) {
        return NULL;
    }
    MacObject *self = (MacObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        PyBuffer_Release(&key);
        return NULL;
    }
    unsigned char block[BLOCK] = {0};
    unsigned char pad[BLOCK];
    if (key.len > BLOCK) {
        SHA256((const unsigned char *)key.buf, (size_t)key.len, block);
    } else {
        memcpy(block, key.buf, (size_t)key.len);
    }
    PyBuffer_Release(&key);
    for (int i = 0; i < BLOCK; i++) {
        pad[i] = block[i] ^ 0x36;
    }
    SHA256_Init(&self->inner);
    SHA256_Update(&self->inner, pad, BLOCK);
    for (int i = 0; i < BLOCK; i++) {
        pad[i] = block[i] ^ 0x5c;
    }
    SHA256_Init(&self->outer);
    SHA256_Update(&self->outer, pad, BLOCK);
    OPENSSL_cleanse(block, sizeof block);
    OPENSSL_cleanse(pad, sizeof pad);
    self->vectorcall = Mac_vectorcall;
    return (PyObject *)self;
}

static void
Mac_dealloc(PyObject *op)
{
    MacObject *self = (MacObject *)op;
    OPENSSL_cleanse(&self->inner, sizeof self->inner);
    OPENSSL_cleanse(&self->outer, sizeof self->outer);
    Py_TYPE(op)->tp_free(op);
}

static PyTypeObject MacType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shared._mac.Mac",
    .tp_doc = PyDoc_STR("Mac(key): HMAC-SHA256 with precomputed keyed states; mac(prefix, body) -> 32 bytes."),
    .tp_basicsize = sizeof(MacObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = Mac_new,
    .tp_dealloc = Mac_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(MacObject, vectorcall),
};

static struct PyModuleDef mac_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "shared._mac",
    .m_doc = "HMAC-SHA256 with precomputed keyed states (the primitive of shared.signatures).",
    .m_size = 0,
};

PyMODINIT_FUNC
PyInit__mac(void)
{
    if (PyType_Ready(&MacType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&mac_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "Mac", (PyObject *)&MacType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
