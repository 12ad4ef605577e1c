"""``python -m lexlens.analysis.cli`` runs the command line."""

import sys

from lexlens.analysis.cli import main

sys.exit(main())
