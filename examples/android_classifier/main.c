/* Desktop driver of the Android-shaped classifier: reads the model into memory (as an app reads its
 * asset), makes a frame (a raw little-endian float32 file of the input's size, or a fixed synthetic
 * pattern), runs it and prints the top-5 classes.
 *
 *   android_classifier model.rvk [--device D] [--frame frame.f32] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classifier.h"

static void* read_file(const char* path, size_t* size) {
    FILE* f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void* data = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
        free(data);
        data = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return data;
}

int main(int argc, char** argv) {
    const char *model_path = NULL, *device = NULL, *frame_path = NULL;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) device = argv[++i];
        else if (strcmp(argv[i], "--frame") == 0 && i + 1 < argc) frame_path = argv[++i];
        else model_path = argv[i];
    }
    if (!model_path) {
        fprintf(stderr, "usage: android_classifier model.rvk [--device D] [--frame frame.f32]\n");
        return 2;
    }
    size_t size = 0;
    void* model = read_file(model_path, &size);
    if (!model) {
        fprintf(stderr, "%s: cannot read\n", model_path);
        return 1;
    }
    char err[2048];
    classifier* c = classifier_create(model, size, device, err, sizeof err);
    free(model);
    if (!c) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    size_t n = classifier_input_elements(c);
    float* frame = NULL;
    if (frame_path) {
        size_t bytes = 0;
        frame = read_file(frame_path, &bytes);
        if (!frame || bytes != n * sizeof(float)) {
            fprintf(stderr, "%s: expected %zu float32 values\n", frame_path, n);
            classifier_destroy(c);
            return 1;
        }
    } else {
        frame = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; ++i) frame[i] = (float)sin(0.01 * (double)i);
    }
    int classes[5];
    float scores[5];
    int k = classifier_classes(c) < 5 ? (int)classifier_classes(c) : 5;
    int code = 0;
    if (classifier_top_k(c, frame, k, classes, scores, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        code = 1;
    } else {
        printf("top-%d of %zu classes:\n", k, classifier_classes(c));
        for (int j = 0; j < k; ++j) printf("  class %d: %.6f\n", classes[j], scores[j]);
    }
    free(frame);
    classifier_destroy(c);
    return code;
}
