// Run a library written by `relax-vk build MODEL --runtime tvm -o model.so` (or
// relax_vk.tvm_runtime.export_library) with TVM's C++ API: load it, start the Relax VM with one device
// per VDevice then the CPU, call `main`, print the outputs.
//
//   run_model model.so DEVICE SHAPE [SHAPE ...]
//     DEVICE  cpu | opencl | opencl:N      (the device of the model's GPU VDevices)
//     SHAPE   one float32 input each, e.g. 2,64,56,56; input k holds 0.5 * sin(0.001 * i + k)
//
// Output, one line per output: "output K shape D0,D1,.. sum S values V0 V1 .." (the first eight).
// Build: see README.md beside this file (tvm-ffi headers, libtvm_runtime and libtvm_ffi).
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/shape.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include "relax_vk_vm.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace ffi = tvm::ffi;

namespace {

void Print(int k, const ffi::Tensor& out) {
  ffi::Tensor host = out;
  if (out.device().device_type != kDLCPU) {  // copy a device output back to the host
    host = ffi::Tensor::FromNDAlloc(relax_vk::CPUAlloc(), out.shape(), out.dtype(), DLDevice{kDLCPU, 0});
    ffi::Function::GetGlobalRequired("runtime.TVMTensorCopyFromTo")(out, host);
  }
  std::printf("output %d shape ", k);
  ffi::ShapeView shape = host.shape();
  for (size_t i = 0; i < shape.size(); ++i) std::printf(i ? ",%lld" : "%lld", static_cast<long long>(shape[i]));
  if (host.dtype().code != kDLFloat || host.dtype().bits != 32) {
    std::printf(" (not float32: values not printed)\n");
    return;
  }
  const float* data = static_cast<const float*>(host.data_ptr());
  int64_t n = shape.Product();
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += data[i];
  std::printf(" sum %.9g values", sum);
  for (int64_t i = 0; i < n && i < 8; ++i) std::printf(" %.9g", data[i]);
  std::printf("\n");
}

}  // namespace

int Run(int argc, char** argv);

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const ffi::Error& err) {  // e.g. a runtime without OpenCL loading an OpenCL library
    std::fprintf(stderr, "error: %s\n", err.what());
    return 1;
  }
}

int Run(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s model.so cpu|opencl[:N] SHAPE [SHAPE ...]\n", argv[0]);
    return 2;
  }
  std::string device = argv[2];
  int gpu_type = device.rfind("opencl", 0) == 0 ? kDLOpenCL : kDLCPU;
  int gpu_id = device.find(':') == std::string::npos ? 0 : std::atoi(device.substr(device.find(':') + 1).c_str());

  ffi::Module executable = ffi::Module::LoadFromFile(argv[1]);  // the VM executable, host code and kernels
  // one device per VDevice (in index order), then the CPU; main with its images held (relax_vk_vm.h)
  DLDevice first_device;
  ffi::Module vm = relax_vk::StartVM(executable, gpu_type, gpu_id, &first_device);

  std::vector<ffi::Any> inputs;
  for (int k = 3; k < argc; ++k) {
    ffi::Tensor x = ffi::Tensor::FromNDAlloc(relax_vk::CPUAlloc(), ffi::Shape(relax_vk::ParseShape(argv[k])), DLDataType{kDLFloat, 32, 1},
                                             DLDevice{kDLCPU, 0});
    float* data = static_cast<float*>(x.data_ptr());
    for (int64_t i = 0, n = x.shape().Product(); i < n; ++i) {
      data[i] = 0.5f * std::sin(0.001f * static_cast<float>(i) + static_cast<float>(k - 3));
    }
    if (first_device.device_type == kDLCPU) {
      inputs.push_back(x);
    } else {  // the VM's main takes its inputs on the VM's first device
      ffi::Tensor on_device = ffi::Function::GetGlobalRequired("runtime.TVMTensorAllocWithScope")(ffi::Shape(relax_vk::ParseShape(argv[k])), x.dtype(), first_device, nullptr)
                                  .cast<ffi::Tensor>();
      ffi::Function::GetGlobalRequired("runtime.TVMTensorCopyFromTo")(x, on_device);
      inputs.push_back(on_device);
    }
  }
  std::vector<ffi::AnyView> args(inputs.begin(), inputs.end());
  ffi::Any result;
  relax_vk::Entry(vm, "main").CallPacked(args.data(), args.size(), &result);

  if (auto tensor = result.as<ffi::Tensor>()) {
    Print(0, *tensor);
  } else {
    int k = 0;
    for (const ffi::Any& item : result.cast<ffi::Array<ffi::Any>>()) Print(k++, item.cast<ffi::Tensor>());
  }
  return 0;
}
