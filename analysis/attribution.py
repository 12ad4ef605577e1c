"""Integrated Gradients per discrete sub-vector (RepMoT, SPEC.md §4), and for lexical terms.

For a text ``x`` with word embeddings ``x = (x_1..x_n)`` and a baseline ``x'`` (every token
→ ``[UNK]``, ``[CLS]``/``[SEP]`` kept; ``[PAD]`` as an option), the attribution of token
``j`` to sub-vector ``i`` is::

    (x_j − x'_j) · ∫_0^1 ∂F_i(x' + α(x − x')) / ∂x_j dα,   F_i(x) = −||d̂_i − f_i(x)||²

with ``d̂_i`` the centroid of the code chosen for the real input (fixed), summed over the
embedding dimension. The integral uses Captum's quadrature (Gauss–Legendre by default) so
the result matches ``captum.attr.IntegratedGradients`` run on one target.

**All M sub-vectors in one batched pass.** The interpolated inputs are shared by every
target, so the forward pass runs once over ``steps`` (× documents) inputs and returns the
``[batch, M]`` matrix of ``F_i``; the M gradients are then taken from that single graph
(one reverse pass per target, ``retain_graph``), each already weighted by the quadrature
step sizes and summed over steps before it is multiplied by ``x − x'``. Several documents
share one graph too (their gradients do not interact), so a corpus costs one forward and
M backward passes per batch of documents. ``bench/attribution.py`` measures it against M
separate Captum runs. An exact per-target gradient needs one reverse pass per target (or
one forward-mode pass per token); what is shared is the forward pass, Captum's
bookkeeping and the larger, better-filled batches.

``GlobalT`` (the whole vector, ``−||d̂ − f(x)||² = Σ_i F_i`` since the OPQ rotation is
orthogonal) is by linearity of IG the sum of the M per-sub-vector attributions, so it
costs nothing extra when all M are attributed. ``RandT`` for sub-vector i is the
attribution of another sub-vector j ≠ i drawn with a fixed seed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from lexlens.models.base import Capability, InputError, LexlensError, Needs, check_texts

#: What this analysis needs of an encoder.
ATTRIBUTION_NEEDS = Needs(
    "Integrated Gradients per sub-vector", all_of=frozenset({Capability.DIFFERENTIABLE})
)

log = logging.getLogger(__name__)

ProgressFn = Callable[[float, str], None]
SPECIAL_TOKENS = frozenset({"[CLS]", "[SEP]", "[PAD]"})
BASELINES = ("unk", "pad")
MAX_STEPS = 1000
#: Rough memory budget of one vectorised backward (attention maps × targets in a chunk).
VMAP_BYTES = 768 * 2**20
GRAD_MODES = ("vmap", "loop")


@dataclass
class SubvectorAttribution:
    """IG of one text for the selected sub-vectors of a dense+PQ encoder.

    Rows of ``token_attributions``, ``attributions`` and ``delta`` follow ``subvectors``
    (all M, ``0..M-1``, unless a subset was asked for); ``codes`` always has all M.
    """

    text: str
    tokens: list[str]  # word pieces incl. [CLS]/[SEP]
    words: list[str]  # word pieces merged into words ([CLS]/[SEP] dropped)
    token_attributions: np.ndarray  # [M, n_tokens]  summed over the embedding dim
    attributions: np.ndarray  # [M, n_words]   word pieces aggregated (sum)
    delta: np.ndarray  # [M]  sum(token attributions) − (F_i(x) − F_i(x'))
    codes: np.ndarray  # [M]  chosen code per sub-vector
    global_attributions: np.ndarray  # [n_words]  GlobalT (whole vector −||d̂ − f(x)||²)
    global_delta: float
    steps: int
    truncated: bool
    subvectors: list[int] = field(default_factory=list)  # sub-vector index of each row
    word_groups: list[list[int]] = field(default_factory=list)  # token indices of each word
    target_gap: np.ndarray | None = None  # [M]  F_i(x) − F_i(x') (what the rows sum to)
    baseline: str = "unk"

    @property
    def m(self) -> int:
        return int(len(self.codes))

    def row(self, subvector: int) -> int:
        """Row of ``attributions`` holding sub-vector ``subvector``."""
        try:
            return self.subvectors.index(int(subvector))
        except ValueError:
            raise InputError(f"sub-vector {subvector} was not attributed") from None

    def to_dict(self) -> dict:
        """JSON-ready payload (lists of floats)."""
        return {
            "text": self.text,
            "tokens": list(self.tokens),
            "words": list(self.words),
            "subvectors": list(self.subvectors),
            "codes": [int(c) for c in self.codes],
            "token_attributions": self.token_attributions.tolist(),
            "attributions": self.attributions.tolist(),
            "delta": self.delta.tolist(),
            "global_attributions": self.global_attributions.tolist(),
            "global_delta": float(self.global_delta),
            "steps": int(self.steps),
            "baseline": self.baseline,
            "truncated": bool(self.truncated),
        }


# --------------------------------------------------------------------------- helpers


def group_word_pieces(tokens: Sequence[str]) -> tuple[list[str], list[list[int]]]:
    """Merge WordPiece ``##`` continuations into words; special tokens are dropped.

    Returns ``(words, groups)`` where ``groups[w]`` lists the token indices of word ``w``.
    """
    words: list[str] = []
    groups: list[list[int]] = []
    for j, tok in enumerate(tokens):
        if tok in SPECIAL_TOKENS:
            continue
        if tok.startswith("##") and groups and groups[-1][-1] == j - 1:
            words[-1] += tok[2:]
            groups[-1].append(j)
        else:
            words.append(tok)
            groups.append([j])
    return words, groups


def aggregate_words(token_scores: np.ndarray, groups: list[list[int]]) -> np.ndarray:
    """Sum token scores ``[..., n_tokens]`` into word scores ``[..., n_words]``."""
    out = np.zeros(token_scores.shape[:-1] + (len(groups),), dtype=np.float64)
    for w, idx in enumerate(groups):
        out[..., w] = token_scores[..., idx].sum(-1)
    return out


def baseline_ids(input_ids: torch.Tensor, tokenizer, baseline: str = "unk") -> torch.Tensor:
    """Every real token → ``[UNK]`` (or ``[PAD]``); ``[CLS]``, ``[SEP]`` and padding kept."""
    if baseline not in BASELINES:
        raise LexlensError(f"unknown baseline {baseline!r}: use one of {', '.join(BASELINES)}")
    fill = tokenizer.unk_token_id if baseline == "unk" else tokenizer.pad_token_id
    keep = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}
    out = input_ids.clone()
    replace = torch.ones_like(input_ids, dtype=torch.bool)
    for tid in keep:
        replace &= input_ids != tid
    out[replace] = int(fill)
    return out


def quadrature(steps: int, method: str = "gausslegendre") -> tuple[torch.Tensor, torch.Tensor]:
    """Captum's ``(alphas, step_sizes)`` for ``steps`` points of ``method``."""
    from captum.attr._utils.approximation_methods import approximation_parameters

    check_steps(steps)
    step_sizes_fn, alphas_fn = approximation_parameters(method)
    return (
        torch.tensor(alphas_fn(steps), dtype=torch.float64),
        torch.tensor(step_sizes_fn(steps), dtype=torch.float64),
    )


def check_steps(steps: int) -> int:
    if not isinstance(steps, int | np.integer) or not 1 <= steps <= MAX_STEPS:
        raise LexlensError(f"steps must be an integer between 1 and {MAX_STEPS}, got {steps!r}")
    return int(steps)


def _check_dense(encoder) -> None:
    if not hasattr(encoder, "forward_embeds") or not hasattr(encoder, "split_torch"):
        raise LexlensError(
            f"encoder {getattr(encoder, 'name', encoder)!r} is not a dense+PQ encoder: "
            "per-sub-vector attribution needs e.g. minilm-pq"
        )
    if getattr(encoder, "quantizer", None) is None:
        raise LexlensError(f"encoder {encoder.name!r} has no codebook: fit one first")


def _check_subvectors(subvectors, m: int) -> list[int]:
    if subvectors is None:
        return list(range(m))
    if isinstance(subvectors, int | np.integer):
        subvectors = [int(subvectors)]
    sel = [int(i) for i in subvectors]
    if not sel:
        raise LexlensError("select at least one sub-vector")
    bad = [i for i in sel if not 0 <= i < m]
    if bad:
        raise LexlensError(
            f"sub-vector index {bad[0]} out of range: the codebook has M={m} (0..{m - 1})"
        )
    if len(set(sel)) != len(sel):
        raise LexlensError("sub-vector indices must not repeat")
    return sel


def random_other(m: int, seed: int = 0) -> np.ndarray:
    """For each sub-vector i a random j ≠ i (RandT); ``[M]`` int, fixed by ``seed``."""
    if m < 2:
        raise LexlensError("RandT needs at least two sub-vectors")
    rng = np.random.default_rng(seed)
    draw = rng.integers(0, m - 1, size=m)
    return np.where(draw >= np.arange(m), draw + 1, draw)


def randt_attributions(attr: SubvectorAttribution, seed: int = 0) -> np.ndarray:
    """RandT word scores ``[M, n_words]``: row i = the attributions of sub-vector j(i) ≠ i."""
    if attr.subvectors != list(range(attr.m)):
        raise LexlensError("RandT needs the attributions of all M sub-vectors")
    return attr.attributions[random_other(attr.m, seed)]


# --------------------------------------------------------------------------- core


def _targets(encoder, f: torch.Tensor, dhat: torch.Tensor) -> torch.Tensor:
    """``F_i = −||d̂_i − f_i||²`` for every sub-vector: ``[B, M]`` (``dhat`` is [B, M, d])."""
    sub = encoder.split_torch(f)
    return -((dhat - sub) ** 2).sum(-1)


@torch.no_grad()
def _prepare(encoder, texts: list[str], baseline: str):
    batch = encoder.tokenize(texts)
    ids = batch.input_ids.to(encoder.device)
    mask = batch.attention_mask.to(encoder.device)
    base = baseline_ids(ids, encoder.tokenizer, baseline)
    emb = encoder.word_embeddings
    x, xb = emb(ids), emb(base)
    # Codes of the real input (d̂ fixed) and F at both ends of the path.
    f_x = encoder.forward_embeds(x, mask)
    sub = encoder.split_torch(f_x)  # [B, M, d]
    cents = encoder.centroids_torch()  # [M, K, d]
    dist = ((sub.unsqueeze(2) - cents.unsqueeze(0)) ** 2).sum(-1)  # [B, M, K]
    codes = dist.argmin(-1)  # [B, M]
    dhat = cents[torch.arange(cents.shape[0]).unsqueeze(0), codes]  # [B, M, d]
    f_b = encoder.forward_embeds(xb, mask)
    gap = _targets(encoder, f_x, dhat) - _targets(encoder, f_b, dhat)  # [B, M]
    return batch, ids, mask, x, xb, codes, dhat, gap


def _ig_batched(
    encoder,
    x: torch.Tensor,
    xb: torch.Tensor,
    mask: torch.Tensor,
    dhat: torch.Tensor,
    weights: torch.Tensor,
    steps: int,
    method: str,
    grad_mode: str = "loop",
) -> torch.Tensor:
    """Token attributions ``[B, n_targets, T]`` of targets ``weights @ F`` (weights [n, M]).

    One forward over the ``B × steps`` interpolated inputs, then one reverse pass per
    target on that retained graph (``grad_mode="loop"``, the default), or all targets as
    one vectorised backward (``"vmap"``: ``is_grads_batched``, chunks of targets bounded by
    ``VMAP_BYTES``). Measured on 2 CPU cores (bench/attribution.py), the loop is faster.
    """
    if grad_mode not in GRAD_MODES:
        raise LexlensError(f"unknown grad_mode {grad_mode!r}: use one of {', '.join(GRAD_MODES)}")
    alphas, sizes = quadrature(steps, method)
    b, t, e = x.shape
    a = alphas.to(x.dtype).to(x.device).view(1, steps, 1, 1)
    diff = (x - xb).unsqueeze(1)  # [B, 1, T, E]
    path = (xb.unsqueeze(1) + a * diff).reshape(b * steps, t, e).detach().requires_grad_(True)
    mask_s = mask.repeat_interleave(steps, dim=0)
    dhat_s = dhat.repeat_interleave(steps, dim=0)
    w = sizes.to(x.dtype).to(x.device).repeat(b)  # quadrature weight of each row [B*S]
    n = weights.shape[0]
    # Target chunk for the batched reverse pass: bounded by the attention maps it holds.
    heads = int(getattr(encoder.model.config, "num_attention_heads", 12))
    per_target = b * steps * t * max(t * heads, e) * 4
    chunk = max(1, min(n, int(VMAP_BYTES // max(per_target, 1))))
    out = torch.zeros(b, n, t, dtype=torch.float64, device=x.device)
    with torch.enable_grad():
        f = encoder.forward_embeds(path, mask_s)
        big_f = _targets(encoder, f, dhat_s)  # [B*S, M]
        wt = weights.to(big_f.dtype).to(x.device)
        if grad_mode == "loop":  # one plain reverse pass per target on the shared graph
            for k in range(n):
                scalar = ((big_f @ wt[k]) * w).sum()
                (grad,) = torch.autograd.grad(scalar, path, retain_graph=k < n - 1)
                g = grad.view(b, steps, t, e).sum(1)
                out[:, k] = (g * diff.squeeze(1)).sum(-1).double()
            return out
        for start in range(0, n, chunk):
            rows = wt[start : start + chunk]  # [c, M]
            # grad_outputs[c, r, :] = w_r · weights[c]: target c, weighted by its step size.
            go = rows.unsqueeze(1) * w.view(1, -1, 1)
            last = start + chunk >= n
            (grad,) = torch.autograd.grad(
                big_f, path, grad_outputs=go, is_grads_batched=True, retain_graph=not last
            )
            g = grad.view(len(rows), b, steps, t, e).sum(2)  # [c, B, T, E]
            out[:, start : start + len(rows)] = (
                (g * diff.squeeze(1).unsqueeze(0)).sum(-1).permute(1, 0, 2).double()
            )
    return out


def attribute_batch(
    encoder,
    texts: list[str],
    *,
    steps: int = 50,
    baseline: str = "unk",
    subvectors: Sequence[int] | int | None = None,
    method: str = "gausslegendre",
    grad_mode: str = "loop",
) -> list[SubvectorAttribution]:
    """IG for several texts in one forward pass and one (vectorised) reverse pass per target."""
    _check_dense(encoder)
    check_texts(texts)
    steps = check_steps(steps)
    m = encoder.m
    sel = _check_subvectors(subvectors, m)
    all_m = sel == list(range(m))
    weights = torch.zeros(len(sel) + (0 if all_m else 1), m, dtype=torch.float32)
    for r, i in enumerate(sel):
        weights[r, i] = 1.0
    if not all_m:
        weights[-1] = 1.0  # GlobalT target
    batch, ids, mask, x, xb, codes, dhat, gap = _prepare(encoder, texts, baseline)
    tok_attr = _ig_batched(encoder, x, xb, mask, dhat, weights, steps, method, grad_mode)
    tok_attr = tok_attr.cpu().numpy()
    gap_np = gap.double().cpu().numpy()
    out = []
    for d, text in enumerate(texts):
        n = int(mask[d].sum())
        tokens = encoder.tokenizer.convert_ids_to_tokens(ids[d, :n].tolist())
        words, groups = group_word_pieces(tokens)
        rows = tok_attr[d, : len(sel), :n]
        glob = rows.sum(0) if all_m else tok_attr[d, -1, :n]
        out.append(
            SubvectorAttribution(
                text=text,
                tokens=tokens,
                words=words,
                token_attributions=rows,
                attributions=aggregate_words(rows, groups),
                delta=rows.sum(-1) - gap_np[d, sel],
                codes=codes[d].cpu().numpy().astype(np.int64),
                global_attributions=aggregate_words(glob, groups),
                global_delta=float(glob.sum() - gap_np[d].sum()),
                steps=steps,
                truncated=bool(batch.truncated[d]),
                subvectors=list(sel),
                word_groups=groups,
                target_gap=gap_np[d, sel],
                baseline=baseline,
            )
        )
    return out


def attribute_subvectors(
    encoder,
    text: str,
    *,
    steps: int = 50,
    baseline: str = "unk",
    subvectors: Sequence[int] | int | None = None,
    method: str = "gausslegendre",
    grad_mode: str = "loop",
) -> SubvectorAttribution:
    """IG of ``text`` for every (or the selected) sub-vector, all in one batched pass."""
    if not isinstance(text, str):
        raise InputError("pass one text as a string")
    return attribute_batch(
        encoder,
        [text],
        steps=steps,
        baseline=baseline,
        subvectors=subvectors,
        method=method,
        grad_mode=grad_mode,
    )[0]


def attribute_corpus(
    encoder,
    texts: list[str],
    *,
    steps: int = 50,
    baseline: str = "unk",
    subvectors: Sequence[int] | int | None = None,
    batch_size: int = 4,
    progress: ProgressFn | None = None,
) -> list[SubvectorAttribution]:
    """:func:`attribute_batch` over a corpus, ``batch_size`` texts per pass (length-sorted)."""
    check_texts(texts)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    results: list[SubvectorAttribution | None] = [None] * len(texts)
    for start in range(0, len(texts), max(1, int(batch_size))):
        idx = order[start : start + max(1, int(batch_size))]
        chunk = attribute_batch(
            encoder, [texts[i] for i in idx], steps=steps, baseline=baseline, subvectors=subvectors
        )
        for i, r in zip(idx, chunk, strict=True):
            results[i] = r
        done = min(start + len(idx), len(texts))
        log.info("attributed %d/%d texts", done, len(texts))
        if progress is not None:
            progress(done / len(texts), f"attributing texts {done}/{len(texts)}")
    return [r for r in results if r is not None]


def attribute_single_target(
    encoder,
    text: str,
    i: int | None,
    steps: int = 50,
    *,
    baseline: str = "unk",
    method: str = "gausslegendre",
) -> tuple[np.ndarray, float]:
    """Reference: one plain Captum ``IntegratedGradients`` run for sub-vector ``i``.

    ``i=None`` attributes the whole vector (GlobalT). Returns ``(token attributions
    [n_tokens], convergence delta)`` as Captum computes them.
    """
    from captum.attr import IntegratedGradients

    _check_dense(encoder)
    check_texts([text])
    steps = check_steps(steps)
    if i is not None:
        _check_subvectors([i], encoder.m)
    batch, ids, mask, x, xb, codes, dhat, _ = _prepare(encoder, [text], baseline)

    def forward(embeds: torch.Tensor) -> torch.Tensor:
        n = embeds.shape[0]
        f = encoder.forward_embeds(embeds, mask.expand(n, -1))
        big_f = _targets(encoder, f, dhat.expand(n, -1, -1))
        return big_f.sum(1) if i is None else big_f[:, i]

    ig = IntegratedGradients(forward)
    attr, delta = ig.attribute(
        x, baselines=xb, n_steps=steps, method=method, return_convergence_delta=True
    )
    return attr.sum(-1)[0].double().cpu().numpy(), float(delta[0])


# --------------------------------------------------------------------------- lexical


def attribute_lexical_term(
    encoder,
    text: str,
    term_index: int,
    steps: int = 50,
    *,
    baseline: str = "unk",
    method: str = "gausslegendre",
) -> tuple[list[str], np.ndarray, float]:
    """IG of one vocabulary weight of a SPLADE encoder to its input tokens.

    Target: ``V(x)[term] = max_t log(1 + relu(logit_{t,term}))`` (the pooled weight). The
    max over tokens and the ReLU make the target piecewise smooth: along the path the
    gradient flows only into the token that holds the max at each point, and is zero while
    the logit is negative. IG's completeness still holds in the limit (the target is
    continuous), but the quadrature delta is larger than for a smooth target when the
    argmax switches between steps; raise ``steps`` if the reported delta is large.

    Returns ``(tokens incl. [CLS]/[SEP], attributions [n_tokens], convergence delta)``.
    """
    from captum.attr import IntegratedGradients

    model = getattr(encoder, "model", None)
    tokenizer = getattr(encoder, "tokenizer", None)
    if model is None or tokenizer is None or not hasattr(model, "get_input_embeddings"):
        raise LexlensError(
            f"encoder {getattr(encoder, 'name', encoder)!r} has no masked-LM text tower to attribute"
        )
    if not hasattr(model, "config") or not hasattr(model.config, "vocab_size"):
        raise LexlensError(f"encoder {encoder.name!r} is not a masked-LM (SPLADE) encoder")
    check_texts([text])
    steps = check_steps(steps)
    vocab_size = int(model.config.vocab_size)
    if not isinstance(term_index, int | np.integer) or not 0 <= int(term_index) < vocab_size:
        raise LexlensError(f"term index {term_index!r} out of range 0..{vocab_size - 1}")
    from lexlens.models.text_io import tokenize_batch

    batch = tokenize_batch(tokenizer, [text], encoder.max_length)
    ids = batch.input_ids.to(encoder.device)
    mask = batch.attention_mask.to(encoder.device)
    emb = model.get_input_embeddings()
    with torch.no_grad():
        x = emb(ids)
        xb = emb(baseline_ids(ids, tokenizer, baseline))
    term = int(term_index)

    def forward(embeds: torch.Tensor) -> torch.Tensor:
        n = embeds.shape[0]
        m = mask.expand(n, -1)
        logits = model(inputs_embeds=embeds, attention_mask=m).logits[..., term]  # [n, T]
        return (torch.log1p(torch.relu(logits)) * m).amax(dim=1)

    # The shared model is not touched (no requires_grad toggling): gradients are taken
    # with respect to the input embeddings only.
    attr, delta = IntegratedGradients(forward).attribute(
        x, baselines=xb, n_steps=steps, method=method, return_convergence_delta=True
    )
    tokens = tokenizer.convert_ids_to_tokens(ids[0].tolist())
    return tokens, attr.sum(-1)[0].double().cpu().numpy(), float(delta[0])
