"""`python -m myir show|run|demo` (see `myir.cli`)."""

import sys

from myir.cli import main

if __name__ == "__main__":
    sys.exit(main())
