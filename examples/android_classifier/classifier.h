/* The part of an Android app that touches relax_vk: one classifier made from the model's bytes (an
 * AAsset's buffer on a phone), classify() per camera frame. Plain C; the JNI glue (README) only
 * converts a jbyteArray / direct ByteBuffer to these pointers and a jlong handle. */
#ifndef RVK_EXAMPLE_CLASSIFIER_H
#define RVK_EXAMPLE_CLASSIFIER_H

#include <stddef.h>
#include <stdint.h>

typedef struct classifier classifier;

/* NULL on failure, with the runtime's message in err. `model` is copied. */
classifier* classifier_create(const void* model, size_t size, const char* device, char* err, size_t errlen);
void classifier_destroy(classifier* c);
/* the input's element count (the float32 frame classify() takes) and the number of classes */
size_t classifier_input_elements(const classifier* c);
size_t classifier_classes(const classifier* c);
/* Runs one frame; writes the k best classes and their scores (best first). 0 on success. */
int classifier_top_k(classifier* c, const float* frame, int k, int* classes, float* scores, char* err, size_t errlen);

#endif
