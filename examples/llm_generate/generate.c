/* Text generation from a decoder artifact (relax-vk build MODEL_DIR -o model.rvk) through the C ABI
 * alone: what an app does to run a language model with relax_vk. The Python twin is
 * relax_vk.runtime.generate.Generator; greedy, this prints the same tokens. Sampled (--temperature
 * above 0), it processes the logits as the Python sampler does (temperature, top-k, top-p, in
 * transformers' order) and draws from its own seeded generator (splitmix64), so the same seed gives
 * the same tokens here, not the Python sampler's (numpy's draws).
 *
 *   llm_generate model.rvk --prompt-ids 3,17,5 --new-tokens 16 [--stop-ids 2] [--device D] [--json]
 *                [--temperature T --top-k K --top-p P --seed S]
 *
 * The artifact takes input_ids [1, S] and attention_mask [1, T] (S and T run-time dims: the tokens of
 * this call, and all the tokens the cache holds after it) and returns logits [1, S, V] (or [1, 1, V]
 * when built with logits="last"). Its key/value cache is the session's states: held on the device,
 * zeroed by rvk_session_reset_states, never passed by the caller. A prompt longer than S's bound is
 * run in chunks; the next token comes from the last row of logits. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "relax_vk/relax_vk.h"

static int fail(const char* what) {
    fprintf(stderr, "%s: %s\n", what, rvk_last_error());
    return 1;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The bounds of run-time dim `name`; 0 when the artifact has no such dim. */
static int dim_bounds(const rvk_session* s, const char* name, int64_t* min, int64_t* max) {
    for (int32_t i = 0; i < rvk_session_dim_count(s); ++i) {
        const char* n = NULL;
        int64_t value = 0;
        if (rvk_session_dim_info(s, i, &n, min, max, &value) == RVK_OK && strcmp(n, name) == 0) return 1;
    }
    return 0;
}

/* Writes `n` values into input `index` in its host dtype (int32 or int64), shape [1, n]. */
static rvk_status set_ids(rvk_session* s, int32_t index, const int64_t* values, int64_t n) {
    rvk_tensor_info info;
    rvk_status st = rvk_session_input_info(s, index, &info);
    if (st != RVK_OK) return st;
    int64_t shape[2] = {1, n};
    if (strcmp(info.dtype, "int64") == 0) return rvk_session_set_input(s, index, values, (size_t)n * 8, "int64", shape, 2);
    int32_t* narrow = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    if (!narrow) return RVK_ERROR_ARGUMENT;
    for (int64_t i = 0; i < n; ++i) narrow[i] = (int32_t)values[i];
    st = rvk_session_set_input(s, index, narrow, (size_t)n * 4, "int32", shape, 2);
    free(narrow);
    return st;
}

typedef struct {
    rvk_session* session;
    int64_t max_chunk, max_len, vocab, length;
    int64_t* ids;   /* the tokens of the current chunk */
    int64_t* mask;  /* ones, max_len of them */
    float* logits;  /* the last run's logits */
    size_t logits_capacity;
    /* sampling (relax_vk.runtime.sampling's order, transformers' warpers): temperature 0 is greedy */
    double temperature, top_p;
    int64_t top_k;
    uint64_t rng;   /* splitmix64 state, from --seed */
    double* scores; /* vocab of them: the processed scores, then the probabilities */
    int64_t* order; /* vocab of them: token ids by score */
} decoder;

static uint64_t next_random(uint64_t* state) { /* splitmix64 */
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static const double* sort_scores; /* (qsort's comparator has no context argument in C99) */
static int by_score(const void* a, const void* b) { /* ascending by score, then by id: a stable order */
    int64_t i = *(const int64_t*)a, j = *(const int64_t*)b;
    if (sort_scores[i] != sort_scores[j]) return sort_scores[i] < sort_scores[j] ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* The next token of one row of logits: the arg-max (the first of equal maxima, as numpy's), or a
 * draw after temperature, top-k (every logit below the k-th largest masked, ties kept) and top-p
 * (the tokens whose ascending cumulative probability is at most 1 - p masked, the most likely
 * kept), from the softmax of what is left. */
static int64_t choose(decoder* d, const float* last) {
    int64_t best = 0;
    for (int64_t v = 1; v < d->vocab; ++v)
        if (last[v] > last[best]) best = v;
    if (d->temperature == 0.0) return best;
    double* s = d->scores;
    for (int64_t v = 0; v < d->vocab; ++v) {
        s[v] = (double)(last[v] / (float)d->temperature); /* (in float32, as the Python sampler divides) */
        d->order[v] = v;
    }
    sort_scores = s;
    qsort(d->order, (size_t)d->vocab, sizeof(int64_t), by_score);
    if (d->top_k > 0 && d->top_k < d->vocab) {
        double kth = s[d->order[d->vocab - d->top_k]];
        for (int64_t v = 0; v < d->vocab; ++v)
            if (s[v] < kth) s[v] = -INFINITY;
    }
    double top = s[d->order[d->vocab - 1]], sum = 0.0;
    if (!isfinite(top)) return best; /* (a temperature so small that the largest logit overflows: greedy) */
    if (d->top_p < 1.0) {
        for (int64_t v = 0; v < d->vocab; ++v) sum += exp(s[v] - top);
        double cumulative = 0.0;
        for (int64_t r = 0; r < d->vocab - 1; ++r) { /* ascending; the most likely stays */
            int64_t v = d->order[r];
            cumulative += exp(s[v] - top) / sum;
            if (cumulative <= 1.0 - d->top_p) s[v] = -INFINITY;
        }
    }
    sum = 0.0;
    for (int64_t v = 0; v < d->vocab; ++v) sum += (s[v] = exp(s[v] - top));
    double u = (double)(next_random(&d->rng) >> 11) * 0x1.0p-53 * sum, cumulative = 0.0;
    for (int64_t v = 0; v < d->vocab; ++v) {
        cumulative += s[v];
        if (u < cumulative && s[v] > 0.0) return v;
    }
    return d->order[d->vocab - 1];
}

/* Runs `tokens` (n of them) after the cache's `length` tokens; *next: the token chosen from the last row. */
static int forward(decoder* d, const int64_t* tokens, int64_t n, int64_t* next) {
    for (int64_t start = 0; start < n; start += d->max_chunk) {
        int64_t chunk = n - start < d->max_chunk ? n - start : d->max_chunk;
        memcpy(d->ids, tokens + start, (size_t)chunk * sizeof(int64_t));
        if (set_ids(d->session, 0, d->ids, chunk) != RVK_OK) return fail("input_ids");
        if (set_ids(d->session, 1, d->mask, d->length + chunk) != RVK_OK) return fail("attention_mask");
        if (rvk_session_run(d->session) != RVK_OK) return fail("run");
        d->length += chunk;
        rvk_tensor_info out;
        if (rvk_session_output_info(d->session, 0, &out) != RVK_OK) return fail("logits");
        if (strcmp(out.dtype, "float32") != 0 || out.elements < d->vocab) {
            fprintf(stderr, "logits: %s, %lld elements; expected float32 rows of %lld\n", out.dtype, (long long)out.elements, (long long)d->vocab);
            return 1;
        }
        size_t bytes = (size_t)out.elements * sizeof(float);
        if (bytes > d->logits_capacity) {
            float* grown = realloc(d->logits, bytes);
            if (!grown) return fprintf(stderr, "out of memory\n"), 1;
            d->logits = grown;
            d->logits_capacity = bytes;
        }
        if (rvk_session_get_output(d->session, 0, d->logits, bytes) != RVK_OK) return fail("logits");
        if (start + chunk >= n) *next = choose(d, d->logits + (out.elements - d->vocab));
    }
    return 0;
}

static int parse_ids(const char* text, int64_t** out, int64_t* n) {
    size_t cap = 16;
    *n = 0;
    *out = malloc(cap * sizeof(int64_t));
    for (const char* p = text; *out && *p;) {
        char* end = NULL;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0) return 0;
        if ((size_t)*n == cap) {
            int64_t* grown = realloc(*out, (cap *= 2) * sizeof(int64_t));
            if (!grown) return 0;
            *out = grown;
        }
        (*out)[(*n)++] = v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return 0;
    }
    return *out && *n > 0;
}

static int is_stop(int64_t token, const int64_t* stops, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        if (stops[i] == token) return 1;
    return 0;
}

int main(int argc, char** argv) {
    const char *path = NULL, *device = NULL, *prompt_text = NULL, *stop_text = NULL;
    long new_tokens = 16;
    int json = 0;
    double temperature = 0.0, top_p = 1.0;
    long top_k = 0;
    unsigned long long seed = 0;
    char* end = NULL;
    int bad_number = 0, sampling = 0; /* sampling: a sampling flag was given (the record then says how) */
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) device = argv[++i];
        else if (strcmp(argv[i], "--prompt-ids") == 0 && i + 1 < argc) prompt_text = argv[++i];
        else if (strcmp(argv[i], "--new-tokens") == 0 && i + 1 < argc) new_tokens = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--stop-ids") == 0 && i + 1 < argc) stop_text = argv[++i];
        else if (strcmp(argv[i], "--json") == 0) json = 1;
        else if (strcmp(argv[i], "--temperature") == 0 && i + 1 < argc && ++sampling) temperature = strtod(argv[++i], &end), bad_number |= *end || !(temperature >= 0.0);
        else if (strcmp(argv[i], "--top-k") == 0 && i + 1 < argc && ++sampling) top_k = strtol(argv[++i], &end, 10), bad_number |= *end || top_k < 1;
        else if (strcmp(argv[i], "--top-p") == 0 && i + 1 < argc && ++sampling) top_p = strtod(argv[++i], &end), bad_number |= *end || !(top_p > 0.0 && top_p <= 1.0);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc && ++sampling) seed = strtoull(argv[++i], &end, 10), bad_number |= *end;
        else path = argv[i];
    }
    int64_t *prompt = NULL, *stops = NULL;
    int64_t prompt_n = 0, stops_n = 0;
    if (!path || !prompt_text || new_tokens < 1 || bad_number || !parse_ids(prompt_text, &prompt, &prompt_n) ||
        (stop_text && !parse_ids(stop_text, &stops, &stops_n))) {
        fprintf(stderr, "usage: llm_generate model.rvk --prompt-ids 1,2,3 [--new-tokens N (>= 1)] [--stop-ids 2,3] [--device D] [--json]\n"
                        "                    [--temperature T (>= 0; 0: greedy) --top-k K (>= 1) --top-p P (in (0, 1]) --seed S]\n");
        free(prompt);
        free(stops);
        return 2;
    }
    rvk_artifact* artifact = NULL;
    decoder d = {0};
    d.temperature = temperature, d.top_p = top_p, d.top_k = top_k, d.rng = seed;
    int rc = 1;
    if (rvk_artifact_open_file(path, &artifact) != RVK_OK) {
        rc = fail(path);
        goto done;
    }
    if (rvk_session_create(artifact, device, 0, &d.session) != RVK_OK) {
        rc = fail("session");
        goto done;
    }
    rvk_tensor_info ids_info, mask_info, logits_info;
    int64_t min = 0;
    if (rvk_session_input_count(d.session) != 2 || rvk_session_input_info(d.session, 0, &ids_info) != RVK_OK ||
        rvk_session_input_info(d.session, 1, &mask_info) != RVK_OK || strcmp(ids_info.name, "input_ids") != 0 ||
        strcmp(mask_info.name, "attention_mask") != 0 || !dim_bounds(d.session, "S", &min, &d.max_chunk) ||
        !dim_bounds(d.session, "T", &min, &d.max_len) || rvk_session_output_info(d.session, 0, &logits_info) != RVK_OK) {
        fprintf(stderr, "%s: not a decoder artifact (inputs input_ids [1, S] and attention_mask [1, T]); build one from a checkpoint directory: relax-vk build MODEL_DIR -o model.rvk\n", path);
        goto done;
    }
    d.vocab = logits_info.shape[logits_info.rank - 1];
    for (int64_t i = 0; i < prompt_n; ++i)
        if (prompt[i] >= d.vocab) {
            fprintf(stderr, "token id %lld is outside the vocabulary (0..%lld)\n", (long long)prompt[i], (long long)d.vocab - 1);
            goto done;
        }
    if (prompt_n + new_tokens - 1 > d.max_len) {
        fprintf(stderr, "a prompt of %lld and %ld new tokens need %lld cache rows; the artifact holds %lld (rebuild with a larger --dim T)\n",
                (long long)prompt_n, new_tokens, (long long)(prompt_n + new_tokens - 1), (long long)d.max_len);
        goto done;
    }
    d.ids = malloc((size_t)d.max_chunk * sizeof(int64_t));
    d.mask = malloc((size_t)d.max_len * sizeof(int64_t));
    d.scores = malloc((size_t)d.vocab * sizeof(double));
    d.order = malloc((size_t)d.vocab * sizeof(int64_t));
    int64_t* tokens = malloc((size_t)new_tokens * sizeof(int64_t));
    if (!d.ids || !d.mask || !d.scores || !d.order || !tokens) {
        free(tokens);
        fprintf(stderr, "out of memory\n");
        goto done;
    }
    for (int64_t i = 0; i < d.max_len; ++i) d.mask[i] = 1;
    if (rvk_session_reset_states(d.session) != RVK_OK) {
        free(tokens);
        rc = fail("reset");
        goto done;
    }
    double t0 = now();
    int bad = forward(&d, prompt, prompt_n, &tokens[0]);
    double t1 = now();
    long made = 1;  /* tokens made: new_tokens, or fewer when a stop token comes (it ends the tokens) */
    int stopped = is_stop(tokens[0], stops, stops_n);
    for (; !bad && !stopped && made < new_tokens; ++made) {
        bad = forward(&d, &tokens[made - 1], 1, &tokens[made]);
        stopped = !bad && is_stop(tokens[made], stops, stops_n);
    }
    new_tokens = made;
    double t2 = now();
    if (!bad) {
        double prefill = t1 - t0, decode = t2 - t1;
        if (json) printf("{\"tokens\": [");
        else printf("tokens:");
        for (long k = 0; k < new_tokens; ++k) printf("%s%lld", k ? (json ? ", " : " ") : (json ? "" : " "), (long long)tokens[k]);
        if (json) {
            printf("], \"prompt_tokens\": %lld, \"prefill_tokens_per_s\": %.6g, \"decode_tokens_per_s\": ", (long long)prompt_n, prefill > 0 ? prompt_n / prefill : 0.0);
            if (new_tokens > 1 && decode > 0) printf("%.6g", (new_tokens - 1) / decode);
            else printf("null");
            printf(", \"prefill_seconds\": %.6g, \"decode_seconds\": %.6g, \"finish_reason\": \"%s\"", prefill, decode,
                   stopped ? "stop" : "length");
            if (sampling) { /* (as relax-vk generate --json records its sampler) */
                printf(", \"sampling\": {\"temperature\": %.6g, \"top_k\": ", temperature);
                if (top_k) printf("%ld", top_k);
                else printf("null");
                printf(", \"top_p\": ");
                if (top_p < 1.0) printf("%.6g", top_p);
                else printf("null");
                printf(", \"seed\": %llu}", seed);
            }
            printf("}\n");
        } else {
            printf("\nprefill: %lld tokens in %.3f ms", (long long)prompt_n, 1e3 * prefill);
            if (new_tokens > 1) printf("; decode: %.1f tokens/s", (new_tokens - 1) / decode);
            printf("\n");
        }
        rc = 0;
    }
    free(tokens);
done:
    free(prompt);
    free(stops);
    free(d.ids);
    free(d.mask);
    free(d.scores);
    free(d.order);
    free(d.logits);
    if (d.session) rvk_session_destroy(d.session);
    if (artifact) rvk_artifact_destroy(artifact);
    return rc;
}
