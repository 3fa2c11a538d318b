"""Refuse known-bad toolchain versions at import, with the fix in the message."""

from __future__ import annotations

from importlib import metadata

from .errors import RelaxVKError

REQUIRED_TVM = "0.27.0.post1"
REQUIRED_FFI = "0.1.14.post1"
GOOD_FFI = ("0.1.14.post0", "0.1.14.post1")


class IncompatibleToolchain(RelaxVKError, ImportError):
    """The installed TVM or tvm-ffi is known not to work with relax_vk."""


def check_ffi_version(version: str) -> None:
    """Raise for tvm-ffi versions that crash relax_vk's pipeline."""
    if version.startswith("0.1.15"):
        raise IncompatibleToolchain(
            f"apache-tvm-ffi {version} is installed, and 0.1.15.x segfaults relax.transform.ConvertLayout "
            f"to NCHW4c. Install the pinned version: pip install 'apache-tvm-ffi=={REQUIRED_FFI}'"
        )


def check_toolchain() -> None:
    try:
        ffi = metadata.version("apache-tvm-ffi")
    except metadata.PackageNotFoundError:
        raise IncompatibleToolchain(
            f"apache-tvm-ffi is not installed: pip install 'apache-tvm=={REQUIRED_TVM}' 'apache-tvm-ffi=={REQUIRED_FFI}'"
        ) from None
    check_ffi_version(ffi)


def check_ffi_if_installed() -> None:
    """Refuse a known-bad tvm-ffi at import; without TVM (runtime-only use) there is nothing to check."""
    try:
        ffi = metadata.version("apache-tvm-ffi")
    except metadata.PackageNotFoundError:
        return
    check_ffi_version(ffi)
