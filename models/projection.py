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
    length ≥ 1); ``weight`` is ``[|V|, H]``. At most ``chunk × |V|`` logits exist at once.
    """
    n, vocab = rows.shape[0], weight.shape[0]
    if sum(lengths) != n or any(length < 1 for length in lengths):
        raise ValueError("lengths must be positive and sum to the number of rows")
    out = torch.empty((len(lengths), vocab), dtype=rows.dtype, device=rows.device)
    buffer = torch.empty((min(chunk, n), vocab), dtype=rows.dtype, device=rows.device)
    seen = [False] * len(lengths)
    ends = torch.tensor(lengths).cumsum(0).tolist()
    text = 0
    for start in range(0, n, chunk):
        stop = min(start + chunk, n)
        logits = torch.mm(rows[start:stop], weight.T, out=buffer[: stop - start])
        while text < len(lengths) and ends[text] - lengths[text] < stop:
            first = max(ends[text] - lengths[text], start)
            last = min(ends[text], stop)
            part = logits[first - start : last - start].amax(dim=0)
            if seen[text]:
                torch.maximum(out[text], part, out=out[text])
            else:
                out[text] = part
                seen[text] = True
            if ends[text] > stop:  # the text goes on in the next chunk
                break
            text += 1
    return out


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
