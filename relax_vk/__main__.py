"""``python -m relax_vk`` is the ``relax-vk`` command line."""

import sys

from .tools.cli import main

sys.exit(main())
