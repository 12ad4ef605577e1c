"""``python -m lexlens.app.cli`` runs the command line."""

import sys

from lexlens.app.cli import main

sys.exit(main())
