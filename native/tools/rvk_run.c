/* rvk-run: run a .rvk model with the native runtime, no Python.
 *
 *   rvk-run model.rvk [--device D] --input x.npy [--input ...] [--output y.npy ...] [--repeat N] [--profile]
 *           [--shader-checks bounds|loops|none]
 *
 * Inputs are .npy files in the model's input order (their host dtype or device dtype); outputs are
 * written in the model's output order. --repeat N times N unprofiled inferences after one warm-up
 * (inputs set, run, outputs read: what an app pays) and prints the median ms per inference;
 * --profile prints the per-step device times of one profiled run. --shader-checks (Vulkan): wgpu's
 * runtime checks in the shaders, "bounds" (the default), "loops" or "none" (RVK_SESSION_SHADER_CHECKS_*). Exit status 0 on success, 1 with
 * the runtime's message on stderr otherwise. "program:" says where the device program came from
 * (rvk_session_program_origin: the OpenCL binary cache, the Vulkan driver's cache folder). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "leak_check.h"
#include "npy.h"
#include "relax_vk/relax_vk.h"

#define MAX_FILES 64

static int fail(const char* what, rvk_status status) {
    fprintf(stderr, "rvk-run: %s: %s: %s\n", what, rvk_status_name(status), rvk_last_error());
    return 1;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int compare(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static void usage(void) {
    fprintf(stderr, "usage: rvk-run model.rvk [--device pocl|gpu|P:D] --input x.npy [--input ...] [--output y.npy ...] [--repeat N] [--profile]\n"
                    "       [--shader-checks bounds|loops|none]  (Vulkan: wgpu's checks in the shaders)\n");
}

static int run_model(int argc, char** argv) {
    const char* model = NULL;
    const char* device = NULL;
    const char* inputs[MAX_FILES];
    const char* outputs[MAX_FILES];
    int n_inputs = 0, n_outputs = 0, repeat = 0, profile = 0;
    uint32_t checks = 0;
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        int has_value = i + 1 < argc;
        if (strcmp(a, "--device") == 0 && has_value) device = argv[++i];
        else if (strcmp(a, "--input") == 0 && has_value && n_inputs < MAX_FILES) inputs[n_inputs++] = argv[++i];
        else if (strcmp(a, "--output") == 0 && has_value && n_outputs < MAX_FILES) outputs[n_outputs++] = argv[++i];
        else if (strcmp(a, "--repeat") == 0 && has_value) repeat = atoi(argv[++i]);
        else if (strcmp(a, "--profile") == 0) profile = 1;
        else if (strcmp(a, "--shader-checks") == 0 && has_value) {
            const char* v = argv[++i];
            if (strcmp(v, "bounds") == 0) checks = 0;
            else if (strcmp(v, "loops") == 0) checks = RVK_SESSION_SHADER_CHECKS_LOOPS;
            else if (strcmp(v, "none") == 0) checks = RVK_SESSION_SHADER_CHECKS_NONE;
            else {
                usage();
                return 2;
            }
        }
        else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage();
            return 0;
        } else if (a[0] != '-' && !model) model = a;
        else {
            usage();
            return 2;
        }
    }
    if (!model || repeat < 0) {
        usage();
        return 2;
    }
    rvk_artifact* artifact = NULL;
    rvk_session* session = NULL;
    rvk_status st = rvk_artifact_open_file(model, &artifact);
    if (st) return fail("loading", st);
    double t0 = now_ms();
    st = rvk_session_create(artifact, device, RVK_SESSION_PROFILE | checks, &session);
    rvk_artifact_destroy(artifact);
    if (st) return fail("creating the session", st);
    double load_ms = now_ms() - t0;
    if (rvk_session_warnings(session)[0]) fprintf(stderr, "rvk-run: warning: %s\n", rvk_session_warnings(session));
    int want = rvk_session_input_count(session);
    if (n_inputs != want) {
        fprintf(stderr, "rvk-run: the model takes %d inputs, got %d:", want, n_inputs);
        for (int i = 0; i < want; ++i) {
            rvk_tensor_info info;
            rvk_session_input_info(session, i, &info);
            fprintf(stderr, " %s (%s, rank %d)", info.name, info.dtype, info.rank);
        }
        fprintf(stderr, "\n");
        rvk_session_destroy(session);
        return 1;
    }
    npy_array arrays[MAX_FILES];
    char err[1024];
    int code = 0;
    for (int i = 0; i < n_inputs; ++i) {
        if (npy_read(inputs[i], &arrays[i], err, sizeof err)) {
            fprintf(stderr, "rvk-run: %s\n", err);
            for (int k = 0; k < i; ++k) npy_free(&arrays[k]);
            rvk_session_destroy(session);
            return 1;
        }
    }
    int n_out = rvk_session_output_count(session);
    void** out_data = calloc((size_t)n_out, sizeof(void*));
    size_t* out_bytes = calloc((size_t)n_out, sizeof(size_t));
    rvk_tensor_info* out_info = calloc((size_t)n_out, sizeof(rvk_tensor_info));
    /* one inference: inputs set, run, outputs read (each at the run's shape: a model with run-time
     * dims has its output sizes only after the run) */
#define INFER()                                                                                                              \
    do {                                                                                                                     \
        for (int i = 0; i < n_inputs && !st; ++i)                                                                            \
            st = rvk_session_set_input(session, i, arrays[i].data, arrays[i].nbytes, arrays[i].dtype, arrays[i].shape, arrays[i].rank); \
        if (!st) st = rvk_session_run(session);                                                                              \
        for (int i = 0; i < n_out && !st; ++i) {                                                                             \
            st = rvk_session_output_info(session, i, &out_info[i]);                                                          \
            size_t want = st ? 0 : (size_t)out_info[i].elements * npy_itemsize(out_info[i].dtype);                           \
            if (!st && (!out_data[i] || want != out_bytes[i])) {                                                             \
                free(out_data[i]);                                                                                           \
                out_bytes[i] = want;                                                                                         \
                out_data[i] = malloc(want ? want : 1);                                                                       \
            }                                                                                                                \
            if (!st) st = rvk_session_get_output(session, i, out_data[i], out_bytes[i]);                                     \
        }                                                                                                                    \
    } while (0)
    t0 = now_ms();
    INFER();
    double first_ms = now_ms() - t0;
    if (st) {
        code = fail("running", st);
        goto done;
    }
    printf("device: %s\nprogram: %s\nload: %.2f ms, first inference: %.2f ms (load to first output: %.2f ms)\ndevice memory: %lld bytes\n",
           rvk_session_device_name(session), rvk_session_program_origin(session), load_ms, first_ms, load_ms + first_ms,
           (long long)rvk_session_device_bytes(session));
    if (profile) {
        printf("profile (device span %.3f ms):\n", rvk_session_device_ms(session));
        for (int i = 0; i < rvk_session_profile_count(session); ++i) {
            const char* name;
            double ms;
            rvk_session_profile_entry(session, i, &name, &ms);
            printf("  %9.4f ms  %s\n", ms, name);
        }
    }
    for (int i = 0; i < n_outputs && i < n_out; ++i) {
        if (npy_write(outputs[i], out_info[i].dtype, out_info[i].shape, out_info[i].rank, out_data[i], out_bytes[i], err, sizeof err)) {
            fprintf(stderr, "rvk-run: %s\n", err);
            code = 1;
            goto done;
        }
    }
    if (repeat > 0) {
        double* times = malloc(sizeof(double) * (size_t)repeat);
        rvk_session_set_profiling(session, 0);
        INFER(); /* warm-up */
        for (int r = 0; r < repeat && !st; ++r) {
            t0 = now_ms();
            INFER();
            times[r] = now_ms() - t0;
        }
        rvk_session_set_profiling(session, 1);
        if (st) {
            code = fail("running", st);
        } else {
            qsort(times, (size_t)repeat, sizeof(double), compare);
            double median = repeat % 2 ? times[repeat / 2] : 0.5 * (times[repeat / 2 - 1] + times[repeat / 2]);
            printf("median %.4f ms per inference (%d runs, min %.4f, max %.4f)\n", median, repeat, times[0], times[repeat - 1]);
        }
        free(times);
    }
done:
    for (int i = 0; i < n_out; ++i) free(out_data[i]);
    free(out_data);
    free(out_bytes);
    free(out_info);
    for (int i = 0; i < n_inputs; ++i) npy_free(&arrays[i]);
    rvk_session_destroy(session);
    return code;
}

int main(int argc, char** argv) {
    int code = run_model(argc, argv);
    rvk_leak_check(); /* the session destroyed, the drivers still loaded */
    return code;
}
