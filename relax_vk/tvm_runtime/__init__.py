"""TVM's runtime path: an executable, its library, and a VM with the right devices (relax_vk's own
runtime, which needs no TVM, is :mod:`relax_vk.runtime`).

* :func:`compile` -- a ``tvm.runtime.Executable`` for an OpenCL target: :func:`relax_vk.build`'s
  executable (the same plan, kernels and tuning database; ``tvm.compile`` with
  ``relax_pipeline=relax_vk.get_pipeline(target)`` and ``tir_pipeline="relax_vk.texture"``), for
  a host of your choice (``host="aarch64-linux-android"``). An ``llvm`` target compiles with TVM's
  default CPU pipeline (no textures): a deployment that runs on any machine, for testing.
* :func:`export_library` -- the executable as one shared library (VM program, host code and the
  OpenCL kernels), written atomically, cross-compiled for the host's triple.
* :func:`load_vm` -- a ``relax.VirtualMachine`` over an executable or an exported library with one
  device per VDevice (read from the executable's table, :mod:`relax_vk.passes.lower.record_vdevices`)
  and then the CPU; a clear :class:`RuntimeUnavailableError` when this TVM runtime cannot run the
  executable's devices (the PyPI wheel has no OpenCL runtime).

TVM's OpenCL runtime allocates relax_vk's texture storages as images
(:mod:`relax_vk.passes.lower.plan_texture_storage`). Its allocator (``OpenCLPooledAllocator``, which
TVM's OpenCL runtime hands out for the naive and the pooled type alike) never takes a VM storage
back from its pool for an image, and pools every freed storage by bytes, images with buffers: a
later buffer of the same page-rounded size can be handed an image (seen on pocl: the second run of
rfc-conv2d copied its input into a pooled image, ``CL_INVALID_VALUE``). The same happens to a VM's
texture constants when the VM goes: TVM allocates them with the VM's allocator (``Allocator::Empty``)
and frees them into the pooled allocator's pool, so the next VM's buffers or constants of the same
page-rounded size can be images (seen on pocl: ViT after ConvNeXt, wrong outputs or
``CL_INVALID_VALUE``, with or without relax_vk's changes). Hence:

* images are allocated once per VM (:mod:`relax_vk.passes.lower.hoist_image_storage`,
  :class:`VirtualMachine`), from the texture VDevice's allocator, which :func:`load_vm` makes the
  naive one: its pool (where an image goes when the VM releases it) is never allocated from;
* buffers come from the ``"global"`` VDevice's pooled allocator, in whole pages
  (:mod:`relax_vk.passes.lower.round_buffer_storage`), so each call reuses the last call's buffers;
  a byte storage that TVM's planner made on a texture VDevice (a buffer reusing a texture's token)
  is moved to the ``"global"`` VDevice first (:mod:`relax_vk.passes.lower.place_buffer_storage`):
  the naive allocator would free it into its unused pool, a new buffer on every call;
* :func:`load_vm`, and :class:`VirtualMachine` when it goes, clear TVM's allocator pools
  (:func:`clear_allocator_pools`), so no VM is handed what an earlier one left (a VM that other
  objects still hold is cleared after when the next ``load_vm`` runs).

:mod:`.program_cache` keeps TVM's OpenCL program binaries on disk (``load_vm(binary_cache=...)``).

``docs/tvm_runtime.md`` has the source lines and the measurements.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Dict, List, Optional, Sequence

import tvm
from tvm import relax

from ..core import target as _target
from ..core.errors import UnsupportedError
from ..core.options import ScopeOptions
from ..core.registry import OpRegistry
from ..passes.lower.hoist_image_storage import IMAGES, WITH_IMAGES
from ..passes.lower.record_vdevices import FUNCTION as VDEVICE_FUNCTION
from ..passes.lower.record_vdevices import RecordVDevices
from ..passes.lower.record_vdevices import decode as decode_vdevices

#: host triples ``--host`` knows a default C++ compiler for (others need ``cc``)
HOST_COMPILERS = {"aarch64-linux-gnu": "aarch64-linux-gnu-g++", "x86_64-linux-gnu": "x86_64-linux-gnu-g++"}
_CPU_KINDS = ("llvm", "c")


class RuntimeUnavailableError(UnsupportedError):
    """This TVM runtime cannot run the executable's devices (e.g. no OpenCL in the PyPI wheel)."""


def host_target(host: "str | dict | tvm.target.Target | None") -> Optional[tvm.target.Target]:
    """An ``llvm`` host target for a triple (``"aarch64-linux-android"``), a target dict or a Target."""
    if host is None or isinstance(host, tvm.target.Target):
        return host
    if isinstance(host, dict):
        return tvm.target.Target(host)
    return tvm.target.Target({"kind": "llvm", "mtriple": str(host)})


def _is_cpu(target) -> bool:
    if isinstance(target, str):
        return target in _CPU_KINDS or target == "cpu"
    return isinstance(target, tvm.target.Target) and target.kind.name in _CPU_KINDS


def compile(  # noqa: A001  (relax_vk.compile, beside tvm.compile)
    mod: tvm.IRModule,
    target: "tvm.target.Target | str | None" = None,
    *,
    host: "str | dict | tvm.target.Target | None" = None,
    registry: Optional[OpRegistry] = None,
    options: Optional[ScopeOptions] = None,
) -> tvm.runtime.Executable:
    """``mod`` compiled for TVM's Relax VM (module docstring). ``target``: an OpenCL target (a
    ``Target``, ``"opencl"``, None for the default) or ``"llvm"``; ``host``: the VM's host (a
    triple, e.g. ``"aarch64-linux-gnu"``; default: this machine). Vulkan builds run relax_vk's WGSL
    through its own runtime only: TVM cannot compile these kernels for Vulkan."""
    hosted = host_target(host)
    if _is_cpu(target):
        tgt = hosted if hosted is not None else tvm.target.Target({"kind": "llvm"})
        pipeline = tvm.transform.Sequential([relax.get_default_pipeline(tgt), RecordVDevices()])
        return tvm.compile(mod, tgt, relax_pipeline=pipeline)
    from ..compiler import UnsupportedTargetError, build

    try:
        tgt = _target.resolve(target)
    except ValueError as err:
        raise UnsupportedTargetError(f"relax_vk.compile: {err}") from None
    if tgt.kind.name != "opencl":
        raise UnsupportedTargetError(
            f"relax_vk.compile: TVM's VM cannot run relax_vk's {tgt.kind.name} kernels (TVM has no codegen for them); "
            "compile for OpenCL, or run the Vulkan build with relax_vk's own runtime (relax_vk.build + relax_vk.runtime)"
        )
    if options is not None and options.texel_dtype != "float32":
        raise UnsupportedError(
            "relax_vk.compile: half-precision texels (ScopeOptions precision='fp16') are for relax_vk's own runtime; "
            "TVM's VM allocates textures in the tensors' own dtype"
        )
    if hosted is not None:
        tgt = tvm.target.Target(tgt, host=hosted)
    return build(mod, tgt, registry=registry, options=options).executable


def library_compiler(host: Optional[str], cc: Optional[str]):
    """TVM's ``fcompile`` for a host triple: ``cc`` (a C++ compiler command), else the NDK compiler
    in ``TVM_NDK_CC`` for Android triples, else :data:`HOST_COMPILERS`; None: this machine's."""
    from tvm.support import cc as tvm_cc

    if cc is None and host is None:
        return None
    if cc is None and "android" in host:
        cc = os.environ.get("TVM_NDK_CC")
        if not cc:
            raise RuntimeUnavailableError(
                f"exporting for {host} needs the Android NDK's clang++: set TVM_NDK_CC (e.g. "
                "$ANDROID_NDK/toolchains/llvm/prebuilt/linux-x86_64/bin/aarch64-linux-android28-clang++) or pass --cc"
            )
    if cc is None:
        cc = HOST_COMPILERS.get(host)
        if cc is None:
            raise RuntimeUnavailableError(f"no default C++ compiler for host {host!r}; pass cc= (--cc) with one that targets it")
    if shutil.which(cc.split()[0]) is None:
        hint = " (Debian: apt-get install g++-aarch64-linux-gnu)" if cc.startswith("aarch64-linux-gnu") else ""
        raise RuntimeUnavailableError(f"C++ compiler {cc!r} for host {host or 'this machine'} is not installed{hint}")
    return tvm_cc.cross_compiler(cc, options=["-shared", "-fPIC"])


def export_library(executable: tvm.runtime.Executable, path: str, host: Optional[str] = None, cc: Optional[str] = None) -> None:
    """Write ``executable`` as one shared library at ``path`` (atomically: a failed export leaves
    no file, an existing one is replaced whole), cross-compiled for ``host`` (a triple) with ``cc``
    or the default compiler for it (:func:`library_compiler`)."""
    fcompile = library_compiler(host, cc)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, staging = tempfile.mkstemp(prefix=".relax-vk-export-", suffix=os.path.splitext(path)[1] or ".so", dir=folder)
    os.close(fd)
    try:
        if fcompile is None:
            executable.export_library(staging)
        else:
            executable.export_library(staging, fcompile=fcompile)
        os.replace(staging, path)
    finally:
        if os.path.exists(staging):
            os.unlink(staging)


def has_runtime(kind: str) -> bool:
    """Whether this TVM runtime has a device API for ``kind`` (``"opencl"``, ``"vulkan"``, ``"cpu"``)."""
    return kind in _CPU_KINDS + ("cpu",) or tvm.get_global_func(f"device_api.{kind}", allow_missing=True) is not None


def _runtime_error(kind: str) -> RuntimeUnavailableError:
    return RuntimeUnavailableError(
        f"this TVM runtime has no {kind} device API (the PyPI wheel ships none): run the library with a "
        f"libtvm_runtime built with USE_{kind.upper()}=ON (README: 'Deploying with TVM's runtime'), or run the "
        "model with relax_vk's own runtime (relax-vk run)"
    )


def _load(executable_or_path):
    if not isinstance(executable_or_path, (str, os.PathLike)):
        return executable_or_path
    try:
        return tvm.runtime.load_module(os.fspath(executable_or_path))
    except Exception as err:  # noqa: BLE001  (TVM raises its own error types; name the missing runtime)
        for kind in ("opencl", "vulkan"):
            if kind in str(err).lower() and not has_runtime(kind):
                raise _runtime_error(kind) from err
        raise


def vdevice_table(executable) -> List[Dict[str, object]]:
    """The VDevice rows (``kind``, ``vdevice_id``, ``memory_scope``) an executable or loaded library
    of :func:`compile` records, in index order; read from its constant pool, without a VM."""
    stats = executable.stats() if hasattr(executable, "stats") else executable["stats"]()
    table = decode_vdevices(str(stats))
    if table is None:
        raise UnsupportedError(
            f"the executable has no VDevice table ({VDEVICE_FUNCTION}; not built by relax_vk.compile / relax_vk.get_pipeline): "
            "construct relax.VirtualMachine(ex, [one device per VDevice..., tvm.cpu()]) yourself"
        )
    return table


def vm_devices(table: Sequence[Dict[str, object]], device: Optional[tvm.runtime.Device] = None) -> List[tvm.runtime.Device]:
    """The device list TVM's VM needs for ``table``: one device per VDevice (``device`` for those of
    its kind, offset by their ``vdevice_id``; device 0 of their kind otherwise; the CPU for CPU
    targets), then the CPU. A table without VDevices: ``device`` (or the CPU), then the CPU."""
    device_kind = tvm.runtime.Device._DEVICE_TYPE_TO_NAME[device.dlpack_device_type()] if device is not None else None
    out = []
    for row in table:
        kind, index = str(row["kind"]), int(row["vdevice_id"])
        if kind in _CPU_KINDS:
            out.append(tvm.cpu(max(index, 0)))
        elif kind == device_kind:
            out.append(tvm.device(kind, device.index + max(index, 0)))
        else:
            out.append(tvm.device(kind, max(index, 0)))
    if not out and device is not None:
        out.append(device)
    return out + [tvm.cpu()]


def load_vm(
    executable_or_path: "tvm.runtime.Executable | tvm.runtime.Module | str | os.PathLike",
    device: Optional[tvm.runtime.Device] = None,
    memory_cfg: "str | dict | None" = None,
    binary_cache: "bool | str | os.PathLike" = False,
) -> "VirtualMachine":
    """A Relax VM (:class:`VirtualMachine`) over an executable of :func:`compile` or a library of
    :func:`export_library`, with the devices :func:`vm_devices` lists for its VDevices (``device``:
    e.g. ``tvm.opencl(0)``; default device 0 of each VDevice's kind). ``vm["main"]`` runs with
    images allocated once for this VM (:class:`VirtualMachine`).

    ``memory_cfg``: TVM's allocator choice (``"naive"``, ``"pooled"`` or ``{device: either}``).
    Default: per VDevice (:func:`allocator_types`): TVM's naive allocator for texture VDevices
    (their images), its pooled one for the rest (module docstring).

    ``binary_cache``: ``True`` (the default folder) or a folder: keep the driver's program binaries
    of the OpenCL kernels on disk, keyed by device, driver and source and verified on load
    (:mod:`.program_cache`); the VM's ``program_cache`` says whether they came from
    the cache. Off by default, as in TVM.
    :class:`RuntimeUnavailableError` when this TVM runtime lacks a device API the executable needs."""
    executable = _load(executable_or_path)
    table = vdevice_table(executable)
    for kind in sorted({str(row["kind"]) for row in table}):
        if not has_runtime(kind):
            raise _runtime_error(kind)
    devices = vm_devices(table, device)
    if binary_cache is not False and binary_cache is not None:
        from .program_cache import restore_or_save

        if isinstance(executable, tvm.runtime.Executable):
            executable = executable.jit()
        opencl = next((d for d in devices if d.dlpack_device_type() == tvm.opencl().dlpack_device_type()), None)
        program_cache = restore_or_save(executable, opencl, binary_cache) if opencl is not None else None
    else:
        program_cache = None
    allocators = None
    if memory_cfg is None:
        allocators = allocator_types(table, len(devices))
    elif isinstance(memory_cfg, dict):
        memory_cfg = {dev: _ALLOCATORS.get(kind, kind) for dev, kind in memory_cfg.items()}
    clear_allocator_pools()  # what VMs gone before left in the pools (module docstring)
    vm = VirtualMachine(executable, devices, memory_cfg=memory_cfg, allocators=allocators)
    vm.program_cache = program_cache
    return vm


def clear_allocator_pools() -> None:
    """Free what TVM's allocators keep in their pools (``vm.builtin.memory_manager.clear``): only
    storages no one holds; a live VM allocates anew what it needs. Needed after a VM with texture
    constants is gone: TVM's runtime returns those images to the pooled allocator's byte-keyed pool,
    from which a later buffer of the same page-rounded size would be handed an image (module
    docstring)."""
    clear = tvm.get_global_func("vm.builtin.memory_manager.clear", allow_missing=True)
    if clear is not None:
        clear()


def allocator_types(table: Sequence[Dict[str, object]], count: int) -> List[int]:
    """TVM's allocator type for each of ``count`` VM devices (:func:`vm_devices` of ``table``):
    naive for a texture VDevice, pooled for every other device (module docstring)."""
    out = [_ALLOCATORS["naive"] if "texture" in str(row["memory_scope"]) else _ALLOCATORS["pooled"] for row in table]
    return (out + [_ALLOCATORS["pooled"]] * count)[:count]


class VirtualMachine(relax.VirtualMachine):
    """TVM's ``relax.VirtualMachine`` that keeps the images of
    :class:`~relax_vk.passes.HoistImageStorage`'s functions: ``vm["F"]`` of a function ``F`` with
    hoisted images runs ``F__with_images`` with this VM's images, allocated by ``F__images`` on the
    first call and held until the VM goes (or :meth:`release_images`). Every other way in
    (``vm.module["F"]``, ``set_input``/``invoke_stateful``, ``time_evaluator``) runs ``F`` itself,
    which allocates its images per call. Calls of one VM share its images: run them one at a time
    (as TVM's VM requires anyway)."""

    def __init__(self, rt_mod, device, memory_cfg=None, allocators: Optional[Sequence[int]] = None) -> None:
        """``allocators``: TVM's allocator type per device (overrides ``memory_cfg``; TVM's own
        ``memory_cfg`` is keyed by device, so it cannot give two VDevices of one device two allocators)."""
        self._allocators = list(allocators) if allocators is not None else None
        self._images: Dict[str, object] = {}
        self._hoisted: Dict[str, bool] = {}
        #: how :func:`load_vm` got the OpenCL programs (``BuildInfo``; None without ``binary_cache``)
        self.program_cache = None
        super().__init__(rt_mod, device, memory_cfg)

    def _setup_device(self, dev, memory_cfg) -> None:
        if self._allocators is None:
            return super()._setup_device(dev, memory_cfg)
        devs = list(dev) if isinstance(dev, (list, tuple)) else [dev]
        if len(devs) != len(self._allocators):
            raise ValueError(f"{len(self._allocators)} allocator types for {len(devs)} devices")
        init_args = []
        for device, kind in zip(devs, self._allocators):
            init_args += [device.dlpack_device_type(), device.index, kind]
        self.module["vm_initialization"](*init_args)

    def hoisted(self, name: str) -> bool:
        """Whether ``name`` has hoisted images (``name__images`` and ``name__with_images`` exist)."""
        known = self._hoisted.get(name)
        if known is None:
            known = self._hoisted[name] = bool(
                self.module.implements_function(name + WITH_IMAGES) and self.module.implements_function(name + IMAGES)
            )
        return known

    def __getitem__(self, key: str):
        if not self.hoisted(key):
            return super().__getitem__(key)
        run = self.module[key + WITH_IMAGES]

        def call(*args):
            images = self._images.get(key)
            if images is None:
                images = self._images[key] = self.module[key + IMAGES]()
            return run(*args, images)

        return call

    def __del__(self) -> None:
        # drop this VM (its module, constants and images) first, then what it left in the pools
        try:
            self.__dict__.clear()
            clear_allocator_pools()
        except Exception:  # noqa: BLE001  (interpreter shutdown: nothing left to protect)
            pass

    def release_images(self) -> None:
        """Drop the images held for the hoisted functions (the next call allocates them again)."""
        self._images.clear()


_ALLOCATORS = {"naive": relax.VirtualMachine.NAIVE_ALLOCATOR, "pooled": relax.VirtualMachine.POOLED_ALLOCATOR}

