package org.relaxvk.example;

/** A relax_vk model behind JNI (classifier_jni.c): what an Android app's Kotlin/Java side holds. */
public final class Classifier implements AutoCloseable {
    static {
        // on Android: System.loadLibrary("classifier_jni"); here the test passes the built file
        String path = System.getProperty("relaxvk.jni");
        if (path != null) System.load(path); else System.loadLibrary("classifier_jni");
    }

    private long handle;

    /** @param model the .rvk bytes (an asset); @param device "gpu", "pocl", "P:D" or null */
    public Classifier(byte[] model, String device) { handle = create(model, device); }

    public int inputElements() { return inputElements(handle); }
    public int classes() { return classes(handle); }
    /** The k best classes of one frame (float32, the model's input layout), best first. */
    public int[] topK(float[] frame, int k) { return topK(handle, frame, k); }

    @Override public void close() {
        if (handle != 0) destroy(handle);
        handle = 0;
    }

    private static native long create(byte[] model, String device);
    private static native int inputElements(long handle);
    private static native int classes(long handle);
    private static native int[] topK(long handle, float[] frame, int k);
    private static native void destroy(long handle);
}
