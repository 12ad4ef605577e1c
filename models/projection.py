"""Max-pooled vocabulary projection over packed tokens: the fast path of lexical text towers.

SPLADE's ``log(1 + relu(·))`` and VDR's ``elu1p`` are monotonic non-decreasing, and a
projection's bias is the same for every token, so for one text::

    max_t act(h_t · Wᵀ + b) = act(max_t (h_t · Wᵀ) + b)

When per-token rows are not kept, the encoders pack the hidden states of the batch's
real tokens into one ``[n, H]`` matrix (no padding rows), multiply it by the vocabulary
matrix ``W [|V|, H]`` in chunks of at most :data:`ROWS` rows written into one reused
buffer, and reduce each text's rows with a max. The padded ``[batch, length, |V|]``
tensor never exists; the largest temporary is ``[ROWS, |V|]`` (31 MB for 30,522 terms).
"""

from __future__ import annotations

import torch

#: Rows of the ``[rows, |V|]`` logits buffer (measured on 2 CPU cores: 256 keeps the
#: matrix multiply near its rate without a buffer that falls out of cache between uses).
ROWS = 256


def pack(hidden: torch.Tensor, select: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
    """``[B, T, H]`` and a ``[B, T]`` bool selection → ``[n, H]`` rows and rows per text."""
    return hidden[select], [int(c) for c in select.sum(dim=1).tolist()]


def segment_max_projection(
    rows: torch.Tensor, weight: torch.Tensor, lengths: list[int], *, chunk: int = ROWS
) -> torch.Tensor:
    """``[len(lengths), |V|]``: per segment of ``rows``, the max over its rows of ``rows @ Wᵀ``.

    ``rows [n, H]`` hold the segments one after another (``lengths`` rows each, every
    length ≥ 1); ``weight`` is ``[|V|, H]``. At most ``chunk × |V|`` logits exist at once;
    a segment may span chunks.
    """
    n, vocab = rows.shape[0], weight.shape[0]
    segments = _segment_ids(lengths, n, rows.device)
    out = torch.full((len(lengths), vocab), float("-inf"), dtype=rows.dtype, device=rows.device)
    buffer = torch.empty((min(chunk, n), vocab), dtype=rows.dtype, device=rows.device)
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        logits = torch.mm(rows[start:stop], weight.T, out=buffer[: stop - start])
        _scatter_max(out, segments[start:stop], logits)
    return out


def segment_max(rows: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    """``[len(lengths), |V|]``: the max over each segment of ``rows [n, |V|]``."""
    segments = _segment_ids(lengths, rows.shape[0], rows.device)
    out = torch.full(
        (len(lengths), rows.shape[1]), float("-inf"), dtype=rows.dtype, device=rows.device
    )
    return _scatter_max(out, segments, rows)


def _segment_ids(lengths: list[int], n: int, device: torch.device) -> torch.Tensor:
    if sum(lengths) != n or any(length < 1 for length in lengths):
        raise ValueError("lengths must be positive and sum to the number of rows")
    counts = torch.tensor(lengths, device=device)
    return torch.repeat_interleave(torch.arange(len(lengths), device=device), counts)


def _scatter_max(out: torch.Tensor, segments: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``out[s] = max(out[s], rows of segment s)`` in one operation.

    One parallel region, not one per text: on a busy 2-core machine each region can wait a
    time slice.
    """
    index = segments[:, None].expand(rows.shape[0], rows.shape[1])
    return out.scatter_reduce_(0, index, rows, "amax")


def project_rows(
    rows: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, *, chunk: int = ROWS
) -> torch.Tensor:
    """``rows @ Wᵀ + b`` for every row (kept per-token rows), ``chunk`` rows at a time."""
    out = torch.empty((rows.shape[0], weight.shape[0]), dtype=rows.dtype, device=rows.device)
    for start in range(0, rows.shape[0], chunk):
        torch.mm(rows[start : start + chunk], weight.T, out=out[start : start + chunk])
    if bias is not None:
        out += bias
    return out
