#include "classifier.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relax_vk/relax_vk.h"

struct classifier {
    rvk_session* session;
    rvk_tensor_info input, output;
    float* scores;
};

static void message(char* err, size_t errlen, const char* what, rvk_status st) {
    snprintf(err, errlen, "%s: %s: %s", what, rvk_status_name(st), rvk_last_error());
}

classifier* classifier_create(const void* model, size_t size, const char* device, char* err, size_t errlen) {
    rvk_artifact* artifact = NULL;
    classifier* c = calloc(1, sizeof *c);
    if (!c) return NULL;
    rvk_status st = rvk_artifact_open_memory(model, size, "model", &artifact);
    if (st != RVK_OK) {
        message(err, errlen, "loading the model", st);
        free(c);
        return NULL;
    }
    st = rvk_session_create(artifact, device, 0, &c->session);
    rvk_artifact_destroy(artifact); /* the session keeps what it needs */
    if (st == RVK_OK) st = rvk_session_input_info(c->session, 0, &c->input);
    if (st == RVK_OK) st = rvk_session_output_info(c->session, 0, &c->output);
    if (st != RVK_OK) {
        message(err, errlen, "creating the session", st);
        classifier_destroy(c);
        return NULL;
    }
    if (rvk_session_input_count(c->session) != 1 || strcmp(c->input.dtype, "float32") || strcmp(c->output.dtype, "float32")) {
        snprintf(err, errlen, "not an image classifier: %d inputs, input %s, output %s", rvk_session_input_count(c->session), c->input.dtype,
                 c->output.dtype);
        classifier_destroy(c);
        return NULL;
    }
    c->scores = malloc(sizeof(float) * (size_t)c->output.elements);
    return c;
}

void classifier_destroy(classifier* c) {
    if (!c) return;
    rvk_session_destroy(c->session);
    free(c->scores);
    free(c);
}

size_t classifier_input_elements(const classifier* c) { return (size_t)c->input.elements; }
size_t classifier_classes(const classifier* c) { return (size_t)c->output.elements; }

int classifier_top_k(classifier* c, const float* frame, int k, int* classes, float* scores, char* err, size_t errlen) {
    size_t n = (size_t)c->output.elements;
    rvk_status st = rvk_session_set_input(c->session, 0, frame, sizeof(float) * (size_t)c->input.elements, "float32", NULL, 0);
    if (st == RVK_OK) st = rvk_session_run(c->session);
    if (st == RVK_OK) st = rvk_session_get_output(c->session, 0, c->scores, sizeof(float) * n);
    if (st != RVK_OK) {
        snprintf(err, errlen, "%s: %s", rvk_status_name(st), rvk_last_error());
        return -1;
    }
    for (int j = 0; j < k; ++j) { /* k passes of selection: k is small */
        int best = -1;
        for (size_t i = 0; i < n; ++i) {
            int taken = 0;
            for (int m = 0; m < j; ++m) taken |= classes[m] == (int)i;
            if (!taken && (best < 0 || c->scores[i] > c->scores[best])) best = (int)i;
        }
        classes[j] = best;
        scores[j] = best >= 0 ? c->scores[best] : 0.0f;
    }
    return 0;
}
