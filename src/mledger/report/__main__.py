"""``python -m mledger.report OUT_DIR [-o REPORT_DIR] [--max-unacked-ranges-to-persist N] [--top 25]``."""

import sys

from ._command import main

sys.exit(main())
