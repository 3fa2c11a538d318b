"""``rvk-run`` on the PATH: runs the native ``rvk-run`` that ``pip install`` put inside the package
(``relax_vk/runtime/lib/``), else the source tree's build (``native/build/``), with the same arguments."""

from __future__ import annotations

import os
import sys
from typing import List, Optional

from .library import DEFAULT_LIBRARY, package_library


def executable() -> str:
    """The native rvk-run binary: the source tree's build (a checkout), else the installed package's."""
    local = DEFAULT_LIBRARY.parent / "rvk-run"
    found = local if local.exists() else package_library("rvk-run")
    if found is None:
        raise SystemExit("rvk-run: the native tool is not built: run `make setup` (or `pip install .`)")
    return str(found)


def main(argv: Optional[List[str]] = None) -> int:
    path = executable()
    os.execv(path, [path, *(sys.argv[1:] if argv is None else argv)])
    return 127  # (execv does not return)


if __name__ == "__main__":
    sys.exit(main())
