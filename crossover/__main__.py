"""`python -m crossover`."""

import sys

from .cli import main

sys.exit(main())
