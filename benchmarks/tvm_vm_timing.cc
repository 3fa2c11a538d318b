// Time a library relax_vk built (relax_vk.tvm_runtime.export_library) under TVM's C++ Relax VM, the way
// benchmarks/gpu_benchmark.py times relax_vk's own runtime: per run, the input uploaded, `main`
// run, the output read back (which waits for the device); median and min of REPEAT runs after
// WARMUP runs. benchmarks/tvm_vm_benchmark.py builds the libraries and checks the outputs.
//
//   tvm_vm_timing LIB INPUT.bin SHAPE [--repeat N] [--warmup N] [--device opencl:N] [--out OUT.bin]
//                 [--per-call-images]
//     INPUT.bin   float32 input of SHAPE (e.g. 1,3,224,224), raw
//     --out       write the first output there (raw float32), for tvm_vm_benchmark.py --check
//     --per-call-images   run `main` itself (TVM allocates its images on every call) instead of
//                 main with its images held (main__images / main__with_images)
//
// Prints one line: "LIB median_ms M min_ms m repeat N images held|per-call".
// Build against the wheels (as examples/cpp_deploy/Makefile): g++ -std=c++17 -O2 -I<tvm_ffi include>
//   -Iexamples/cpp_deploy benchmarks/tvm_vm_timing.cc -ltvm_runtime -ltvm_ffi; TVM's OpenCL runtime
//   comes with libtvm_runtime (built with USE_OPENCL=ON) or is preloaded as its own library.
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/shape.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "relax_vk_vm.h"

namespace ffi = tvm::ffi;

namespace {

ffi::Tensor FirstOutput(const ffi::Any& result) {
  if (auto tensor = result.as<ffi::Tensor>()) return *tensor;
  return result.cast<ffi::Array<ffi::Any>>()[0].cast<ffi::Tensor>();
}

int Run(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s LIB INPUT.bin SHAPE [--repeat N] [--warmup N] [--device opencl:N] [--out OUT.bin] [--per-call-images]\n", argv[0]);
    return 2;
  }
  int repeat = 100, warmup = 10, gpu_id = 0;
  bool per_call = false;
  std::string out_path;
  for (int i = 4; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--repeat" && i + 1 < argc) repeat = std::atoi(argv[++i]);
    else if (a == "--warmup" && i + 1 < argc) warmup = std::atoi(argv[++i]);
    else if (a == "--out" && i + 1 < argc) out_path = argv[++i];
    else if (a == "--device" && i + 1 < argc) {
      std::string d = argv[++i];
      gpu_id = d.find(':') == std::string::npos ? 0 : std::atoi(d.substr(d.find(':') + 1).c_str());
    } else if (a == "--per-call-images") per_call = true;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  ffi::Module executable = ffi::Module::LoadFromFile(argv[1]);
  DLDevice device;
  ffi::Module vm = relax_vk::StartVM(executable, kDLOpenCL, gpu_id, &device);
  ffi::Function main_fn = relax_vk::Entry(vm, "main", per_call);

  ffi::Shape shape(relax_vk::ParseShape(argv[3]));
  DLDataType f32{kDLFloat, 32, 1};
  ffi::Tensor host_in = ffi::Tensor::FromNDAlloc(relax_vk::CPUAlloc(), shape, f32, DLDevice{kDLCPU, 0});
  FILE* f = std::fopen(argv[2], "rb");
  size_t want = ffi::GetDataSize(host_in.shape().Product(), host_in.dtype());
  if (f == nullptr || std::fread(host_in.data_ptr(), 1, want, f) != want) {
    std::fprintf(stderr, "cannot read %zu bytes of input from %s\n", want, argv[2]);
    return 2;
  }
  std::fclose(f);
  ffi::Function alloc = ffi::Function::GetGlobalRequired("runtime.TVMTensorAllocWithScope");
  ffi::Function copy = ffi::Function::GetGlobalRequired("runtime.TVMTensorCopyFromTo");
  ffi::Tensor dev_in = alloc(shape, f32, device, nullptr).cast<ffi::Tensor>();
  ffi::Optional<ffi::Tensor> host_out;

  auto once = [&]() {
    copy(host_in, dev_in);  // upload
    ffi::Tensor out = FirstOutput(main_fn(dev_in));
    if (!host_out.has_value()) host_out = ffi::Tensor::FromNDAlloc(relax_vk::CPUAlloc(), out.shape(), out.dtype(), DLDevice{kDLCPU, 0});
    copy(out, host_out.value());  // download: TVM's OpenCL runtime waits for the queue (clFinish)
  };
  for (int i = 0; i < warmup; ++i) once();
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    once();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted.size() % 2 ? sorted[sorted.size() / 2] : 0.5 * (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]);
  std::printf("%s median_ms %.4f min_ms %.4f repeat %d images %s\n", argv[1], median, sorted.front(), repeat,
              per_call ? "per-call" : "held");
  if (!out_path.empty() && host_out.has_value()) {
    FILE* o = std::fopen(out_path.c_str(), "wb");
    std::fwrite(host_out.value().data_ptr(), 1, ffi::GetDataSize(host_out.value().shape().Product(), host_out.value().dtype()), o);
    std::fclose(o);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const ffi::Error& err) {
    std::fprintf(stderr, "error: %s\n", err.what());
    return 1;
  }
}
