"""``python -m tilecore.cli``: the ``tilecore`` command."""

import sys

from tilecore.cli import main

sys.exit(main())
