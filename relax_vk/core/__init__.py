"""The domain model every stage shares (no passes here):

* :mod:`.scope` -- memory scopes and how a packed tensor maps onto an image array;
* :mod:`.scope_rule` -- the one rule that picks a texture mapping (roles, limits);
* :mod:`.representation` -- representation sets (``TensorRepSet``) and the sync rules;
* :mod:`.registry` -- the op registry (which scopes each op's tensors may take);
* :mod:`.op_typing` -- type inference of ops kept through scoping honours ``ty_args``;
* :mod:`.options` -- ``ScopeOptions``; :mod:`.target` -- OpenCL/Vulkan targets and their limits;
* :mod:`.provenance` -- the model's op names, recorded by the front doors and followed through
  every pass to the kernels (read by the export, the half-arithmetic pass and the tools);
* :mod:`.ir_utils` -- small IR queries; :mod:`.compat`, :mod:`.extras` -- toolchain and optional
  dependency checks.

Importing this package imports nothing else: :mod:`.scope` and :mod:`.compat` work without TVM.
"""
