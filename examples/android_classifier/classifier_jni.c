/* The JNI glue of the Android-shaped classifier: org.relaxvk.example.Classifier's native methods.
 * A classifier is a Java `long`; arrays are copied in and out; failures throw RuntimeException with
 * the runtime's message. The same file builds into the app's JNI library with the NDK. */
#include <jni.h>
#include <stdint.h>
#include <stdlib.h>

#include "classifier.h"

static void throw_runtime(JNIEnv* env, const char* message) {
    jclass cls = (*env)->FindClass(env, "java/lang/RuntimeException");
    if (cls) (*env)->ThrowNew(env, cls, message);
}

JNIEXPORT jlong JNICALL Java_org_relaxvk_example_Classifier_create(JNIEnv* env, jclass cls, jbyteArray model, jstring device) {
    (void)cls;
    char err[2048];
    jsize n = (*env)->GetArrayLength(env, model);
    jbyte* bytes = (*env)->GetByteArrayElements(env, model, NULL);
    const char* name = device ? (*env)->GetStringUTFChars(env, device, NULL) : NULL;
    if (!bytes || (device && !name)) return 0; /* an OutOfMemoryError is pending */
    classifier* c = classifier_create(bytes, (size_t)n, name, err, sizeof err); /* copies the bytes */
    (*env)->ReleaseByteArrayElements(env, model, bytes, JNI_ABORT);
    if (name) (*env)->ReleaseStringUTFChars(env, device, name);
    if (!c) throw_runtime(env, err);
    return (jlong)(intptr_t)c;
}

JNIEXPORT jint JNICALL Java_org_relaxvk_example_Classifier_inputElements(JNIEnv* env, jclass cls, jlong handle) {
    (void)env, (void)cls;
    return (jint)classifier_input_elements((classifier*)(intptr_t)handle);
}

JNIEXPORT jint JNICALL Java_org_relaxvk_example_Classifier_classes(JNIEnv* env, jclass cls, jlong handle) {
    (void)env, (void)cls;
    return (jint)classifier_classes((classifier*)(intptr_t)handle);
}

/* the k best classes of one frame, best first */
JNIEXPORT jintArray JNICALL Java_org_relaxvk_example_Classifier_topK(JNIEnv* env, jclass cls, jlong handle, jfloatArray frame, jint k) {
    (void)cls;
    classifier* c = (classifier*)(intptr_t)handle;
    if ((size_t)(*env)->GetArrayLength(env, frame) != classifier_input_elements(c)) {
        throw_runtime(env, "the frame does not have the model's input size");
        return NULL;
    }
    if (k < 1 || (size_t)k > classifier_classes(c)) k = (jint)classifier_classes(c);
    int* classes = malloc(sizeof(int) * (size_t)k);
    float* scores = malloc(sizeof(float) * (size_t)k);
    jfloat* pixels = (*env)->GetFloatArrayElements(env, frame, NULL);
    char err[2048];
    int failed = !classes || !scores || !pixels || classifier_top_k(c, pixels, k, classes, scores, err, sizeof err);
    if (pixels) (*env)->ReleaseFloatArrayElements(env, frame, pixels, JNI_ABORT);
    jintArray out = NULL;
    if (failed) {
        throw_runtime(env, classes && scores && pixels ? err : "out of memory");
    } else if ((out = (*env)->NewIntArray(env, k))) {
        jint* values = malloc(sizeof(jint) * (size_t)k);
        for (int i = 0; values && i < k; ++i) values[i] = classes[i];
        if (values) (*env)->SetIntArrayRegion(env, out, 0, k, values);
        free(values);
    }
    free(classes);
    free(scores);
    return out;
}

JNIEXPORT void JNICALL Java_org_relaxvk_example_Classifier_destroy(JNIEnv* env, jclass cls, jlong handle) {
    (void)env, (void)cls;
    classifier_destroy((classifier*)(intptr_t)handle);
}
