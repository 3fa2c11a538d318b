"""Files written whole: a temporary file in the destination's folder, renamed over the destination.

``tempfile.mkstemp`` makes its file readable by its owner only (0600); a file a user asks for should
have the mode any new file of theirs gets (0666 less the umask, as ``open(path, "w")`` gives), so
that another user or a deployment step can read it.
"""

from __future__ import annotations

import os


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def replace_with_file(staging: str, path: str) -> None:
    """Give ``staging`` a new file's mode (0666 less the umask) and rename it over ``path``."""
    os.chmod(staging, 0o666 & ~_umask())
    os.replace(staging, path)
