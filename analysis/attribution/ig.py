"""Integrated Gradients per discrete sub-vector (Sundararajan et al. 2017, "Axiomatic
Attribution for Deep Networks"; per sub-vector as in RepMoT).

The attribution of token ``j`` to sub-vector ``i`` is::

    (x_j − x'_j) · ∫_0^1 ∂F_i(x' + α(x − x')) / ∂x_j dα

(``F_i`` and the baseline ``x'``: :mod:`~lexlens.analysis.attribution.objective`), summed
over the embedding dimension; word pieces are summed into words.

**Steps.** A fixed step count uses that many Gauss–Legendre nodes. ``steps=None`` is
adaptive: nested Clenshaw–Curtis levels (:mod:`~lexlens.analysis.attribution.quadrature`),
stopping once every sub-vector's completeness gap ``delta_i = Σ_j attr_ij − (F_i(x) −
F_i(x'))`` satisfies ``|delta_i| ≤ tolerance · max(|F_i(x) − F_i(x')|, mean_k |F_k(x) −
F_k(x')|) + 1e-6``. The floor (the mean gap over all M sub-vectors) keeps a sub-vector whose
two ends are about equally far from its code from demanding unbounded relative precision;
1e-6 absorbs float32 rounding.

**Cost.** The interpolated inputs are shared by every target, so each node costs one
forward pass and one input-gradient backward pass per target (M, plus one for GlobalT when
only some sub-vectors are asked for): the floor for exact per-target gradients. GlobalT
over all M is, by linearity, the sum of the M per-sub-vector attributions. Nodes run in
chunks that fit a memory budget (:mod:`~lexlens.analysis.attribution.memory`), or of
``batch_size`` nodes when the options give one, with the thread count of
:mod:`~lexlens.analysis.core.threads`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from lexlens.analysis.attribution.arguments import selected_subvectors
from lexlens.analysis.attribution.memory import MEMORY_BUDGET, chunk_size
from lexlens.analysis.attribution.objective import Prepared, prepare, targets
from lexlens.analysis.attribution.options import ATTRIBUTION_NEEDS, IgOptions
from lexlens.analysis.attribution.quadrature import ADAPTIVE_LEVELS, quadrature
from lexlens.analysis.attribution.subvector import SubvectorAttribution
from lexlens.analysis.attribution.words import aggregate_words
from lexlens.analysis.core.arguments import encoder_argument, progress_argument, texts_argument
from lexlens.analysis.core.results import Progress
from lexlens.analysis.core.threads import analysis_threads, thread_count
from lexlens.analysis.core.words import group_word_pieces

log = logging.getLogger(__name__)

#: Absolute slack of the convergence test: float32 sums carry rounding of about this size.
ROUNDING = 1e-6


class _Evaluator:
    """Per-node token gradients ``g[p, target, t] = Σ_e ∂F_target/∂x_te(α_p) · (x − x')_te``."""

    def __init__(self, encoder, prep: Prepared, weights: torch.Tensor | None, chunk: int):
        self.encoder, self.prep, self.chunk = encoder, prep, chunk
        self.weights = weights  # [n_targets, M] weights, or None for the M sub-vectors
        self.diff = prep.x - prep.xb  # [T, E]

    @property
    def n_targets(self) -> int:
        return self.prep.dhat.shape[0] if self.weights is None else self.weights.shape[0]

    def __call__(self, alphas: np.ndarray, tick: Callable[[float, int], None]) -> np.ndarray:
        """Gradients at ``alphas``; ``tick(fraction done, target)`` after each backward."""
        prep, enc = self.prep, self.encoder
        t = prep.x.shape[0]
        out = np.zeros((len(alphas), self.n_targets, t), dtype=np.float64)
        for start in range(0, len(alphas), self.chunk):
            a = torch.as_tensor(alphas[start : start + self.chunk], dtype=prep.x.dtype)
            a = a.to(prep.x.device).view(-1, 1, 1)
            path = (prep.xb.unsqueeze(0) + a * self.diff.unsqueeze(0)).requires_grad_(True)
            with torch.enable_grad():
                big_f = targets(
                    enc, enc.forward_embeds(path, prep.mask.expand(len(a), -1)), prep.dhat
                )
                if self.weights is not None:
                    big_f = big_f @ self.weights.to(big_f.dtype).T
                n = big_f.shape[1]
                for k in range(n):
                    (grad,) = torch.autograd.grad(big_f[:, k].sum(), path, retain_graph=k < n - 1)
                    out[start : start + len(a), k] = (
                        (grad * self.diff).sum(-1).double().cpu().numpy()
                    )
                    tick((start + len(a) * (k + 1) / n) / len(alphas), k + 1)
        return out


def _target_weights(sel: list[int], m: int) -> torch.Tensor:
    """The targets' rows over the M sub-vectors: each selected one, then the whole vector
    (GlobalT)."""
    weights = torch.zeros(len(sel) + 1, m)
    for r, i in enumerate(sel):
        weights[r, i] = 1.0
    weights[-1] = 1.0
    return weights


def _levels(steps: int | None, method: str, max_steps: int) -> tuple[list[int], str]:
    """The node counts to try and their rule: ``steps`` with ``method``, or the nested
    Clenshaw–Curtis levels up to ``max_steps`` (adaptive)."""
    if steps is not None:
        return [steps], method
    return [n for n in ADAPTIVE_LEVELS if n <= max_steps] or [ADAPTIVE_LEVELS[0]], "clenshaw-curtis"


def _attribute_one(
    encoder, text: str, sel: list[int], options: IgOptions, budget: int, report: Progress
) -> SubvectorAttribution:
    """IG of one text for the sub-vectors ``sel`` (fixed rule, or adaptive levels)."""
    steps = options.steps
    prep = prepare(encoder, text, options.baseline)
    all_m = sel == list(range(prep.dhat.shape[0]))
    weights = None if all_m else _target_weights(sel, prep.dhat.shape[0])
    chunk = options.batch_size or chunk_size(encoder, prep, budget)
    evaluate = _Evaluator(encoder, prep, weights, chunk)
    gap_sel = prep.gap[sel]
    floor = float(np.abs(prep.gap).mean())
    limit = options.tolerance * np.maximum(np.abs(gap_sel), floor) + ROUNDING
    levels, rule = _levels(steps, options.method, options.max_steps)
    g_prev: np.ndarray | None = None
    for li, n_nodes in enumerate(levels):
        alphas, node_weights = quadrature(n_nodes, rule)
        # A doubled Clenshaw–Curtis rule only adds its odd nodes.
        todo = np.arange(n_nodes) if g_prev is None else np.arange(1, n_nodes, 2)

        def tick(u: float, target: int, li=li, n_nodes=n_nodes) -> None:
            # Adaptive: level li fills the bar from 1 − 2^−li to 1 − 2^−(li+1) (monotone,
            # whatever level it stops at); a fixed rule fills it once.
            what = f"sub-vector {target}/{len(sel)}" if target <= len(sel) else "GlobalT"
            report(u if steps is not None else 1 - 0.5 ** (li + u), f"{n_nodes} nodes · {what}")

        g_new = evaluate(alphas[todo], tick)
        if g_prev is None:
            g = g_new
        else:
            g = np.empty((n_nodes,) + g_new.shape[1:])
            g[0::2], g[1::2] = g_prev, g_new
        tok = np.tensordot(node_weights, g, axes=1)  # [n_targets, T]
        delta = tok[: len(sel)].sum(-1) - gap_sel
        converged = bool(np.all(np.abs(delta) <= limit))
        g_prev = g
        if converged and steps is None:
            break
    report(1.0, f"{n_nodes} nodes")
    rows = tok[: len(sel)]
    glob = rows.sum(0) if all_m else tok[-1]
    words, groups = group_word_pieces(prep.tokens)
    return SubvectorAttribution(
        text=text,
        tokens=prep.tokens,
        words=words,
        token_attributions=rows,
        attributions=aggregate_words(rows, groups),
        delta=delta,
        codes=prep.codes,
        global_attributions=aggregate_words(glob, groups),
        global_delta=float(glob.sum() - prep.gap.sum()),
        steps=int(n_nodes),
        truncated=prep.truncated,
        subvectors=list(sel),
        word_groups=groups,
        target_gap=gap_sel,
        baseline=options.baseline,
        baseline_tokens=prep.baseline_tokens,
        method=rule,
        converged=converged,
    )


def attribute_texts(
    encoder,
    texts: list[str],
    *,
    options: IgOptions | None = None,
    memory_budget: int = MEMORY_BUDGET,
    progress: Progress | None = None,
    **given: Any,
) -> list[SubvectorAttribution]:
    """IG of each text for every (or the selected) sub-vector of the encoder's codebook.

    Options: :class:`IgOptions` (or its fields as keywords). ``steps=None``: adaptive (see
    the module notes); an integer: that many nodes of ``method``. Progress is reported per
    text, node chunk and sub-vector.
    """
    options = IgOptions.of(options, **given)
    texts = texts_argument(texts)
    progress = progress_argument(progress)
    encoder = encoder_argument(encoder, needs=ATTRIBUTION_NEEDS)
    sel = selected_subvectors(options.subvectors, encoder.m)
    analysis_threads()  # a bad LEXLENS_THREADS fails here, before any work
    weights = np.array([max(len(t), 1) for t in texts], dtype=np.float64)
    before = np.concatenate([[0.0], np.cumsum(weights)]) / weights.sum()
    out = []
    for i, text in enumerate(texts):

        def report(frac: float, msg: str, i=i) -> None:
            if progress is not None:
                total = before[i] + frac * (before[i + 1] - before[i])
                progress(min(1.0, float(total)), f"text {i + 1}/{len(texts)} · {msg}")

        with thread_count():
            out.append(_attribute_one(encoder, text, sel, options, int(memory_budget), report))
        log.info("attributed %d/%d texts", i + 1, len(texts))
    return out
