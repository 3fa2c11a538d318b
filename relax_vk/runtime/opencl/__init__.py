"""OpenCL program binaries kept on disk (:mod:`.binary_cache`), for TVM's VM path (relax_vk.load_vm)."""
