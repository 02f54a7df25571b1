/* shared._native: the compiled parts of shared.signatures and shared.attribution.
 *
 * Why C: the edge runs attribution and one signature check per request on granian's single Python thread,
 * and that thread's time per request is what bounds the edge (docs/adr/0007-edge-judged-by-python-cpu-per-request.md). In Python the two cost
 * about 1.9 us per request in a tight loop; here about 0.5 us (see
 * docs/adr/0008-native-fast-path-for-signatures-and-attribution.md).
 *
 * What is here, and the contract that keeps every rule defined once:
 *
 * - Mac(key): HMAC-SHA256 with the keyed inner and outer states precomputed (RFC 2104: a key longer than the
 *   block is hashed first); mac(prefix, body) returns HMAC(key, prefix || body) as 32 bytes.
 *
 * - Verifier(table, plain, identity, tolerance_s, fallback): one endpoint's signature check. It answers
 *   only when it can prove a request validly signed in the form providers send (a known signature header,
 *   a plain decimal timestamp, the canonical hex or base64 encoding) and then returns that header's valid
 *   verdict from `table`. Everything else (every failure, every unusual form) is answered by `fallback`,
 *   the Python Verifier of shared.signatures, which stays the definition of every scheme and every failure
 *   reason. `table` comes from shared.signatures too: the signature header names in detection order, each
 *   with its scheme's name, its identity id/timestamp header names and its valid verdict.
 *
 * - Attributor(fallback, make, probe, none, ...header names): provider attribution for requests whose
 *   headers are a dict of bytes and whose body the string probe decodes; anything else goes to `fallback`,
 *   shared.attribution's Python function. Header names come from shared.attribution.
 *
 * Never answering wrong is checked by running every signature and attribution test against both paths
 * and by comparing the two on generated requests (tests/test_native.py).
 */
#define PY_SSIZE_T_CLEAN
#define OPENSSL_SUPPRESS_DEPRECATED /* the low-level SHA256_* API: plain structs, no EVP allocation */
#include <Python.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stddef.h>
#include <string.h>

#define BLOCK 64
#define MAC_SIZE 32
#define HEX_SIZE 64
#define B64_SIZE 44
#define SHA256_PREFIX "sha256="
#define SHA256_PREFIX_SIZE 7
#define GIL_FREE_BODY 4096       /* as hashlib: hash larger inputs with the GIL released */
#define MAX_FAST_DIGITS 15       /* timestamps below 10^15 are exact as doubles, as in Python's arithmetic */
#define MAX_HEADERS 16

/* ---- Mac ------------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    SHA256_CTX inner;
    SHA256_CTX outer;
} MacObject;

static PyTypeObject MacType;

/* HMAC over the pieces prefix[0..n) then body; the body is hashed in place. */
static void
mac_digest(const MacObject *mac, const char *const *pieces, const Py_ssize_t *sizes, int n, const char *body,
           Py_ssize_t body_size, unsigned char *out)
{
    SHA256_CTX ctx = mac->inner;
    for (int i = 0; i < n; i++) {
        SHA256_Update(&ctx, pieces[i], (size_t)sizes[i]);
    }
    if (body_size > GIL_FREE_BODY) {
        Py_BEGIN_ALLOW_THREADS
        SHA256_Update(&ctx, body, (size_t)body_size);
        Py_END_ALLOW_THREADS
    } else {
        SHA256_Update(&ctx, body, (size_t)body_size);
    }
    SHA256_Final(out, &ctx);
    ctx = mac->outer;
    SHA256_Update(&ctx, out, MAC_SIZE);
    SHA256_Final(out, &ctx); /* Final wipes the block buffer; what is left is the MAC */
}

static PyObject *
Mac_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
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
    unsigned char digest[MAC_SIZE];
    const char *pieces[1] = {prefix.buf};
    Py_ssize_t sizes[1] = {prefix.len};
    mac_digest((MacObject *)op, pieces, sizes, 1, body.buf, body.len, digest);
    PyBuffer_Release(&prefix);
    PyBuffer_Release(&body);
    return PyBytes_FromStringAndSize((const char *)digest, MAC_SIZE);
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
    .tp_name = "shared._native.Mac",
    .tp_doc = PyDoc_STR("Mac(key): HMAC-SHA256 with precomputed keyed states; mac(prefix, body) -> 32 bytes."),
    .tp_basicsize = sizeof(MacObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = Mac_new,
    .tp_dealloc = Mac_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(MacObject, vectorcall),
};

/* ---- bytes helpers ------------------------------------------------------------------------------- */

/* Python's bytes.isspace / strip / split set: ASCII space, \t, \n, \v, \f, \r. */
static inline int
is_space(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static inline int
is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* Constant time in the length of `expected`; a length difference is a mismatch (compare_digest's rule). */
static int
equal(const char *given, Py_ssize_t given_size, const char *expected, Py_ssize_t expected_size)
{
    if (given_size != expected_size) {
        return 0;
    }
    unsigned char diff = 0;
    for (Py_ssize_t i = 0; i < expected_size; i++) {
        diff |= (unsigned char)(given[i] ^ expected[i]);
    }
    return diff == 0;
}

static void
to_hex(const unsigned char *mac, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < MAC_SIZE; i++) {
        out[2 * i] = digits[mac[i] >> 4];
        out[2 * i + 1] = digits[mac[i] & 15];
    }
}

/* Standard base64 with padding, as binascii.b2a_base64(newline=False): 32 bytes -> 44 characters. */
static void
to_b64(const unsigned char *mac, char *out)
{
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    int o = 0, i = 0;
    for (; i + 3 <= MAC_SIZE; i += 3) {
        unsigned v = (unsigned)mac[i] << 16 | (unsigned)mac[i + 1] << 8 | mac[i + 2];
        out[o++] = alphabet[v >> 18];
        out[o++] = alphabet[(v >> 12) & 63];
        out[o++] = alphabet[(v >> 6) & 63];
        out[o++] = alphabet[v & 63];
    }
    unsigned v = (unsigned)mac[i] << 16 | (unsigned)mac[i + 1] << 8; /* 32 = 30 + 2: two bytes left */
    out[o++] = alphabet[v >> 18];
    out[o++] = alphabet[(v >> 12) & 63];
    out[o++] = alphabet[(v >> 6) & 63];
    out[o++] = '=';
}

/* A timestamp signed as it stands: 1 to MAX_FAST_DIGITS ASCII digits, no leading zero (but "0" itself). */
static int
plain_timestamp(const char *s, Py_ssize_t n, double *value)
{
    if (n < 1 || n > MAX_FAST_DIGITS || (s[0] == '0' && n > 1)) {
        return 0;
    }
    long long v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!is_digit((unsigned char)s[i])) {
            return 0;
        }
        v = v * 10 + (s[i] - '0');
    }
    *value = (double)v;
    return 1;
}

/* headers[name] when it is a bytes value: 1 found, 0 absent, -1 not bytes (the caller falls back), -2 error. */
static int
get_bytes(PyObject *headers, PyObject *name, PyObject **value)
{
    PyObject *v = PyDict_GetItemWithError(headers, name);
    if (v == NULL) {
        return PyErr_Occurred() ? -2 : 0;
    }
    if (!PyBytes_CheckExact(v)) {
        return -1;
    }
    *value = v;
    return 1;
}

/* ---- Verifier ------------------------------------------------------------------------------------ */

enum rule { IDENTITY, COMMERCE, PAYMENTS, CODE_HOST };
static const char *const RULE_NAMES[] = {"identity", "commerce", "payments", "code_host"};

typedef struct {
    PyObject *name;    /* signature header, bytes */
    enum rule rule;
    PyObject *id_name; /* identity only: the id and timestamp headers of the same family */
    PyObject *ts_name;
    PyObject *valid;   /* the verdict returned when this header proves the request signed */
} SignatureHeader;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *table; /* keeps every object SignatureHeader points at alive */
    SignatureHeader headers[MAX_HEADERS];
    int n_headers;
    PyObject *plain;    /* Mac: every scheme but identity */
    PyObject *identity; /* Mac: identity's key */
    double tolerance_s;
    PyObject *fallback;
} VerifierObject;

static PyTypeObject VerifierType;

static int
in_tolerance(const VerifierObject *self, double now, double ts)
{
    double delta = now - ts;
    if (delta < 0) {
        delta = -delta;
    }
    return delta <= self->tolerance_s; /* NaN compares false: never proven */
}

static int
check_payments(const VerifierObject *self, const char *s, Py_ssize_t n, const char *body, Py_ssize_t body_size,
               double now)
{
    /* t=<digits>,v1=<64 characters>, exactly: one v1, no v0, nothing else */
    if (n < 2 || s[0] != 't' || s[1] != '=') {
        return 0;
    }
    Py_ssize_t digits = 0;
    while (2 + digits < n && is_digit((unsigned char)s[2 + digits])) {
        digits++;
    }
    double ts;
    if (digits == 0 || s[2] == '0' || !plain_timestamp(s + 2, digits, &ts)) { /* t=0...: the Python path */
        return 0;
    }
    const char *rest = s + 2 + digits;
    Py_ssize_t rest_size = n - 2 - digits;
    if (rest_size != 4 + HEX_SIZE || memcmp(rest, ",v1=", 4) != 0) {
        return 0;
    }
    unsigned char mac[MAC_SIZE];
    char expected[HEX_SIZE];
    const char *pieces[2] = {s + 2, "."};
    Py_ssize_t sizes[2] = {digits, 1};
    mac_digest((MacObject *)self->plain, pieces, sizes, 2, body, body_size, mac);
    to_hex(mac, expected);
    return equal(rest + 4, HEX_SIZE, expected, HEX_SIZE) && in_tolerance(self, now, ts);
}

/* 1 proven, 0 not proven, -1 error */
static int
check_identity(const VerifierObject *self, const SignatureHeader *header, PyObject *headers, const char *s,
               Py_ssize_t n, const char *body, Py_ssize_t body_size, double now)
{
    PyObject *msg_id = NULL, *ts_text = NULL;
    int found = get_bytes(headers, header->id_name, &msg_id);
    if (found != 1) {
        return found == -2 ? -1 : 0;
    }
    found = get_bytes(headers, header->ts_name, &ts_text);
    if (found != 1) {
        return found == -2 ? -1 : 0;
    }
    const char *id = PyBytes_AS_STRING(msg_id);
    Py_ssize_t id_size = PyBytes_GET_SIZE(msg_id);
    const char *ts = PyBytes_AS_STRING(ts_text);
    Py_ssize_t ts_size = PyBytes_GET_SIZE(ts_text);
    double ts_value;
    if (id_size == 0 || !plain_timestamp(ts, ts_size, &ts_value)) {
        return 0;
    }
    unsigned char mac[MAC_SIZE];
    char expected[B64_SIZE];
    const char *pieces[4] = {id, ".", ts, "."};
    Py_ssize_t sizes[4] = {id_size, 1, ts_size, 1};
    mac_digest((MacObject *)self->identity, pieces, sizes, 4, body, body_size, mac);
    to_b64(mac, expected);
    /* any "v1," entry of the space-separated list may match */
    int matched = 0;
    Py_ssize_t i = 0;
    while (i < n) {
        while (i < n && is_space((unsigned char)s[i])) {
            i++;
        }
        Py_ssize_t start = i;
        while (i < n && !is_space((unsigned char)s[i])) {
            i++;
        }
        Py_ssize_t size = i - start;
        if (size >= 3 && memcmp(s + start, "v1,", 3) == 0) {
            matched |= equal(s + start + 3, size - 3, expected, B64_SIZE);
        }
    }
    return matched && in_tolerance(self, now, ts_value);
}

static int
check_plain(const VerifierObject *self, enum rule rule, const char *s, Py_ssize_t n, const char *body,
            Py_ssize_t body_size)
{
    unsigned char mac[MAC_SIZE];
    char expected[B64_SIZE > HEX_SIZE ? B64_SIZE : HEX_SIZE];
    if (rule == CODE_HOST) {
        if (n != SHA256_PREFIX_SIZE + HEX_SIZE || memcmp(s, SHA256_PREFIX, SHA256_PREFIX_SIZE) != 0) {
            return 0;
        }
        mac_digest((MacObject *)self->plain, NULL, NULL, 0, body, body_size, mac);
        to_hex(mac, expected);
        return equal(s + SHA256_PREFIX_SIZE, HEX_SIZE, expected, HEX_SIZE);
    }
    if (n != B64_SIZE) { /* commerce: the bare base64 MAC */
        return 0;
    }
    mac_digest((MacObject *)self->plain, NULL, NULL, 0, body, body_size, mac);
    to_b64(mac, expected);
    return equal(s, n, expected, B64_SIZE);
}

/* The valid verdict (borrowed) when proven; NULL without an error when not; NULL with one on failure. */
static PyObject *
prove(VerifierObject *self, PyObject *headers, PyObject *body, PyObject *now_obj)
{
    if (!PyDict_CheckExact(headers) || !PyBytes_CheckExact(body)) {
        return NULL;
    }
    double now;
    if (PyFloat_CheckExact(now_obj)) {
        now = PyFloat_AS_DOUBLE(now_obj);
    } else if (PyLong_CheckExact(now_obj)) {
        int overflow;
        long long value = PyLong_AsLongLongAndOverflow(now_obj, &overflow);
        if (overflow || value > (1LL << 53) || value < -(1LL << 53)) {
            return NULL; /* not exact as a double: Python's integer arithmetic decides */
        }
        now = (double)value;
    } else {
        return NULL; /* None: the Python path reads the clock */
    }
    for (int i = 0; i < self->n_headers; i++) {
        const SignatureHeader *header = &self->headers[i];
        PyObject *value = NULL;
        int found = get_bytes(headers, header->name, &value);
        if (found < 0) { /* -2: an error is set; -1: not bytes, the Python path decides */
            return NULL;
        }
        if (found == 0) {
            continue;
        }
        const char *s = PyBytes_AS_STRING(value);
        Py_ssize_t start = 0, end = PyBytes_GET_SIZE(value);
        while (start < end && is_space((unsigned char)s[start])) {
            start++;
        }
        while (end > start && is_space((unsigned char)s[end - 1])) {
            end--;
        }
        if (start == end) {
            continue; /* empty or blank: counts as absent */
        }
        s += start;
        Py_ssize_t n = end - start;
        const char *b = PyBytes_AS_STRING(body);
        Py_ssize_t b_size = PyBytes_GET_SIZE(body);
        int proven;
        Py_INCREF(value); /* a large body is hashed without the GIL: the dict may change meanwhile */
        switch (header->rule) {
        case PAYMENTS:
            proven = check_payments(self, s, n, b, b_size, now);
            break;
        case IDENTITY:
            proven = check_identity(self, header, headers, s, n, b, b_size, now);
            break;
        default:
            proven = check_plain(self, header->rule, s, n, b, b_size);
        }
        Py_DECREF(value);
        if (proven < 0) {
            return NULL;
        }
        return proven ? header->valid : NULL; /* the first present header decides, as in Python */
    }
    return NULL;
}

static PyObject *
Verifier_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    VerifierObject *self = (VerifierObject *)op;
    if (PyVectorcall_NARGS(nargsf) == 3 && kwnames == NULL) {
        PyObject *verdict = prove(self, args[0], args[1], args[2]);
        if (verdict != NULL) {
            return Py_NewRef(verdict);
        }
        if (PyErr_Occurred()) {
            return NULL;
        }
    }
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static int
rule_of(PyObject *name, enum rule *rule)
{
    for (int r = IDENTITY; r <= CODE_HOST; r++) {
        if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, RULE_NAMES[r]) == 0) {
            *rule = (enum rule)r;
            return 1;
        }
    }
    PyErr_Format(PyExc_ValueError, "unknown signature scheme %R", name);
    return 0;
}

static PyObject *
Verifier_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"table", "plain", "identity", "tolerance_s", "fallback", NULL};
    PyObject *table, *plain, *identity, *fallback;
    double tolerance_s;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!O!dO:Verifier", keywords, &PyTuple_Type, &table, &MacType,
                                     &plain, &MacType, &identity, &tolerance_s, &fallback)) {
        return NULL;
    }
    Py_ssize_t size = PyTuple_GET_SIZE(table);
    if (size > MAX_HEADERS) {
        PyErr_Format(PyExc_ValueError, "at most %d signature headers", MAX_HEADERS);
        return NULL;
    }
    VerifierObject *self = (VerifierObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->table = Py_NewRef(table);
    for (Py_ssize_t i = 0; i < size; i++) {
        SignatureHeader *header = &self->headers[i];
        PyObject *scheme;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(table, i), "O!OOOO:table entry", &PyBytes_Type, &header->name,
                              &scheme, &header->id_name, &header->ts_name, &header->valid) ||
            !rule_of(scheme, &header->rule)) {
            Py_DECREF(self);
            return NULL;
        }
        if (header->rule == IDENTITY && !(PyBytes_CheckExact(header->id_name) && PyBytes_CheckExact(header->ts_name))) {
            PyErr_SetString(PyExc_TypeError, "an identity header needs its id and timestamp header names as bytes");
            Py_DECREF(self);
            return NULL;
        }
    }
    self->n_headers = (int)size;
    self->plain = Py_NewRef(plain);
    self->identity = Py_NewRef(identity);
    self->tolerance_s = tolerance_s;
    self->fallback = Py_NewRef(fallback);
    self->vectorcall = Verifier_vectorcall;
    return (PyObject *)self;
}

static int
Verifier_traverse(PyObject *op, visitproc visit, void *arg)
{
    VerifierObject *self = (VerifierObject *)op;
    Py_VISIT(self->table);
    Py_VISIT(self->fallback);
    return 0;
}

static int
Verifier_clear(PyObject *op)
{
    VerifierObject *self = (VerifierObject *)op;
    self->n_headers = 0;
    Py_CLEAR(self->table);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->plain);
    Py_CLEAR(self->identity);
    return 0;
}

static void
Verifier_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    Verifier_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyTypeObject VerifierType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shared._native.Verifier",
    .tp_doc = PyDoc_STR("Verifier(table, plain, identity, tolerance_s, fallback): "
                        "verifier(headers, body, now) -> Verdict; proves the usual valid forms, "
                        "asks fallback for everything else."),
    .tp_basicsize = sizeof(VerifierObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_new = Verifier_new,
    .tp_dealloc = Verifier_dealloc,
    .tp_traverse = Verifier_traverse,
    .tp_clear = Verifier_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(VerifierObject, vectorcall),
};

/* ---- Attributor ---------------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *fallback; /* shared.attribution's Python function: the definition */
    PyObject *make;     /* Attribution */
    PyObject *probe;    /* decode(body) -> struct with .type and .id (non-empty str or None) */
    PyObject *none;     /* the unattributed result */
    PyObject *identity_ids, *identity_signatures, *commerce, *commerce_ids, *payments, *code_host, *code_host_ids;
    PyObject *providers[4]; /* interned provider names */
} AttributorObject;

static PyObject *s_type, *s_id;

/* The first non-empty bytes value among `names`: 1 found, 0 none, -1 fall back (a value that is not bytes),
 * -2 error. */
static int
first(PyObject *headers, PyObject *names, PyObject **value)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        PyObject *v = NULL;
        int found = get_bytes(headers, PyTuple_GET_ITEM(names, i), &v);
        if (found < 0) {
            return found;
        }
        if (found == 1 && PyBytes_GET_SIZE(v) > 0) {
            *value = v;
            return 1;
        }
    }
    return 0;
}

/* shared.headers.header_text: UTF-8 when valid, else Latin-1; None for no value (new reference). */
static PyObject *
text(PyObject *value)
{
    if (value == NULL) {
        Py_RETURN_NONE;
    }
    Py_INCREF(value); /* borrowed from the headers dict; decoding allocates */
    const char *s = PyBytes_AS_STRING(value);
    Py_ssize_t n = PyBytes_GET_SIZE(value);
    PyObject *decoded = PyUnicode_DecodeUTF8(s, n, NULL);
    if (decoded == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        decoded = PyUnicode_DecodeLatin1(s, n, NULL);
    }
    Py_DECREF(value);
    return decoded;
}

/* The body's (type, id) through the probe: 1 decoded (new references), 0 fall back (the Python path takes
 * the closer look a non-string field needs), -1 error. */
static int
probe(AttributorObject *self, PyObject *body, PyObject **type, PyObject **id)
{
    PyObject *fields = PyObject_Vectorcall(self->probe, &body, 1, NULL);
    if (fields == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception)) {
            return -1;
        }
        PyErr_Clear();
        return 0;
    }
    *type = PyObject_GetAttr(fields, s_type);
    *id = *type == NULL ? NULL : PyObject_GetAttr(fields, s_id);
    Py_DECREF(fields);
    if (*id == NULL) {
        Py_XDECREF(*type);
        return -1;
    }
    return 1;
}

static PyObject *
attribution(AttributorObject *self, PyObject *provider, PyObject *event_type, PyObject *key)
{
    if (event_type == NULL || key == NULL) {
        return NULL;
    }
    PyObject *args[3] = {provider, event_type, key};
    return PyObject_Vectorcall(self->make, args, 3, NULL);
}

/* By header pairs (event header, its id header), as commerce and code_host are recognised. */
static int
by_header(AttributorObject *self, PyObject *headers, PyObject *pairs, PyObject *ids, PyObject *provider,
          PyObject **result)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pairs); i++) {
        PyObject *pair = PyTuple_GET_ITEM(pairs, i);
        PyObject *event = NULL, *key = NULL;
        int found = get_bytes(headers, PyTuple_GET_ITEM(pair, 0), &event);
        if (found < 0) {
            return found;
        }
        if (found == 0 || PyBytes_GET_SIZE(event) == 0) {
            continue;
        }
        found = get_bytes(headers, PyTuple_GET_ITEM(pair, 1), &key);
        if (found < 0) {
            return found;
        }
        if (found == 0 || PyBytes_GET_SIZE(key) == 0) {
            key = NULL;
            found = first(headers, ids, &key);
            if (found < 0) {
                return found;
            }
        }
        Py_XINCREF(key); /* borrowed from the dict, and decoding the event allocates */
        PyObject *event_text = text(event);
        PyObject *key_text = event_text == NULL ? NULL : text(key);
        Py_XDECREF(key);
        *result = attribution(self, provider, event_text, key_text);
        Py_XDECREF(event_text);
        Py_XDECREF(key_text);
        return *result == NULL ? -2 : 1;
    }
    return 0;
}

/* A new reference to the attribution; NULL without an error: fall back; NULL with one: failure. */
static PyObject *
attribute_fast(AttributorObject *self, PyObject *headers, PyObject *body)
{
    if (!PyDict_CheckExact(headers) || !PyBytes_CheckExact(body)) {
        return NULL;
    }
    PyObject *key = NULL, *signature = NULL, *result = NULL, *type = NULL, *id = NULL;
    int found = first(headers, self->identity_ids, &key);
    if (found == 0) {
        found = first(headers, self->identity_signatures, &signature);
    }
    if (found < 0) {
        return NULL;
    }
    if (found == 1) {
        /* the key is borrowed from the dict, and the probe allocates (a collection may run finalizers) */
        PyObject *key_text = text(key);
        if (key_text == NULL) {
            return NULL;
        }
        int probed = probe(self, body, &type, &id);
        if (probed <= 0) {
            Py_DECREF(key_text);
            return NULL;
        }
        result = attribution(self, self->providers[IDENTITY], type, key_text);
        Py_DECREF(type);
        Py_DECREF(id);
        Py_DECREF(key_text);
        return result;
    }
    found = by_header(self, headers, self->commerce, self->commerce_ids, self->providers[COMMERCE], &result);
    if (found != 0) {
        return found == 1 ? result : NULL;
    }
    found = first(headers, self->payments, &signature);
    if (found < 0) {
        return NULL;
    }
    if (found == 1) {
        int probed = probe(self, body, &type, &id);
        if (probed <= 0) {
            return NULL;
        }
        result = attribution(self, self->providers[PAYMENTS], type, id);
        Py_DECREF(type);
        Py_DECREF(id);
        return result;
    }
    found = by_header(self, headers, self->code_host, self->code_host_ids, self->providers[CODE_HOST], &result);
    if (found != 0) {
        return found == 1 ? result : NULL;
    }
    return Py_NewRef(self->none);
}

static PyObject *
Attributor_vectorcall(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    AttributorObject *self = (AttributorObject *)op;
    if (PyVectorcall_NARGS(nargsf) == 2 && kwnames == NULL) {
        PyObject *result = attribute_fast(self, args[0], args[1]);
        if (result != NULL || PyErr_Occurred()) {
            return result;
        }
    }
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static int
check_names(PyObject *names, int pairs)
{
    if (!PyTuple_Check(names)) {
        PyErr_SetString(PyExc_TypeError, "header names must be a tuple");
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        PyObject *item = PyTuple_GET_ITEM(names, i);
        int ok = pairs ? PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 2 &&
                             PyBytes_CheckExact(PyTuple_GET_ITEM(item, 0)) &&
                             PyBytes_CheckExact(PyTuple_GET_ITEM(item, 1))
                       : PyBytes_CheckExact(item);
        if (!ok) {
            PyErr_SetString(PyExc_TypeError, pairs ? "expected a tuple of (bytes, bytes) pairs"
                                                   : "expected a tuple of bytes");
            return 0;
        }
    }
    return 1;
}

static PyObject *
Attributor_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"fallback", "make", "probe", "none", "identity_ids", "identity_signatures",
                               "commerce", "commerce_ids", "payments", "code_host", "code_host_ids", NULL};
    PyObject *fallback, *make, *probe_decoder, *none, *lists[7];
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "$OOOOOOOOOOO:Attributor", keywords, &fallback, &make,
                                     &probe_decoder, &none, &lists[0], &lists[1], &lists[2], &lists[3], &lists[4],
                                     &lists[5], &lists[6])) {
        return NULL;
    }
    static const int pairs[7] = {0, 0, 1, 0, 0, 1, 0};
    for (int i = 0; i < 7; i++) {
        if (!check_names(lists[i], pairs[i])) {
            return NULL;
        }
    }
    AttributorObject *self = (AttributorObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->fallback = Py_NewRef(fallback);
    self->make = Py_NewRef(make);
    self->probe = Py_NewRef(probe_decoder);
    self->none = Py_NewRef(none);
    self->identity_ids = Py_NewRef(lists[0]);
    self->identity_signatures = Py_NewRef(lists[1]);
    self->commerce = Py_NewRef(lists[2]);
    self->commerce_ids = Py_NewRef(lists[3]);
    self->payments = Py_NewRef(lists[4]);
    self->code_host = Py_NewRef(lists[5]);
    self->code_host_ids = Py_NewRef(lists[6]);
    for (int r = IDENTITY; r <= CODE_HOST; r++) {
        self->providers[r] = PyUnicode_InternFromString(RULE_NAMES[r]);
        if (self->providers[r] == NULL) {
            Py_DECREF(self);
            return NULL;
        }
    }
    self->vectorcall = Attributor_vectorcall;
    return (PyObject *)self;
}

static int
Attributor_traverse(PyObject *op, visitproc visit, void *arg)
{
    AttributorObject *self = (AttributorObject *)op;
    Py_VISIT(self->fallback);
    Py_VISIT(self->make);
    Py_VISIT(self->probe);
    Py_VISIT(self->none);
    return 0;
}

static int
Attributor_clear(PyObject *op)
{
    AttributorObject *self = (AttributorObject *)op;
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->make);
    Py_CLEAR(self->probe);
    Py_CLEAR(self->none);
    Py_CLEAR(self->identity_ids);
    Py_CLEAR(self->identity_signatures);
    Py_CLEAR(self->commerce);
    Py_CLEAR(self->commerce_ids);
    Py_CLEAR(self->payments);
    Py_CLEAR(self->code_host);
    Py_CLEAR(self->code_host_ids);
    for (int r = IDENTITY; r <= CODE_HOST; r++) {
        Py_CLEAR(self->providers[r]);
    }
    return 0;
}

static void
Attributor_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    Attributor_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyTypeObject AttributorType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shared._native.Attributor",
    .tp_doc = PyDoc_STR("Attributor(*, fallback, make, probe, none, <header names>): "
                        "attribute(headers, body) -> Attribution; asks fallback whenever it cannot answer."),
    .tp_basicsize = sizeof(AttributorObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_new = Attributor_new,
    .tp_dealloc = Attributor_dealloc,
    .tp_traverse = Attributor_traverse,
    .tp_clear = Attributor_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(AttributorObject, vectorcall),
};

/* ---- module -------------------------------------------------------------------------------------- */

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "shared._native",
    .m_doc = "The compiled parts of shared.signatures and shared.attribution (see shared/_native.c).",
    .m_size = 0,
};

PyMODINIT_FUNC
PyInit__native(void)
{
    s_type = PyUnicode_InternFromString("type");
    s_id = PyUnicode_InternFromString("id");
    if (s_type == NULL || s_id == NULL) {
        return NULL;
    }
    if (PyType_Ready(&MacType) < 0 || PyType_Ready(&VerifierType) < 0 || PyType_Ready(&AttributorType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&native_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "Mac", (PyObject *)&MacType) < 0 ||
        PyModule_AddObjectRef(module, "Verifier", (PyObject *)&VerifierType) < 0 ||
        PyModule_AddObjectRef(module, "Attributor", (PyObject *)&AttributorType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
