"""`python -m linattn …`: the `linattn` command, for an environment whose scripts folder is not on PATH."""

import sys

from linattn.cli import main

sys.exit(main())
