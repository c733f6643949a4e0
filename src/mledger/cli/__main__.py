"""``python -m mledger.cli``: the ``mledger`` command."""

import sys

from ._mledger import main

sys.exit(main())
