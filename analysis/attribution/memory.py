"""How many quadrature nodes of one text go through the model at once.

The nodes of one text run in chunks whose retained autograd graph fits a byte budget: the
bytes autograd saves per sequence are counted once per (model, length) on a one- and a
two-sequence probe, so any allowed step count × length stays within the budget.
"""

from __future__ import annotations

import torch

from lexlens.analysis.attribution.objective import Prepared, targets

#: Bytes the retained graph of one chunk of nodes may hold (backward transients included).
MEMORY_BUDGET = 512 * 2**20

_PROBES: dict[tuple[int, int], int] = {}


def _bytes_per_sequence(encoder, prep: Prepared) -> int:
    """Bytes autograd saves for one more sequence of this length (cached per model, length)."""
    n = int(prep.x.shape[0])
    key = (id(encoder.word_embeddings), n)
    if key in _PROBES:
        return _PROBES[key]
    sizes = []
    for rows in (1, 2):
        saved = [0]

        def pack(t: torch.Tensor, saved=saved) -> torch.Tensor:
            saved[0] += t.numel() * t.element_size()
            return t

        path = prep.x.unsqueeze(0).expand(rows, -1, -1).clone().requires_grad_(True)
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            targets(encoder, encoder.forward_embeds(path, prep.mask.expand(rows, -1)), prep.dhat)
        sizes.append(saved[0])
    per = max(sizes[1] - sizes[0], n * prep.x.shape[1] * 4)
    _PROBES[key] = per
    return per


def chunk_size(encoder, prep: Prepared, budget: int = MEMORY_BUDGET) -> int:
    """Nodes per forward: the retained graph (×1.5 for backward transients) within ``budget``."""
    return max(1, int(budget // (1.5 * _bytes_per_sequence(encoder, prep))))
