"""States on a Relax module: inputs the runtime keeps on the device between runs.

A program that carries memory from one run to the next (a language model's key/value cache) names
it on ``main`` in the function attribute ``relax_vk.states``: a list of ``{"input": NAME, "output":
INDEX, "offset": ROWS}``. Input ``NAME`` (a parameter of ``main``) is then a state:

* the caller never passes it: the runtime holds its storage, zeroed at load and by a reset;
* after each run the runtime writes output ``INDEX`` (``[rows, ...]``, the same trailing shape and
  dtype) into the state's rows ``ROWS .. ROWS+rows-1`` (``ROWS`` an integer expression of the
  run-time dims), on the device: the output never reaches the caller;
* a run whose rows fall outside the state is refused before anything runs.

:mod:`relax_vk.codegen.export` writes them as the artifact's ``states``; the native runtime executes
them. The passes keep ``main``'s attributes and parameter names, which is all a state needs.
"""

from __future__ import annotations

from typing import List, Mapping, Sequence

import tvm

STATES_ATTR = "relax_vk.states"


def with_states(mod: tvm.IRModule, states: Sequence[Mapping[str, object]]) -> tvm.IRModule:
    """``mod`` with ``states`` (``{"input", "output", "offset"}`` each) recorded on ``main``."""
    main = mod["main"]
    names = [p.name for p in main.params]
    outputs = main.ret_ty.fields if isinstance(main.ret_ty, tvm.relax.TupleType) else [main.ret_ty]
    for s in states:
        if s["input"] not in names:
            raise ValueError(f"state {s['input']}: main has no such parameter")
        if not 0 <= int(s["output"]) < len(outputs):
            raise ValueError(f"state {s['input']}: main has no output {s['output']}")
    out = tvm.IRModule(dict(mod.functions_items()), attrs=mod.attrs)
    out["main"] = main.with_attr(STATES_ATTR, [dict(s) for s in states])
    return out


def states_of(func: tvm.relax.Function) -> List[dict]:
    """``func``'s states (``[]`` when none), each ``{"input": str, "output": int, "offset": PrimExpr}``."""
    if func.attrs is None or STATES_ATTR not in func.attrs:
        return []
    return [{"input": str(s["input"]), "output": int(s["output"]), "offset": s["offset"]} for s in func.attrs[STATES_ATTR]]
