package org.relaxvk.example;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Paths;

/** Desktop driver of the JNI classifier: java -Drelaxvk.jni=libclassifier_jni.so ... Main model.rvk frame.f32 [device] */
public final class Main {
    public static void main(String[] args) throws Exception {
        byte[] model = Files.readAllBytes(Paths.get(args[0]));
        ByteBuffer raw = ByteBuffer.wrap(Files.readAllBytes(Paths.get(args[1]))).order(ByteOrder.LITTLE_ENDIAN);
        try (Classifier c = new Classifier(model, args.length > 2 ? args[2] : null)) {
            float[] frame = new float[c.inputElements()];
            raw.asFloatBuffer().get(frame);
            int[] top = c.topK(frame, 5);
            StringBuilder line = new StringBuilder("top-5:");
            for (int k : top) line.append(' ').append(k);
            System.out.println(line);
        }
    }
}
