"""RecordVDevices: the executable says which devices its Relax VM needs.

TVM's Relax VM takes one device per VDevice of the module (``runtime_device_index`` indexes that
list), then the CPU; given fewer it fails with "Mismatched ... device_type". A VM executable does
not record its VDevices, so this pass adds a Relax function :data:`FUNCTION` (no parameters) that
returns them as one string constant, ``relax_vk.vdevices=KIND:ID:SCOPE;KIND:ID:SCOPE;...`` in index
order (nothing after ``=`` for a module without VDevices; TVM's own ``kind:id:scope`` spelling).
The constant is readable without running the VM (the executable's ``stats()`` lists its constant
pool): :func:`relax_vk.tvm_runtime.vdevice_table` reads it to build the device list of an executable
or an exported library, also where this runtime could not initialise a VM for its devices.

Requires: nothing. Guarantees: the module's other functions are unchanged; the function carries
its ``global_symbol``, so it may be added after ``AttachGlobalSymbol``.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional

import tvm
from tvm import relax

from .plan_texture_storage import vdevices

FUNCTION = "__relax_vk_vdevices"
PREFIX = "relax_vk.vdevices="
_PATTERN = re.compile(re.escape(PREFIX) + r"([A-Za-z0-9_.:;\-]*)")


def vdevice_table(mod: tvm.IRModule) -> List[Dict[str, object]]:
    """The module's VDevices as ``{"kind", "vdevice_id", "memory_scope"}`` rows, in index order."""
    return [{"kind": v.target.kind.name, "vdevice_id": int(v.vdevice_id), "memory_scope": str(v.memory_scope)} for v in vdevices(mod)]


def encode(table: List[Dict[str, object]]) -> str:
    """The table as the string :data:`FUNCTION` returns."""
    return PREFIX + ";".join(f"{row['kind']}:{row['vdevice_id']}:{row['memory_scope']}" for row in table)


def decode(text: str) -> Optional[List[Dict[str, object]]]:
    """The table in ``text`` (the function's result, or any text holding it such as an
    executable's ``stats()``); None when ``text`` holds none."""
    match = _PATTERN.search(text)
    if match is None:
        return None
    rows = []
    for item in filter(None, match.group(1).split(";")):
        kind, index, scope = item.split(":", 2)
        rows.append({"kind": kind, "vdevice_id": int(index), "memory_scope": scope})
    return rows


def RecordVDevices() -> tvm.transform.Pass:
    """Adds :data:`FUNCTION`, returning the module's VDevice table (module docstring)."""

    @tvm.transform.module_pass(opt_level=0, name="relax_vk.RecordVDevices")
    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        func = relax.Function([], tvm.ir.StringImm(encode(vdevice_table(mod))), None, True).with_attr("global_symbol", FUNCTION)
        out = mod.clone()
        out[FUNCTION] = func
        return out

    return transform
