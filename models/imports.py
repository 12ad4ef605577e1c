"""One lock for the first imports of the libraries that a job thread and a page may make at once.

transformers resolves its names lazily (``_LazyModule.__getattr__``), and so do
huggingface_hub and, through transformers, sentence-transformers: two threads resolving
names of one of them at the same time get ``ImportError: cannot import name 'AutoTokenizer'
from 'transformers'``. A page rerun and a job thread of the server are two such threads, so
every import of these libraries in Lexlens holds :data:`HEAVY_IMPORTS` (re-entrant: an
import under it may reach another). Importing Lexlens itself stays free of them.
"""

from __future__ import annotations

import threading

#: Held while transformers, sentence-transformers or huggingface_hub names are imported.
HEAVY_IMPORTS = threading.RLock()
