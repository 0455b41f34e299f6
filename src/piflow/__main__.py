"""`python -m piflow`: the `piflow` command."""

import sys

from piflow.cli import main

sys.exit(main())
