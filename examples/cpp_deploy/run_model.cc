// Run a library written by `relax-vk build MODEL --runtime tvm -o model.so` (or
// relax_vk.deploy.export_library) with TVM's C++ API: load it, start the Relax VM with one device
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

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace ffi = tvm::ffi;

namespace {

struct CPUAlloc {  // host memory for inputs and for outputs copied back
  void AllocData(DLTensor* t) { t->data = std::calloc(ffi::GetDataSize(*t), 1); }
  void FreeData(DLTensor* t) { std::free(t->data); }
};

constexpr int kNaiveAllocator = 1;   // TVM's allocator types (relax.VirtualMachine.NAIVE_ALLOCATOR)
constexpr int kPooledAllocator = 2;  // ... and POOLED_ALLOCATOR

struct VDevice {
  std::string kind;
  int id;
  std::string scope;
};

// The VDevice table relax_vk records in the executable ("relax_vk.vdevices=KIND:ID:SCOPE;...",
// relax_vk/passes/lower/record_vdevices.py), read from the executable's statistics.
std::vector<VDevice> VDevices(const ffi::Module& executable) {
  std::string stats = executable->GetFunction("stats").value()().cast<ffi::String>();
  const std::string prefix = "relax_vk.vdevices=";
  size_t at = stats.find(prefix);
  if (at == std::string::npos) {
    std::fprintf(stderr, "the library has no relax_vk VDevice table (not built by relax_vk)\n");
    std::exit(2);
  }
  at += prefix.size();
  size_t end = stats.find('"', at);
  std::stringstream items(stats.substr(at, end - at));
  std::vector<VDevice> out;
  for (std::string item; std::getline(items, item, ';');) {
    if (item.empty()) continue;
    size_t a = item.find(':'), b = item.find(':', a + 1);
    out.push_back({item.substr(0, a), std::atoi(item.substr(a + 1, b - a - 1).c_str()), item.substr(b + 1)});
  }
  return out;
}

std::vector<int64_t> ParseShape(const std::string& text) {
  std::vector<int64_t> shape;
  std::stringstream dims(text);
  for (std::string d; std::getline(dims, d, ',');) shape.push_back(std::atoll(d.c_str()));
  return shape;
}

void Print(int k, const ffi::Tensor& out) {
  ffi::Tensor host = out;
  if (out.device().device_type != kDLCPU) {  // copy a device output back to the host
    host = ffi::Tensor::FromNDAlloc(CPUAlloc(), out.shape(), out.dtype(), DLDevice{kDLCPU, 0});
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
  ffi::Module vm = executable->GetFunction("vm_load_executable").value()().cast<ffi::Module>();

  // one device per VDevice (in index order), then the CPU; TVM's naive allocator where the model
  // holds textures (relax_vk/deploy.py says why: the pooled one can hand a freed image to a buffer)
  std::vector<VDevice> vdevices = VDevices(executable);
  int allocator = kPooledAllocator;
  for (const VDevice& v : vdevices) {
    if (v.scope.find("texture") != std::string::npos) allocator = kNaiveAllocator;
  }
  std::vector<ffi::Any> init;
  for (const VDevice& v : vdevices) {
    bool cpu = v.kind == "llvm" || v.kind == "c";
    init.push_back(cpu ? kDLCPU : gpu_type);
    init.push_back(cpu ? 0 : gpu_id + v.id);
    init.push_back(allocator);
  }
  if (init.empty()) {  // no VDevices (a CPU build): DEVICE, then the CPU
    init.insert(init.end(), {ffi::Any(gpu_type), ffi::Any(gpu_id), ffi::Any(kPooledAllocator)});
  }
  init.insert(init.end(), {ffi::Any(static_cast<int>(kDLCPU)), ffi::Any(0), ffi::Any(kPooledAllocator)});
  DLDevice first_device{static_cast<DLDeviceType>(init[0].cast<int>()), init[1].cast<int>()};
  std::vector<ffi::AnyView> init_args(init.begin(), init.end());
  ffi::Any ignored;
  vm->GetFunction("vm_initialization").value().CallPacked(init_args.data(), init_args.size(), &ignored);

  std::vector<ffi::Any> inputs;
  for (int k = 3; k < argc; ++k) {
    ffi::Tensor x = ffi::Tensor::FromNDAlloc(CPUAlloc(), ffi::Shape(ParseShape(argv[k])), DLDataType{kDLFloat, 32, 1},
                                             DLDevice{kDLCPU, 0});
    float* data = static_cast<float*>(x.data_ptr());
    for (int64_t i = 0, n = x.shape().Product(); i < n; ++i) {
      data[i] = 0.5f * std::sin(0.001f * static_cast<float>(i) + static_cast<float>(k - 3));
    }
    if (first_device.device_type == kDLCPU) {
      inputs.push_back(x);
    } else {  // the VM's main takes its inputs on the VM's first device
      ffi::Tensor on_device = ffi::Function::GetGlobalRequired("runtime.TVMTensorAllocWithScope")(ffi::Shape(ParseShape(argv[k])), x.dtype(), first_device, nullptr)
                                  .cast<ffi::Tensor>();
      ffi::Function::GetGlobalRequired("runtime.TVMTensorCopyFromTo")(x, on_device);
      inputs.push_back(on_device);
    }
  }
  std::vector<ffi::AnyView> args(inputs.begin(), inputs.end());
  ffi::Any result;
  vm->GetFunction("main").value().CallPacked(args.data(), args.size(), &result);

  if (auto tensor = result.as<ffi::Tensor>()) {
    Print(0, *tensor);
  } else {
    int k = 0;
    for (const ffi::Any& item : result.cast<ffi::Array<ffi::Any>>()) Print(k++, item.cast<ffi::Tensor>());
  }
  return 0;
}
