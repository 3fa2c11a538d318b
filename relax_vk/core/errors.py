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


class RelaxVKError(Exception):
    """Base of the errors relax_vk raises on purpose.

    Every subclass is registered with tvm-ffi when it is installed, so an error raised inside a
    pass keeps its class through TVM's pass infrastructure (unregistered classes come back as
    plain ``RuntimeError``). Without TVM (the runtime on a device) nothing is registered."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
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


class UnsupportedError(RelaxVKError, ValueError):
    """The input (model, op, dtype, file, option) is not supported; the message names it."""


class LimitError(RelaxVKError, RuntimeError):
    """The model cannot fit the device; the message names the tensor or kernel and the limit."""


_register(RelaxVKError)
