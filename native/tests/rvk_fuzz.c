/* rvk-fuzz: mutate a valid .rvk and check that the native runtime refuses every damaged copy with a
 * clear error (RVK_ERROR_ARTIFACT and a message) and never crashes; run under ASan/UBSan it also
 * proves no memory error. Mutations (picked per round from a seeded generator, so a failure replays):
 *   flip      1-4 bytes anywhere XORed with random values (the CRCs catch them)
 *   truncate  the file cut at a random length
 *   header    a random byte of the header/section table replaced
 *   repair    1-3 bytes of the program section flipped, then its CRC32 recomputed (reaches the JSON
 *             parser and the validator: CRC-valid but corrupt)
 *   digit     one digit of the program JSON changed to another, CRC recomputed (valid JSON, an
 *             inconsistent program: shapes, ids, sizes, offsets, launch geometry)
 * With --device D, a flip/truncate/header/repair mutant that still validates is loaded on D and run
 * once on zero inputs: any status is fine there as long as it comes with a message. Digit mutants are
 * parsed and validated only: a digit can rewire a launch to another tensor of the same kind (a buffer
 * for a smaller buffer) or grow a launch grid, which no check can tell from a real program (the
 * format records no per-kernel parameter sizes), and the kernel then reads or writes out of bounds
 * on the device, under either runtime (see native/README.md, "Trust boundary").
 *
 *   rvk-fuzz model.rvk [--mutations N] [--seed S] [--device D] [--quiet] [--save ROUND mutant.rvk]
 * Exit status 0 when every mutant behaved; 1 otherwise (the offending round is printed). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leak_check.h"
#include "relax_vk/relax_vk.h"

static uint64_t state;
static uint64_t next(void) { /* splitmix64 */
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static size_t below(size_t n) { return n ? (size_t)(next() % n) : 0; }

static uint32_t crc32(const uint8_t* p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; ++i) {
        c ^= p[i];
        for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xFFFFFFFFu;
}

static uint64_t rd64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

int main(int argc, char** argv) {
    const char* path = NULL;
    const char* device = NULL;
    long mutations = 1000;
    int quiet = 0;
    long save_round = -1;
    const char* save_path = NULL;
    state = 1;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--mutations") == 0 && i + 1 < argc) mutations = atol(argv[++i]);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) state = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) device = argv[++i];
        else if (strcmp(argv[i], "--quiet") == 0) quiet = 1;
        else if (strcmp(argv[i], "--save") == 0 && i + 2 < argc) {
            save_round = atol(argv[++i]);
            save_path = argv[++i];
        }
        else path = argv[i];
    }
    if (!path) {
        fprintf(stderr, "usage: rvk-fuzz model.rvk [--mutations N] [--seed S] [--device D] [--quiet]\n");
        return 2;
    }
    FILE* f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 2;
    }
    fseek(f, 0, SEEK_END);
    size_t size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t* original = malloc(size);
    if (!original || fread(original, 1, size, f) != size) {
        fprintf(stderr, "%s: cannot read\n", path);
        return 2;
    }
    fclose(f);
    rvk_artifact* a = NULL;
    if (rvk_artifact_open_memory(original, size, path, &a) != RVK_OK) {
        fprintf(stderr, "the unmutated artifact is refused: %s\n", rvk_last_error());
        return 1;
    }
    rvk_artifact_destroy(a);
    const size_t header = 88;
    uint64_t prog_off = rd64(original + 16), prog_len = rd64(original + 24);
    static const char* kinds[] = {"flip", "truncate", "header", "repair", "digit"};
    long counts[5][2] = {{0}};
    long sessions = 0, bad = 0;
    uint8_t* data = malloc(size);
    for (long round = 0; round < mutations; ++round) {
        memcpy(data, original, size);
        size_t n = size;
        int kind = (int)below(5);
        if (kind == 0) {
            for (size_t k = 0, m = 1 + below(4); k < m; ++k) data[below(size)] ^= (uint8_t)(1 + below(255));
        } else if (kind == 1) {
            n = below(size);
        } else if (kind == 2) {
            data[below(header)] = (uint8_t)next();
        } else {
            if (kind == 3) {
                for (size_t k = 0, m = 1 + below(3); k < m; ++k) data[prog_off + below(prog_len)] ^= (uint8_t)(1 + below(255));
            } else {
                size_t start = below(prog_len), k;
                for (k = 0; k < prog_len; ++k) {
                    uint8_t* c = &data[prog_off + (start + k) % prog_len];
                    if (*c >= '0' && *c <= '9') {
                        *c = (uint8_t)('0' + (*c - '0' + 1 + below(9)) % 10);
                        break;
                    }
                }
            }
            uint32_t crc = crc32(data + prog_off, prog_len);
            for (int b = 0; b < 4; ++b) data[16 + 16 + b] = (uint8_t)(crc >> (8 * b));
        }
        if (round == save_round) { /* replay one mutant: write it and return */
            FILE* out = fopen(save_path, "wb");
            int ok = out && fwrite(data, 1, n, out) == n;
            if (out) fclose(out);
            printf("round %ld (%s) written to %s\n", round, kinds[kind], save_path);
            return ok ? 0 : 1;
        }
        rvk_artifact* art = NULL;
        rvk_status st = rvk_artifact_open_memory(data, n, "mutant", &art);
        const char* msg = rvk_last_error();
        if (st != RVK_OK) {
            counts[kind][0]++;
            if (st != RVK_ERROR_ARTIFACT || !msg[0]) {
                printf("round %ld (%s): status %s with message '%s'\n", round, kinds[kind], rvk_status_name(st), msg);
                bad++;
            } else if (!quiet && round < 5) {
                printf("round %ld (%s): refused: %s\n", round, kinds[kind], msg);
            }
            continue;
        }
        counts[kind][1]++;
        if (device && kind != 4) {
            if (!quiet) {
                printf("round %ld (%s): accepted; loading on %s\n", round, kinds[kind], device);
                fflush(stdout);
            }
            rvk_session* s = NULL;
            st = rvk_session_create(art, device, RVK_SESSION_PROFILE, &s);
            if (st == RVK_OK) {
                sessions++;
                /* an axis of run-time size (-1 before the first run) takes the smallest value of the
                   dims' ranges (the one dim's, else the largest of their minimums): a shape the
                   session may refuse, with a message, never one it may misread */
                int64_t at_least = 1;
                for (int d = 0; d < rvk_session_dim_count(s); ++d) {
                    const char* dim_name;
                    int64_t lo = 1, hi = 1, value = -1;
                    if (rvk_session_dim_info(s, d, &dim_name, &lo, &hi, &value) == RVK_OK && lo > at_least) at_least = lo;
                }
                for (int i = 0; i < rvk_session_input_count(s) && st == RVK_OK; ++i) {
                    rvk_tensor_info info;
                    st = rvk_session_input_info(s, i, &info);
                    if (st) break;
                    size_t elements = 1;
                    for (int a = 0; a < info.rank; ++a) {
                        if (info.shape[a] < 0) info.shape[a] = at_least;
                        elements *= (size_t)info.shape[a];
                    }
                    size_t bytes = elements * (strstr(info.dtype, "64") ? 8 : strstr(info.dtype, "32") ? 4 : strstr(info.dtype, "16") ? 2 : 1);
                    if (bytes > ((size_t)1 << 30)) break; /* (left unset: the run refuses it, by name) */
                    void* zeros = calloc(bytes ? bytes : 1, 1);
                    if (!zeros) break;
                    st = rvk_session_set_input(s, i, zeros, bytes, info.dtype, info.shape, info.rank);
                    free(zeros);
                }
                if (st == RVK_OK) st = rvk_session_run(s);
            }
            if (st != RVK_OK && !rvk_last_error()[0]) {
                printf("round %ld (%s): session status %s without a message\n", round, kinds[kind], rvk_status_name(st));
                bad++;
            }
            rvk_session_destroy(s);
        }
        rvk_artifact_destroy(art);
    }
    printf("%ld mutations of %s:", mutations, path);
    for (int k = 0; k < 5; ++k) printf(" %s %ld refused/%ld accepted;", kinds[k], counts[k][0], counts[k][1]);
    printf(" %ld sessions run; %ld misbehaved\n", sessions, bad);
    free(data);
    free(original);
    rvk_leak_check(); /* every session and artifact destroyed, the drivers still loaded */
    return bad ? 1 : 0;
}
