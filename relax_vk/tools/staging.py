"""Output folders written all or nothing: a sibling staging folder renamed into place.

``relax-vk build -o DIR`` and ``relax-vk tune --bundle DIR`` write several files; an interrupted
or failed run must never leave a half-written folder (or destroy the previous one before the new
one is complete). :func:`staged_folder` gives the writer a fresh folder next to ``out`` and, only
when the block finishes, replaces ``out`` with it; on any error the staging folder is removed and
``out`` is left as it was. A folder ``out`` that holds a file the new one does not (the user's own:
the model, with ``-o`` on its folder) is never replaced.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Iterator


@contextlib.contextmanager
def staged_folder(out: str, prefix: str = ".relax-vk-") -> Iterator[str]:
    """Yield a staging folder beside ``out``; move it to ``out`` when the block succeeds."""
    out = os.path.abspath(out)
    parent = os.path.dirname(out) or "."
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=prefix, dir=parent)
    os.chmod(staging, 0o755)
    try:
        yield staging
        if os.path.exists(out) and not os.path.isdir(out):
            raise FileExistsError(f"{out} is a file, not a folder: the output was not written (name a folder, or a FILE.rvk)")
        if os.path.isdir(out):
            # only a folder of what this output writes is replaced: never a folder of the user's own
            # files (the model itself, with -o on its folder or on '.')
            foreign = sorted(set(os.listdir(out)) - set(os.listdir(staging)))
            if foreign:
                shown = ", ".join(foreign[:4]) + (f" and {len(foreign) - 4} more" if len(foreign) > 4 else "")
                raise FileExistsError(f"{out} holds files this output does not write ({shown}): it was not replaced; "
                                      "name a new or empty folder, or one an earlier run wrote")  # fmt: skip
            shutil.rmtree(out)
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
