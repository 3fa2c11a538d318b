"""Export a compiled module to the portable ``.rvk`` artifact (see :mod:`relax_vk.serialization.artifact`):
the compiler's side of the format, which needs TVM and the passes' attributes (the format itself
sits below the runtime, which loads it without TVM).

The program is read off the compiled IR, not guessed:

* the final Relax ``main`` (after lowering) gives the tensors (shape, dtype, scope), the ordered
  kernel calls, the scope copies (``to_vdevice``), aliases, constants, inputs and outputs;
* each kernel call's host function, captured right after TVM's ``SplitHostDevice``, gives the
  device kernels it launches, in order, the buffers each one reads and writes (call arguments
  or workspaces the host function allocates) and the launch geometry from the thread extents
  (``blockIdx``/``threadIdx``) of ``call_ffi_kernel``.

Anything that cannot be determined statically (a symbolic extent, an unknown launch parameter, a
texture workspace, an op the runtime has no step for) fails the export with the kernel's or op's
name.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tvm
from tvm import relax, tirx
from tvm.ir.expr import GenericConst
from tvm.tirx.buffer import BufferType

from ..core.errors import LimitError, RelaxVKError, UnsupportedError
from ..core.ir_utils import tensor_scope
from ..core.provenance import output_names, provenance
from ..core.scope import PLACED_SCOPE_NAMES
from ..core.states import states_of
from ..passes.layout.derive_identifiers import source_name
from ..passes.layout.edge_dtypes import EDGE_ATTR
from ..passes.layout.index_ranges import INDEX_RANGE_ATTR, range_pairs
from ..passes.lower.half_arithmetic import ARITH_ATTR, KERNEL_ATTR, float_texel_functions
from ..serialization.artifact import Artifact
from ..storage import allocated_bytes, assign_storage
from ..storage.lifetimes import half_texels, past_half, snorm8_values
from .run_time_shapes import RunTimeDims, match_shapes, substitute
from .shared_kernels import share_opencl_functions
from .texture_origins import FOLDED_ATTR
from .texture_origins import MARKER as ORIGIN_MARKER
from .wgsl.emit import LLVMPIPE_LOOP_ITERATIONS

_AXES = {"x": 0, "y": 1, "z": 2}


class ExportError(RelaxVKError, ValueError):
    """The compiled module cannot be described as a portable program."""


def _dtype_bytes(dtype: str) -> int:
    dt = tvm.DataType(str(dtype)) if hasattr(tvm, "DataType") else None
    if dt is not None:
        return (dt.bits * dt.lanes + 7) // 8
    base, _, lanes = str(dtype).partition("x")
    return np.dtype(base).itemsize * (int(lanes) if lanes else 1)


def _int(value, what: str) -> int:
    if isinstance(value, (tirx.IntImm,)) or hasattr(value, "value"):
        return int(value.value)
    if isinstance(value, int):
        return value
    raise ExportError(f"{what} is not a compile-time constant: {value}")


def kernel_launches(host: tirx.PrimFunc, name: str) -> Tuple[List[dict], List[dict]]:
    """``(workspaces, launches)`` of one host function after ``SplitHostDevice``.

    ``workspaces[j]`` = ``{"name", "shape": [PrimExpr], "dtype"}``; ``launches[i]`` = ``{"kernel",
    "args": [("param", k) | ("workspace", j) | ("scalar", PrimExpr)], "grid", "block"}`` with the
    grid and block extents as expressions of the host function's variables (its buffers' shape
    variables, run-time dims included: :mod:`relax_vk.codegen.run_time_shapes`).
    """
    params = {p: i for i, p in enumerate(host.params)}
    alias: Dict[object, object] = {}
    workspaces: List[dict] = []
    workspace_of: Dict[object, int] = {}
    launches: List[dict] = []
    lets: Dict[object, object] = {}  # integer values the host binds (a size computed once: ``cse_v1 = W * 128``)

    def resolve(var) -> Tuple[str, int]:
        seen = set()
        while var in alias and var not in seen:
            seen.add(var)
            var = alias[var]
        if var in params:
            return ("param", params[var])
        if var in workspace_of:
            return ("workspace", workspace_of[var])
        raise ExportError(f"{name}: kernel argument {var} is neither a parameter nor a workspace")

    def walk(stmt):
        kind = type(stmt).__name__
        if kind == "SeqStmt":
            for s in stmt.seq:
                walk(s)
        elif kind == "DeclBuffer":
            data = stmt.data
            if data is not None and isinstance(data, tvm.ir.expr.Call) and data.op.name == "tirx.buffer_data":
                alias[stmt.buffer] = data.args[0]
        elif kind == "AllocBuffer":
            buf = stmt.buffer
            scope = str(buf.ty.storage_scope) or "global"
            if scope != "global":
                raise ExportError(f"{name}: allocates a {scope} workspace ({buf.name}); the runtime supports buffer workspaces only")
            workspace_of[buf] = len(workspaces)
            workspaces.append({"name": str(buf.name), "shape": [substitute(d, lets) for d in buf.ty.shape], "dtype": str(buf.ty.dtype)})
        elif kind == "Bind" and _scalar_dtype(stmt.var) in ("int32", "int64"):
            # (a texture-origin marker is no size: the launches that pass it keep it, for call_tir to resolve)
            lets[stmt.var] = stmt.value if _origin_marker(stmt.value) is not None else substitute(stmt.value, lets)
            if getattr(stmt, "body", None) is not None:
                walk(stmt.body)
        elif kind == "Evaluate":
            call = stmt.value
            if isinstance(call, tvm.ir.expr.Call) and call.op.name == "tirx.call_ffi_kernel":
                launch = _launch(call, resolve, name)
                # (a variable bound to the origin marker becomes the marker: it is bound as it is, below)
                launch["args"] = [(k, substitute(v, lets) if k == "scalar" else v) for k, v in launch["args"]]
                launch["grid"] = [substitute(g, lets) for g in launch["grid"]]
                launches.append(launch)
            elif isinstance(call, tvm.ir.expr.Call) and call.op.name not in ("tirx.tvm_call_packed",):
                raise ExportError(f"{name}: unsupported host statement {call.op.name}")
        elif kind in ("AttrStmt", "For", "IfThenElse", "LetStmt", "Bind", "While"):
            raise ExportError(f"{name}: host code with control flow ({kind}) cannot be exported")
        elif kind != "AssertStmt":
            raise ExportError(f"{name}: unsupported host statement {kind}")

    walk(host.body)
    return workspaces, launches


def _origin_marker(expr) -> Optional[int]:
    """The parameter index when ``expr`` is the host's texture-origin marker
    (:data:`relax_vk.codegen.texture_origins.MARKER`), else None."""
    if not (isinstance(expr, tvm.ir.expr.Call) and getattr(expr.op, "name", "") == "tirx.call_extern"):
        return None
    if str(expr.args[0].value) != ORIGIN_MARKER:
        return None
    return int(expr.args[1].value)


def _scalar_dtype(expr) -> str:
    return str(getattr(getattr(expr, "ty", None), "dtype", ""))


def _launch(call, resolve, name: str) -> dict:
    kernel = str(call.args[0].value)
    params = [str(p) for p in call.attrs.launch_params]
    extents = list(call.args[len(call.args) - len(params) :])
    data_args = call.args[1 : len(call.args) - len(params)]
    grid, block = [1, 1, 1], [1, 1, 1]
    for param, extent in zip(params, extents):
        scope, _, axis = param.partition(".")
        if scope not in ("blockIdx", "threadIdx") or axis not in _AXES:
            raise ExportError(f"kernel {kernel}: unsupported launch parameter {param}")
        if scope == "threadIdx":
            block[_AXES[axis]] = _int(extent, f"kernel {kernel}: extent of {param}")
        else:
            grid[_AXES[axis]] = extent.value if isinstance(extent, tirx.IntImm) else extent
    args = []
    for arg in data_args:
        if isinstance(arg, tvm.ir.expr.Call) and arg.op.name == "tirx.buffer_data":
            args.append(resolve(arg.args[0]))
        elif _scalar_dtype(arg) in ("int32", "int64"):
            args.append(("scalar", arg))
        else:
            raise ExportError(f"kernel {kernel}: argument {arg} ({_scalar_dtype(arg)}) is neither a buffer nor an integer size")
    return {"kernel": kernel, "args": args, "grid": grid, "block": block}


class _ProgramBuilder:
    def __init__(self, host_tir: tvm.IRModule, main: relax.Function, lowered: Optional[tvm.IRModule] = None,
                 kernel_params: Optional[Dict[str, List[str]]] = None):  # fmt: skip
        self.host_tir = host_tir
        self.kernel_params = kernel_params or {}  # kernel -> its parameters' dtypes, as the device code declares them
        self.main = main
        self.lowered = lowered
        self.dims = RunTimeDims(main)
        self.loop_bounds: Dict[str, tuple] = {}  # kernel -> (its loop iterations over its integer parameters, its parameters)
        self.shape_of: Dict[int, list] = {}  # tensor id -> its shape as expressions over the model's dims
        self.tensors: List[dict] = []
        self.steps: List[dict] = []
        self.kernels: Dict[str, dict] = {}
        self.constants: Dict[str, np.ndarray] = {}
        self.of_var: Dict[relax.Var, object] = {}  # var -> tensor id, or list of ids for tuples
        self._const_ids: Dict[GenericConst, int] = {}
        self.ops: List[str] = []  # the model ops of the binding being read
        self.written_by: Dict[str, List[int]] = {}  # PrimFunc name -> the tensors its calls write
        self.folded: Dict[int, set] = {}  # texture -> the folded widths of the kernels that store it folded (codegen.texture_origins)
        self.unfolded: set = set()  # tensors some kernel binds unfolded

    def fold_textures(self) -> None:
        """Textures the kernels store folded get their folded image (``[W, w h layers / W, 1]``,
        :func:`relax_vk.core.scope.folded_width`) and an ``origin`` (``[0, 0]`` until storage
        planning places them); a texture that one kernel folds and another does not, or that two
        kernels fold to different widths, would be read at two layouts, and fails the export."""
        for tid in sorted(self.folded):
            t = self.tensors[tid]
            if tid in self.unfolded or t["scope"] not in PLACED_SCOPE_NAMES:
                raise ExportError(f"texture {t['name']}: some kernels store it folded and others do not")
            if len(self.folded[tid]) != 1:
                raise ExportError(f"texture {t['name']}: kernels store it folded {sorted(self.folded[tid])} texels wide")
            (width,) = self.folded[tid]
            w, h, layers = t["image"]
            if width < 1 or (w * h * layers) % width:
                raise ExportError(f"texture {t['name']}: a folded width of {width} does not divide its {w * h * layers} texels")
            t["image"], t["origin"] = [width, w * h * layers // width, 1], [0, 0]

    def add_tensor(self, name: str, ty, kind: str) -> int:
        name = source_name(self.main, name)  # the model's own name (the code uses a derived one)
        if not isinstance(ty, relax.TensorType) or ty.shape is None:
            raise ExportError(f"{name}: not a tensor with a known shape ({ty})")
        shape, exprs = self.dims.shape(ty.shape.values, f"tensor {name}")
        scope = tensor_scope(ty)
        if exprs is not None and scope.is_texture:
            raise ExportError(f"tensor {name}: a texture of run-time shape {ty.shape}; run-time dims are held in buffers")
        entry = {
            "id": len(self.tensors),
            "name": name,
            "shape": list(shape),
            "dtype": str(ty.dtype),
            "scope": scope.name,
            "image": list(scope.image_extents(shape).as_tuple()) if scope.is_texture else None,
            "kind": kind,
            "bytes": int(math.prod(shape)) * np.dtype(str(ty.dtype)).itemsize,
        }
        if exprs is not None:
            entry["shape_expr"] = exprs
        self.shape_of[entry["id"]] = list(ty.shape.values)
        self.tensors.append(entry)
        return entry["id"]

    def tensor_of(self, expr) -> int:
        if isinstance(expr, GenericConst):
            if expr not in self._const_ids:
                tid = self.add_tensor(f"const{len(self.constants)}", expr.ty, "constant")
                self.constants[f"t{tid}"] = expr.value.numpy()
                self._const_ids[expr] = tid
            return self._const_ids[expr]
        if isinstance(expr, relax.Var) and expr in self.of_var and isinstance(self.of_var[expr], int):
            return self.of_var[expr]
        raise ExportError(f"argument {expr} is not a tensor the program knows")

    def result_tensors(self, expr) -> List[int]:
        """The tensor ids of a function's result, in order: a variable (a tensor or a tuple), a
        constant (a graph whose output is a model constant or initializer), or a tuple of them."""
        if isinstance(expr, relax.Var) and expr in self.of_var:
            found = self.of_var[expr]
            return list(found) if isinstance(found, list) else [found]
        if isinstance(expr, relax.Tuple):
            return [tid for f in expr.fields for tid in self.result_tensors(f)]
        return [self.tensor_of(expr)]

    def call_tir(self, var: relax.Var, call: relax.Call) -> None:
        gv = call.args[0]
        # TVM 0.27 passes call_tir's tir_vars as trailing integer fields of the argument tuple
        fields = list(call.args[1].fields)
        tir_vars = [f for f in fields if not isinstance(f.ty, (relax.TensorType, relax.TupleType))]
        args = [self.tensor_of(a) for a in fields if isinstance(a.ty, (relax.TensorType, relax.TupleType))]
        tir_vars += list(call.args[2].values) if len(call.args) > 2 else []
        out_ty = call.ty_args[0]
        fields = list(out_ty.fields) if isinstance(out_ty, relax.TupleType) else [out_ty]
        outs = [self.add_tensor(f"{var.name}" + (f"[{i}]" if len(fields) > 1 else ""), t, "intermediate") for i, t in enumerate(fields)]
        self.of_var[var] = outs if isinstance(out_ty, relax.TupleType) else outs[0]
        self.written_by.setdefault(gv.name_hint, []).extend(outs)
        if gv.name_hint not in [g.name_hint for g in self.host_tir.get_global_vars()]:
            raise ExportError(f"{gv.name_hint}: no host function after TIR lowering")
        host = self.host_tir[self.host_tir.get_global_var(gv.name_hint)]
        workspaces, launches = kernel_launches(host, gv.name_hint)
        # the host's buffer parameters are the operands, in order (its integer ones: tir_vars)
        buffer_params = [i for i, p in enumerate(host.params) if isinstance(p.ty, BufferType)]
        operands = dict(zip(buffer_params, args + outs))
        at_call = self.call_values(gv.name_hint, host, args + outs, tir_vars)
        folded = {int(k): int(n) for k, n in host.attrs[FOLDED_ATTR]} if host.attrs is not None and FOLDED_ATTR in host.attrs else {}
        for k, tid in operands.items():
            if k in folded:
                self.folded.setdefault(tid, set()).add(folded[k])
            else:
                self.unfolded.add(tid)
        ws_ids = [self.add_workspace(gv.name_hint, w, at_call) for w in workspaces]
        for launch in launches:
            kernel = launch["kernel"]
            ids, scalars = [], []
            origins = []  # (scalar entry, parameter index) of the textures this launch addresses at an origin
            for position, (kind, i) in enumerate(launch["args"]):
                param = _origin_marker(i) if kind == "scalar" else None
                if param is not None:
                    entry = {"index": position, "dtype": _scalar_dtype(i), "origin": None}
                    scalars.append(entry)
                    origins.append((entry, param))
                elif kind == "scalar":
                    value = self.dims.expression(substitute(i, at_call), f"kernel {kernel}: argument {position}")
                    scalars.append({"index": position, "dtype": self.scalar_dtype(kernel, position, i), "value": value})
                else:
                    ids.append(operands[i] if kind == "param" else ws_ids[i])
            for entry, param in origins:
                if param not in operands:
                    raise ExportError(f"kernel {kernel}: a texture origin of parameter {param}, which is no tensor operand")
                entry["origin"] = operands[param]
            loops = self.loop_iterations(kernel, launch["args"], at_call)
            grid = [substitute(g, at_call) for g in launch["grid"]]
            global_exprs = [self.dims.expression(g * b, f"kernel {kernel}: grid") for g, b in zip(grid, launch["block"])]
            bound = [self.dims.at_max(g * b, f"kernel {kernel}: grid") for g, b in zip(grid, launch["block"])]
            self.kernels[kernel] = {"name": kernel, "global": bound, "local": launch["block"], **self.kernel_info(gv.name_hint)}
            step = {"op": "launch", "kernel": kernel, "call": gv.name_hint, "args": ids}
            if scalars:
                step["scalars"] = scalars
            if not all(isinstance(g, int) for g in global_exprs):
                step["global"] = global_exprs
            if loops is not None:
                step["loop_iterations"] = loops
            if self.ops:  # the model ops this kernel computes (relax_vk.core.provenance)
                step["ops"] = list(self.ops)
            self.steps.append(step)

    def loop_iterations(self, kernel: str, args: list, at_call: dict):
        """The loop iterations of one invocation of ``kernel`` at this launch where they are a
        run-time size (:data:`loop_bounds`) that can pass llvmpipe's cap within the dims' ranges:
        the expression (the artifact's form) lavapipe's runtime checks at each run's sizes. None
        where they cannot pass it, or are not known (the kernel then runs unchecked, as before).
        A count that is a constant is the shader's own, checked at load."""
        if kernel not in self.loop_bounds:
            return None
        expr, params = self.loop_bounds[kernel]
        values = {params[pos]: substitute(value, at_call) for pos, (kind, value) in enumerate(args)
                  if kind == "scalar" and pos < len(params) and _origin_marker(value) is None}  # fmt: skip
        what = f"kernel {kernel}: loop iterations"
        try:
            count = substitute(expr, values)
            if self.dims.bound(count, what) <= LLVMPIPE_LOOP_ITERATIONS:
                return None
            return self.dims.expression(count, what)
        except UnsupportedError:
            return None

    def call_values(self, name: str, host: tirx.PrimFunc, operands: List[int], tir_vars: list) -> dict:
        """The host function's variables at this call, as expressions over the model's dims: its
        buffers' shapes matched with the operands' (and its trailing integer parameters with
        ``call_tir``'s ``tir_vars``)."""
        pairs, bound = [], {}
        buffers = [p for p in host.params if isinstance(p.ty, BufferType)]
        scalars = [p for p in host.params if not isinstance(p.ty, BufferType)]
        if len(buffers) != len(operands) or len(scalars) != len(tir_vars):
            raise ExportError(f"{name}: {len(buffers)} buffers and {len(scalars)} integers, called with {len(operands)} tensors "
                              f"and {len(tir_vars)} integers")  # fmt: skip
        for p, value in zip(scalars, tir_vars):
            bound[p] = value
        for p, tid in zip(buffers, operands):
            pairs.append((f"{name}: {self.tensors[tid]['name']}", list(p.ty.shape), self.shape_of[tid]))
        try:
            return match_shapes(pairs, bound)
        except UnsupportedError as err:
            raise ExportError(str(err)) from None

    def add_workspace(self, func: str, workspace: dict, at_call: dict) -> int:
        size = 1
        for extent in workspace["shape"]:
            size = size * substitute(extent, at_call)
        nbytes = self.dims.bound(size, f"{func}: workspace {workspace['name']}") * _dtype_bytes(workspace["dtype"])
        return self.add_tensor_raw(f"{func}.{workspace['name']}", nbytes)

    def scalar_dtype(self, kernel: str, position: int, arg) -> str:
        """The dtype a kernel takes its integer argument ``position`` as: what its device code
        declares (int32 where :mod:`relax_vk.codegen.index_narrowing` narrowed it), else the host's."""
        declared = self.kernel_params.get(kernel)
        if declared is not None and position < len(declared) and declared[position] in ("int32", "int64"):
            return declared[position]
        return _scalar_dtype(arg)

    def kernel_info(self, func_name: str) -> dict:
        """What the schedules recorded on a kernel's PrimFunc: the rule that scheduled it and, for
        convs, the workload, the configuration and its source, the memory kind, and the FLOPs (tools report GFLOP/s
        and the tuner matches kernels to workloads with them)."""
        if self.lowered is None or func_name not in [g.name_hint for g in self.lowered.get_global_vars()]:
            return {}
        attrs = self.lowered[func_name].attrs
        if attrs is None:
            return {}
        keys = {"relax_vk.schedule": "schedule", "relax_vk.conv2d_workload": "workload", "relax_vk.conv2d_config": "config",
                "relax_vk.conv2d_config_source": "config_source", "relax_vk.conv2d_memory": "memory"}  # fmt: skip
        info = {out: str(attrs[key]) for key, out in keys.items() if key in attrs}
        if "relax_vk.flops" in attrs:
            info["flops"] = int(attrs["relax_vk.flops"])
        if KERNEL_ATTR in attrs:  # computes in half (relax_vk.passes.lower.half_arithmetic)
            info["arithmetic"], info["accumulate"] = "float16", str(attrs[KERNEL_ATTR])
        return info

    def add_tensor_raw(self, name: str, nbytes: int) -> int:
        entry = {"id": len(self.tensors), "name": name, "shape": [nbytes], "dtype": "uint8", "scope": "global",
                 "image": None, "kind": "workspace", "bytes": nbytes}  # fmt: skip
        self.tensors.append(entry)
        return entry["id"]

    def binding(self, var: relax.Var, value) -> None:
        if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
            name = value.op.name
            if name == "relax.call_tir":
                return self.call_tir(var, value)
            if name == "relax.to_vdevice":
                src = self.tensor_of(value.args[0])
                dst = self.add_tensor(var.name, value.ty, "intermediate")
                self.of_var[var] = dst
                self.steps.append({"op": "copy", "src": src, "dst": dst})
                return None
            raise ExportError(f"op {name} (bound to {var.name}) has no runtime step; it should have been legalized")
        if isinstance(value, relax.ShapeExpr):
            return None  # (sizes reach the kernels as expressions; a derived dim is one, run_time_shapes.derived_dims)
        if isinstance(value, relax.Var):
            self.of_var[var] = self.of_var[value]
        elif isinstance(value, relax.TupleGetItem):
            self.of_var[var] = self.of_var[value.tuple_value][int(value.index)]
        elif isinstance(value, relax.Tuple):
            self.of_var[var] = [self.tensor_of(f) for f in value.fields]
        elif isinstance(value, GenericConst):
            self.of_var[var] = self.tensor_of(value)
        else:
            raise ExportError(f"binding {var.name}: {type(value).__name__} has no runtime step")
        return None


def _states(builder: "_ProgramBuilder", main: relax.Function, inputs: List[int], outputs: List[int]) -> List[dict]:
    """The program's ``states`` (:mod:`relax_vk.core.states`): ``{"tensor": input id, "update":
    output id, "offset": rows}``, each checked as the runtime needs it (buffers, one dtype, the
    update's rows the state's trailing shape)."""
    names = [p.name for p in main.params]
    out = []
    for s in states_of(main):
        tid, update = inputs[names.index(s["input"])], outputs[s["output"]]
        t, u = builder.tensors[tid], builder.tensors[update]
        where = f"state {t['name']} (updated by output {s['output']}, {u['name']})"
        if t["scope"] != "global" or u["scope"] != "global":
            raise ExportError(f"{where}: states and their updates are buffers")
        if t["dtype"] != u["dtype"] or "shape_expr" in t or t["shape"][1:] != u["shape"][1:] or len(t["shape"]) != len(u["shape"]):
            raise ExportError(f"{where}: the update must be rows of the state ({u['dtype']} {u.get('shape_expr', u['shape'])} into "
                              f"{t['dtype']} {t['shape']}, a fixed shape)")  # fmt: skip
        if update in [o["update"] for o in out] or tid in [o["tensor"] for o in out]:
            raise ExportError(f"{where}: a tensor serves two states")
        out.append({"tensor": tid, "update": update, "offset": builder.dims.expression(s["offset"], f"{where}: offset")})
    return out


def _attach_shaders(program: dict, shaders: dict, same: Dict[str, str]) -> str:
    """Vulkan: the WGSL source section (the shaders one after another, in kernel-name order) and,
    on each kernel, where its shader lies in it, its bindings and its workgroup size. A kernel
    whose device code equals an earlier one's (``same``) points at that shader."""
    source = ""
    placed: Dict[str, dict] = {}
    for kernel in program["kernels"]:
        name = kernel["name"]
        if name not in shaders:
            raise ExportError(f"kernel {name} is launched but has no WGSL shader")
        shader = shaders[name]
        if list(shader.workgroup) != list(kernel["local"]):
            raise ExportError(f"kernel {name}: shader workgroup {list(shader.workgroup)} differs from its launch {kernel['local']}")
        kernel["bindings"] = list(shader.bindings)
        kernel["workgroup_bytes"] = int(shader.workgroup_bytes)
        if shader.loop_iterations is not None and shader.loop_iterations > LLVMPIPE_LOOP_ITERATIONS:  # (what lavapipe cannot run)
            kernel["loop_iterations"] = int(shader.loop_iterations)
        first = placed.get(same.get(name, name))
        if first is not None and first["bindings"] == kernel["bindings"] and first["local"] == kernel["local"]:
            kernel["shader"] = dict(first["shader"])
            continue
        kernel["shader"] = {"offset": len(source), "length": len(shader.source)}
        placed.setdefault(same.get(name, name), kernel)
        source += shader.source
    _check_32_bit_indices(program, "Vulkan shaders index with 32-bit integers")
    return source


def _check_32_bit_indices(program: dict, why: str) -> None:
    """Refuse a tensor of 2**31 elements or more (at the dims' bounds), naming it and ``why``."""
    for t in program["tensors"]:
        elements = t["bytes"] // max(np.dtype(t["dtype"]).itemsize, 1)
        if elements >= 2**31:
            raise ExportError(f"tensor {t['name']} has {elements} elements; {why}")


def kernel_params(device: Optional[tvm.IRModule]) -> Dict[str, List[str]]:
    """Kernel name -> the dtypes of its parameters, from the finalized device module."""
    if device is None:
        return {}
    return {gv.name_hint: [_scalar_dtype(p) for p in func.params] for gv, func in device.functions_items() if isinstance(func, tirx.PrimFunc)}


def check_fits(program: dict, limits) -> None:
    """Raise :class:`~relax_vk.core.errors.LimitError` when the program cannot fit a device with
    ``limits`` (:class:`~relax_vk.core.limits.DeviceLimits`): a buffer larger than one binding or
    allocation, an image over the image limits, or more memory in total than the device has (its
    allocations: shared ones counted once). Each message names the tensor, its size and the limit
    (what can be split or re-planned was already)."""
    total = allocated_bytes(program)
    for t in program["tensors"]:
        if t["image"]:
            w, h, layers = t["image"]
            if w > limits.image_width or h > limits.image_height or layers > limits.image_layers:
                raise LimitError(
                    f"tensor {t['name']} needs a {w}x{h}x{layers} image; the device allows "
                    f"{limits.image_width}x{limits.image_height}x{limits.image_layers}"
                )
            continue
        if int(t["bytes"]) > limits.max_buffer_bytes:
            raise LimitError(
                f"tensor {t['name']} ({t['kind']}, shape {t['shape']}) takes {t['bytes']} bytes, more than one buffer binding "
                f"of the device ({limits.max_buffer_bytes} bytes); only constant conv/matmul weights are split"
            )
    if total > limits.memory_bytes:
        largest = sorted(program["tensors"], key=lambda t: -int(t["bytes"]))[:3]
        named = ", ".join(f"{t['name']} ({t['bytes']} bytes)" for t in largest)
        raise LimitError(f"the model needs {total} bytes of device memory, more than the device's {limits.memory_bytes}; largest tensors: {named}")


def export_program(
    lowered: tvm.IRModule,
    host_tir: tvm.IRModule,
    source: str,
    target_kind: str,
    model: Optional[dict] = None,
    shaders: Optional[dict] = None,
    limits=None,
    reuse: bool = True,
    texel: str = "float32",
    private: Sequence[str] = (),
    same: Optional[Dict[str, str]] = None,
    kernel_params: Optional[Dict[str, List[str]]] = None,
) -> Artifact:
    """The :class:`Artifact` of a lowered module (see the module docstring). For Vulkan,
    ``shaders`` (kernel name -> :class:`relax_vk.codegen.wgsl.Shader`) replace ``source``.
    ``reuse``: tensors whose lifetimes do not overlap share allocations (:mod:`relax_vk.storage`);
    False gives every tensor its own. ``texel="float16"``: textures hold half texels (each texture
    tensor's ``texel``), but for those kernels kept in float32 arithmetic for overflow write
    (:func:`~relax_vk.passes.lower.half_arithmetic.float_texel_functions`). ``private``: storage pools that do not
    share on the target's device (:func:`relax_vk.schedules.tuning.private_pools`). ``same``: kernel
    name -> an earlier kernel with the same device code (:func:`relax_vk.codegen.shared_kernels.same_kernels`),
    whose function or shader it runs. ``kernel_params``: kernel name -> its parameters' dtypes as
    its device code declares them (:func:`kernel_params`): integer arguments are passed as those."""
    main = lowered["main"]
    builder = _ProgramBuilder(host_tir, main, lowered, kernel_params)
    for name, shader in (shaders or {}).items():
        if shader.loop_bound is not None:
            builder.loop_bounds[name] = (shader.loop_bound, list(shader.loop_params))
    inputs = []
    for p in main.params:
        tid = builder.add_tensor(p.name, p.ty, "input")
        builder.of_var[p] = tid
        inputs.append(tid)
    body = main.body
    ops = provenance(main)
    for b in (b for block in body.blocks for b in block.bindings):
        builder.ops = ops.pop(0) if ops else []
        builder.binding(b.var, b.value)
    outputs = builder.result_tensors(body.body)
    # an output that is an input (Identity; a cast the edges fold into the upload) is a tensor of its
    # own, copied from the input on the device: it has the output's dtype at the edge, not the input's
    for i, tid in enumerate(outputs):
        if tid in inputs:
            copy = {k: v for k, v in builder.tensors[tid].items() if k not in ("host_dtype", "index_range")}
            copy.update(id=len(builder.tensors), name=f"output{i}", kind="intermediate")
            builder.tensors.append(copy)
            builder.shape_of[copy["id"]] = builder.shape_of[tid]
            builder.steps.append({"op": "copy", "src": tid, "dst": copy["id"]})
            outputs[i] = copy["id"]
    # the model's own names of its outputs (ONNX's), where the tensor is the output's alone
    named = {t["name"] for i, t in enumerate(builder.tensors) if i not in outputs}
    names = output_names(main)
    for tid, name in zip(outputs, names if len(names) == len(outputs) else []):
        if builder.tensors[tid]["kind"] == "intermediate" and name not in named and outputs.count(tid) == 1:
            builder.tensors[tid]["name"] = name
            named.add(name)
    builder.fold_textures()
    edges = dict(main.attrs[EDGE_ATTR]) if main.attrs is not None and EDGE_ATTR in main.attrs else {}
    for p, tid in zip(main.params, inputs):  # dtypes converted at the edges (passes.layout.edge_dtypes)
        if p.name in edges:
            builder.tensors[tid]["host_dtype"] = str(edges[p.name])
    ranges = main.attrs[INDEX_RANGE_ATTR] if main.attrs is not None and INDEX_RANGE_ATTR in main.attrs else {}
    for p, tid in zip(main.params, inputs):  # the values an input that indexes a table may hold (passes.layout.index_ranges)
        if p.name in ranges:
            pairs = range_pairs(ranges[p.name])  # [lo, hi], or one such a position of the last axis (an index tuple's)
            builder.tensors[tid]["index_range"] = pairs if len(pairs) > 1 else pairs[0]
    for i, tid in enumerate(outputs):
        if f"<output {i}>" in edges:
            builder.tensors[tid]["host_dtype"] = str(edges[f"<output {i}>"])
    for tid in outputs:
        if builder.tensors[tid]["scope"] != "global":
            raise ExportError(f"output {builder.tensors[tid]['name']} is a texture; outputs must be buffers")
    program = {
        "format": "relax_vk.program",
        "target": target_kind,
        "model": model or {},
        "tensors": builder.tensors,
        "kernels": sorted(builder.kernels.values(), key=lambda k: k["name"]),
        "steps": builder.steps,
        "inputs": inputs,
        "outputs": outputs,
    }
    if builder.dims:
        program["dims"] = builder.dims.table()
    states = _states(builder, main, inputs, outputs)
    if states:
        program["states"] = states
    if main.attrs is not None and ARITH_ATTR in main.attrs:  # half arithmetic: which kernels stay float32, and why
        decided = {str(k): str(v) for k, v in main.attrs[ARITH_ATTR].items()}
        program["arithmetic"] = {"dtype": "float16", "float32": {k: v for k, v in sorted(decided.items()) if v != "float16"}}
    float_texels = {tid for name in float_texel_functions(main) for tid in builder.written_by.get(name, [])}
    for t in builder.tensors:
        if t["image"] and half_texels(t["dtype"], texel) and t["id"] not in float_texels:
            # (a constant past float16's range keeps float32 texels: a conv weight of 2.4e5 read back as inf)
            if not (t["kind"] == "constant" and past_half(builder.constants[f"t{t['id']}"])):
                t["texel"] = texel
        snorm = snorm8_values(builder.constants[f"t{t['id']}"]) if t["image"] and t["kind"] == "constant" else None
        if snorm is not None:  # a quantized weight (passes.scope.quantized_weight_texels): one byte a channel
            t["texel"] = "snorm8"
            builder.constants[f"t{t['id']}"] = snorm
    if target_kind == "vulkan":
        source = _attach_shaders(program, shaders or {}, same or {})
    else:
        source = share_opencl_functions(program, source, same or {})
        if builder.dims:
            _check_32_bit_indices(program, "OpenCL kernels of a run-time size index with 32-bit integers")
    image_limit = limits.textures.spatial if limits is not None else 16384
    program, _ = assign_storage(program, reuse=reuse, max_alloc_bytes=limits.max_alloc_bytes if limits is not None else None, private=private,
                                image_limit=image_limit)  # fmt: skip
    if limits is not None:
        check_fits(program, limits)
    return Artifact(program, source, builder.constants)
