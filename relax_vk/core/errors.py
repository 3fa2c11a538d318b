"""The error classes every layer shares (standard library only: the runtime imports this too).

Every error relax_vk raises on purpose derives from :class:`RelaxVKError` and says what it is
about (the tensor, op, kernel, file or limit). Two kinds matter to a user:

* :class:`UnsupportedError` -- the *input* is outside what relax_vk handles (an op with no
  lowering, a dtype the runtime cannot hold, a malformed file): the message names it and, where
  one exists, the way out;
* :class:`LimitError` -- the model does not fit the device (total memory, a limit nothing can
  split around): the message names the tensor, its size and the limit.

Anything else (an exception that is not a :class:`RelaxVKError`, or one of the internal classes
such as a kernel the device compiler rejects) is a relax_vk bug: the differential fuzzer counts
it as a crash.
"""


import sys

_CLASSES: list = []  # every RelaxVKError class, in definition order (registered with tvm-ffi once it is imported)


class RelaxVKError(Exception):
    """Base of the errors relax_vk raises on purpose.

    Every subclass is registered with tvm-ffi, so an error raised inside a pass keeps its class
    through TVM's pass infrastructure (unregistered classes come back as plain ``RuntimeError``).
    Registration waits until tvm-ffi is imported by something else (the compiler imports TVM):
    importing tvm-ffi here would import PyTorch too, a second a runtime user should not pay for.
    :func:`register_with_tvm_ffi` registers the classes defined so far; a class defined after
    tvm-ffi is imported is registered at once."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _CLASSES.append(cls)
        if "tvm_ffi" in sys.modules:
            _register(cls)


def _register(cls) -> None:
    try:
        import tvm_ffi
    except ImportError:
        return
    try:
        tvm_ffi.register_error(cls.__name__, cls)
    except Exception:  # an older tvm-ffi without error registration: the message still says it all
        pass


def register_with_tvm_ffi() -> None:
    """Register every relax_vk error class with tvm-ffi (the compiler calls this as it imports TVM)."""
    for cls in _CLASSES:
        _register(cls)


class UnsupportedError(RelaxVKError, ValueError):
    """The input (model, op, dtype, file, option) is not supported; the message names it."""


class LimitError(RelaxVKError, RuntimeError):
    """The model cannot fit the device; the message names the tensor or kernel and the limit."""


class _RegisterWhenImported:
    """A finder on ``sys.meta_path`` that sees tvm-ffi's import and registers the classes once the
    module has run (then leaves ``sys.meta_path``); it finds nothing itself."""

    def find_spec(self, name, path=None, target=None):
        if name != "tvm_ffi":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            register_with_tvm_ffi()

        loader.exec_module = exec_module
        return spec


_CLASSES.insert(0, RelaxVKError)
if "tvm_ffi" in sys.modules:
    register_with_tvm_ffi()
else:
    sys.meta_path.insert(0, _RegisterWhenImported())
