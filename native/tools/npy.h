/* A minimal .npy (NumPy format 1.0/2.0/3.0) reader and writer for the dtypes the runtime holds:
 * little-endian float16/32/64, int8..64, uint8..64 and bool, C order. */
#ifndef RVK_NPY_H
#define RVK_NPY_H

#include <stddef.h>
#include <stdint.h>

#define NPY_MAX_RANK 16

typedef struct npy_array {
    char dtype[16];  /* numpy name: "float32", ... */
    int rank;
    int64_t shape[NPY_MAX_RANK];
    size_t nbytes;
    void* data;  /* malloc'ed; free with npy_free */
} npy_array;

/* 0 on success; else -1 with a message in err (size errlen). */
int npy_read(const char* path, npy_array* out, char* err, size_t errlen);
int npy_write(const char* path, const char* dtype, const int64_t* shape, int rank, const void* data, size_t nbytes, char* err, size_t errlen);
void npy_free(npy_array* a);
size_t npy_itemsize(const char* dtype); /* 0: not supported */

#endif
