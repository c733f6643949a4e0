"""``python -m mledger.cli``: the ``mledger`` command."""

import sys

from .mledger import main

sys.exit(main())
