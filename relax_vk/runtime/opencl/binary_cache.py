"""Cold start: OpenCL program binaries kept on disk, keyed by device, driver and source.

Building a program from source (``clBuildProgram``) dominates loading an artifact: seconds for a
few dozen kernels on pocl, about ten on NVIDIA for hundreds. the native library keeps the binary the
driver produced and loads it next time (``clCreateProgramWithBinary``), verified on load:

* the file name is the SHA-256 of the key: the source, the build options, and the device as the
  driver describes it (platform name and version, device name, vendor, version, driver version);
  a new driver, another device or a changed kernel is another file;
* the file holds that key in full, the source's and the binary's SHA-256 and the kernel names; a
  file whose key differs (a hash collision), whose binary does not hash to its record (a torn or
  corrupted file), that the driver refuses, or whose program lacks a kernel is rebuilt from source
  and replaced, never used.

Files are written atomically (a temporary file, then ``os.replace``) into ``cache_dir``: the
argument, else ``$RELAX_VK_CACHE_DIR``, else ``~/.cache/relax_vk/opencl``. ``cache_dir=False``
or ``RELAX_VK_NO_CACHE=1`` builds from source every time. The native runtime
(``native/src/binary_cache.*``) reads and writes the same files, so one cache decides.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Union

_MAGIC = b"relax_vk opencl binary 1\n"

CacheDir = Union[str, os.PathLike, None, bool]


@dataclass
class BuildInfo:
    """How a program was got: ``"binary"`` (from the cache), ``"source"`` (built and
    stored) or ``"source (cache off)"``, with the reason a cached file was not used."""

    origin: str
    path: Optional[str] = None
    rejected: str = ""


def device_key(device) -> Dict[str, str]:
    """What identifies the compiler that built a binary: platform, device and driver."""
    return {
        "platform": f"{device.platform.name.strip()} {device.platform.version.strip()}",
        "device": device.name.strip(),
        "vendor": device.vendor.strip(),
        "version": device.version.strip(),
        "driver": device.driver_version.strip(),
    }


def cache_key(source: str, device, options: Sequence[str] = ()) -> Dict[str, str]:
    return dict(device_key(device), options=" ".join(options), source_sha256=hashlib.sha256(source.encode()).hexdigest())


def cache_folder(cache_dir: CacheDir = None) -> Optional[str]:
    """The folder binaries live in, or None when caching is off."""
    if cache_dir is False or os.environ.get("RELAX_VK_NO_CACHE", "") not in ("", "0"):
        return None
    if cache_dir is None or cache_dir is True:
        cache_dir = os.environ.get("RELAX_VK_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "relax_vk", "opencl")
    return os.fspath(cache_dir)


def cache_path(folder: str, key: Dict[str, str]) -> str:
    """The file of ``key`` in ``folder``: the SHA-256 of the key."""
    return _path(folder, key)


def read_verified(path: str, key: Dict[str, str]):
    """``(binary, kernel names)`` of the file at ``path`` when it holds exactly ``key`` and a binary
    matching its SHA-256 and size; ``(None, why not)`` otherwise (``""``: no file)."""
    return _read(path, key)


def write_atomic(path: str, key: Dict[str, str], binary: bytes, kernels: Sequence[str]) -> None:
    """Store ``binary`` for ``key`` at ``path`` (atomically; an unwritable folder is ignored)."""
    _write(path, key, binary, kernels)


def _path(folder: str, key: Dict[str, str]) -> str:
    return os.path.join(folder, hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest() + ".bin")


def _read(path: str, key: Dict[str, str]):
    """``(binary, kernel names)`` of a verified file, or ``(None, why not)``."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None, ""
    except OSError as err:
        return None, f"unreadable ({err})"
    if not data.startswith(_MAGIC):
        return None, "not a relax_vk binary file"
    header, sep, binary = data[len(_MAGIC) :].partition(b"\n")
    try:
        record = json.loads(header) if sep else None
    except ValueError:
        record = None
    if not isinstance(record, dict):
        return None, "malformed header"
    if record.get("key") != key:
        return None, "key differs (another source, device or driver)"
    if record.get("binary_sha256") != hashlib.sha256(binary).hexdigest() or record.get("binary_bytes") != len(binary):
        return None, "binary does not match its checksum"
    return binary, list(record.get("kernels", []))


def _write(path: str, key: Dict[str, str], binary: bytes, kernels: Sequence[str]) -> None:
    record = {"key": key, "binary_sha256": hashlib.sha256(binary).hexdigest(), "binary_bytes": len(binary), "kernels": list(kernels)}
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + json.dumps(record, sort_keys=True).encode() + b"\n" + binary)
        os.replace(tmp, path)
    except OSError:  # a read-only or full cache folder costs the next load a build, nothing else
        if os.path.exists(tmp):
            os.unlink(tmp)
