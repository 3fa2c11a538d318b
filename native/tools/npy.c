#include "npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char* descr;
    const char* name;
    size_t size;
} kTypes[] = {
    {"f2", "float16", 2}, {"f4", "float32", 4}, {"f8", "float64", 8}, {"i1", "int8", 1},   {"i2", "int16", 2},
    {"i4", "int32", 4},   {"i8", "int64", 8},   {"u1", "uint8", 1},   {"u2", "uint16", 2}, {"u4", "uint32", 4},
    {"u8", "uint64", 8},  {"b1", "bool", 1},
};

size_t npy_itemsize(const char* dtype) {
    for (size_t i = 0; i < sizeof kTypes / sizeof kTypes[0]; ++i)
        if (strcmp(kTypes[i].name, dtype) == 0) return kTypes[i].size;
    return 0;
}

void npy_free(npy_array* a) {
    free(a->data);
    a->data = NULL;
}

/* the value of 'key' in the header dict: a pointer just after "'key':" and its spaces */
static const char* field(const char* header, const char* key) {
    char pattern[32];
    snprintf(pattern, sizeof pattern, "'%s':", key);
    const char* p = strstr(header, pattern);
    if (!p) return NULL;
    p += strlen(pattern);
    while (*p == ' ') ++p;
    return p;
}

int npy_read(const char* path, npy_array* out, char* err, size_t errlen) {
    memset(out, 0, sizeof *out);
    FILE* f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    unsigned char pre[12];
    char* header = NULL;
    int ok = -1;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        snprintf(err, errlen, "%s: not a .npy file", path);
        goto done;
    }
    size_t hlen;
    if (pre[6] == 1) {
        hlen = (size_t)pre[8] | ((size_t)pre[9] << 8);
    } else if (pre[6] == 2 || pre[6] == 3) {
        if (fread(pre + 10, 1, 2, f) != 2) {
            snprintf(err, errlen, "%s: truncated header", path);
            goto done;
        }
        hlen = (size_t)pre[8] | ((size_t)pre[9] << 8) | ((size_t)pre[10] << 16) | ((size_t)pre[11] << 24);
    } else {
        snprintf(err, errlen, "%s: .npy format version %d is not supported", path, pre[6]);
        goto done;
    }
    if (hlen > (1u << 20)) {
        snprintf(err, errlen, "%s: header of %zu bytes", path, hlen);
        goto done;
    }
    header = calloc(hlen + 1, 1);
    if (!header || fread(header, 1, hlen, f) != hlen) {
        snprintf(err, errlen, "%s: truncated header", path);
        goto done;
    }
    const char* descr = field(header, "descr");
    const char* order = field(header, "fortran_order");
    const char* shape = field(header, "shape");
    if (!descr || !order || !shape || *descr != '\'' || *shape != '(') {
        snprintf(err, errlen, "%s: unreadable header %s", path, header);
        goto done;
    }
    if (strncmp(order, "False", 5) != 0) {
        snprintf(err, errlen, "%s: Fortran-order arrays are not supported", path);
        goto done;
    }
    char endian = descr[1];
    const char* code = descr + 2;
    int found = 0;
    for (size_t i = 0; i < sizeof kTypes / sizeof kTypes[0]; ++i) {
        size_t n = strlen(kTypes[i].descr);
        if (strncmp(code, kTypes[i].descr, n) == 0 && code[n] == '\'' && (endian == '<' || endian == '|' || (endian == '=' ))) {
            snprintf(out->dtype, sizeof out->dtype, "%s", kTypes[i].name);
            found = 1;
        }
    }
    if (!found) {
        int shown = (int)strcspn(descr + 1, "'");  /* (the descr string between its quotes: '|O') */
        snprintf(err, errlen, "%s: dtype '%.*s' is not supported (little-endian float16/32/64, int8-64, uint8-64, bool)", path, shown, descr + 1);
        goto done;
    }
    const char* p = shape + 1;
    size_t elements = 1;
    while (*p && *p != ')') {
        while (*p == ' ' || *p == ',') ++p;
        if (*p == ')') break;
        char* end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || out->rank >= NPY_MAX_RANK) {
            snprintf(err, errlen, "%s: unreadable shape in %s", path, header);
            goto done;
        }
        out->shape[out->rank++] = v;
        elements *= (size_t)v;
        p = end;
    }
    out->nbytes = elements * npy_itemsize(out->dtype);
    out->data = malloc(out->nbytes ? out->nbytes : 1);
    if (!out->data || fread(out->data, 1, out->nbytes, f) != out->nbytes) {
        snprintf(err, errlen, "%s: truncated data (%zu bytes expected)", path, out->nbytes);
        npy_free(out);
        goto done;
    }
    ok = 0;
done:
    free(header);
    fclose(f);
    return ok;
}

int npy_write(const char* path, const char* dtype, const int64_t* shape, int rank, const void* data, size_t nbytes, char* err, size_t errlen) {
    const char* descr = NULL;
    for (size_t i = 0; i < sizeof kTypes / sizeof kTypes[0]; ++i)
        if (strcmp(kTypes[i].name, dtype) == 0) descr = kTypes[i].descr;
    if (!descr) {
        snprintf(err, errlen, "%s: dtype %s is not supported", path, dtype);
        return -1;
    }
    char dims[512] = "";
    size_t used = 0;
    for (int i = 0; i < rank && used < sizeof dims - 32; ++i)
        used += (size_t)snprintf(dims + used, sizeof dims - used, "%lld%s", (long long)shape[i], rank == 1 ? "," : i + 1 < rank ? ", " : "");
    char header[640];
    int n = snprintf(header, sizeof header, "{'descr': '%c%s', 'fortran_order': False, 'shape': (%s), }",
                     descr[1] == '1' ? '|' : '<', descr, dims);
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    FILE* f = fopen(path, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        return -1;
    }
    size_t hlen = (size_t)n + pad + 1;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xFF), (unsigned char)(hlen >> 8)};
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, (size_t)n, f) == (size_t)n;
    for (size_t i = 0; ok && i < pad; ++i) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF && fwrite(data, 1, nbytes, f) == nbytes;
    ok = (fclose(f) == 0) && ok;
    if (!ok) snprintf(err, errlen, "%s: write failed", path);
    return ok ? 0 : -1;
}
