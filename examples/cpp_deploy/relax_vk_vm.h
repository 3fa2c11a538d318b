// Starting TVM's Relax VM for a library relax_vk built, with TVM's C++ API (header-only; used by
// run_model.cc here and by benchmarks/tvm_vm_timing.cc):
//   VDevices(executable)      the VDevice table relax_vk records in the executable
//   StartVM(executable, ...)  TVM's allocator pools cleared (what VMs gone before left there), then
//                             the VM with one device per VDevice, then the CPU; per device the
//                             allocator relax_vk.load_vm picks (naive for texture VDevices: their
//                             images; pooled for the rest) -- relax_vk/tvm_runtime/ says why
//   Entry(vm, "main")         `main` with its images allocated once and held (relax_vk's
//                             HoistImageStorage: main__images / main__with_images), else `main`
//   CPUAlloc, ParseShape      host tensors (inputs, outputs copied back) and "1,3,224,224" shapes
#ifndef RELAX_VK_EXAMPLES_CPP_DEPLOY_RELAX_VK_VM_H_
#define RELAX_VK_EXAMPLES_CPP_DEPLOY_RELAX_VK_VM_H_

#include <tvm/ffi/any.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace relax_vk {

namespace ffi = tvm::ffi;

constexpr int kNaiveAllocator = 1;   // TVM's allocator types (relax.VirtualMachine.NAIVE_ALLOCATOR)
constexpr int kPooledAllocator = 2;  // ... and POOLED_ALLOCATOR

struct VDevice {
  std::string kind;
  int id;
  std::string scope;
};

// The VDevice table relax_vk records in the executable ("relax_vk.vdevices=KIND:ID:SCOPE;...",
// relax_vk/passes/lower/record_vdevices.py), read from the executable's statistics.
inline std::vector<VDevice> VDevices(const ffi::Module& executable) {
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

// The Relax VM of `executable`: one device per VDevice (GPU VDevices on `gpu_type`, device
// `gpu_id` + their id), then the CPU. `first_device` receives the VM's first device (where `main`
// takes its inputs).
inline ffi::Module StartVM(const ffi::Module& executable, int gpu_type, int gpu_id, DLDevice* first_device) {
  // free what earlier VMs left in TVM's allocator pools first, as relax_vk.load_vm does: a VM that
  // went returned its texture constants there, and a buffer of this one could be handed an image
  if (auto clear = ffi::Function::GetGlobal("vm.builtin.memory_manager.clear")) clear.value()();
  ffi::Module vm = executable->GetFunction("vm_load_executable").value()().cast<ffi::Module>();
  std::vector<ffi::Any> init;
  for (const VDevice& v : VDevices(executable)) {
    bool cpu = v.kind == "llvm" || v.kind == "c";
    init.push_back(cpu ? kDLCPU : gpu_type);
    init.push_back(cpu ? 0 : gpu_id + v.id);
    init.push_back(v.scope.find("texture") != std::string::npos ? kNaiveAllocator : kPooledAllocator);
  }
  if (init.empty()) {  // no VDevices (a CPU build): the device, then the CPU
    init.insert(init.end(), {ffi::Any(gpu_type), ffi::Any(gpu_id), ffi::Any(kPooledAllocator)});
  }
  init.insert(init.end(), {ffi::Any(static_cast<int>(kDLCPU)), ffi::Any(0), ffi::Any(kPooledAllocator)});
  *first_device = DLDevice{static_cast<DLDeviceType>(init[0].cast<int>()), init[1].cast<int>()};
  std::vector<ffi::AnyView> init_args(init.begin(), init.end());
  ffi::Any ignored;
  vm->GetFunction("vm_initialization").value().CallPacked(init_args.data(), init_args.size(), &ignored);
  return vm;
}

// `name` with its images held: relax_vk's HoistImageStorage adds NAME__images (allocates them) and
// NAME__with_images (NAME taking them as a last argument); the images are allocated here, once.
// Without them (`per_call_images`, or a build without images), NAME itself: images per call.
inline ffi::Function Entry(const ffi::Module& vm, const std::string& name, bool per_call_images = false) {
  ffi::Optional<ffi::Function> alloc = vm->GetFunction(name + "__images");
  ffi::Optional<ffi::Function> with_images = vm->GetFunction(name + "__with_images");
  if (per_call_images || !alloc.has_value() || !with_images.has_value()) return vm->GetFunction(name).value();
  ffi::Any images = alloc.value()();
  ffi::Function run = with_images.value();
  return ffi::Function::FromPacked([run, images](ffi::PackedArgs args, ffi::Any* rv) {
    std::vector<ffi::AnyView> all(args.data(), args.data() + args.size());
    all.push_back(images);
    run.CallPacked(all.data(), all.size(), rv);
  });
}

// Host memory for tvm::ffi::Tensor::FromNDAlloc: inputs, and outputs copied back.
struct CPUAlloc {
  void AllocData(DLTensor* t) { t->data = std::calloc(ffi::GetDataSize(*t), 1); }
  void FreeData(DLTensor* t) { std::free(t->data); }
};

// "1,3,224,224" -> {1, 3, 224, 224}
inline std::vector<int64_t> ParseShape(const std::string& text) {
  std::vector<int64_t> shape;
  std::stringstream dims(text);
  for (std::string d; std::getline(dims, d, ',');) shape.push_back(std::atoll(d.c_str()));
  return shape;
}

}  // namespace relax_vk

#endif  // RELAX_VK_EXAMPLES_CPP_DEPLOY_RELAX_VK_VM_H_
