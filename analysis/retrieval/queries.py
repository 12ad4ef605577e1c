"""How a query becomes a vector in a collection's vocabulary, and which encoder makes it.

A text query is the query encoder's gated vector ``E_q = V_q ⊙ G_q`` (``parametric``) or
the bag of its own tokens (``bow``, VDR's nonparametric query; a D2S head over dense
features makes only these); an image query is the image encoder's gated vector. The query
encoder must share the collection's vocabulary. :class:`QuerySpec` is the one place a query
vector is made: search, an evaluation, export, the systems comparison, the Query ⊙ Document
contributions, the counterfactuals' and faithfulness checks' edited queries all ask it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lexlens.analysis.collections.store import vocab_hash
from lexlens.analysis.collections.stored import is_stored
from lexlens.analysis.core.arguments import encoder_argument
from lexlens.analysis.core.collection import Collection
from lexlens.analysis.core.gating import DEFAULT_GATE_K, bow_query, gate
from lexlens.analysis.core.results import Progress
from lexlens.analysis.core.truncation import Truncation, opening, truncation
from lexlens.models.base import Capability, Encoder, InputError, LexicalEncoding, Needs
from lexlens.models.registry import partner_for

#: A text query: a lexical text encoder; in the bag-of-words mode a head over dense
#: features (D2S) serves too: it has no text tower but tokenises into its vocabulary.
TEXT_QUERY_NEEDS = Needs("a text query", all_of=frozenset({Capability.TEXT_LEXICAL}))
BOW_QUERY_NEEDS = Needs(
    "a bag-of-words text query",
    any_of=frozenset({Capability.TEXT_LEXICAL, Capability.FEATURE_LEXICAL}),
)
IMAGE_QUERY_NEEDS = Needs("an image query", all_of=frozenset({Capability.IMAGE_LEXICAL}))


def text_query_needs(mode: str) -> Needs:
    """What a text query in ``mode`` needs of its encoder."""
    return BOW_QUERY_NEEDS if mode == "bow" else TEXT_QUERY_NEEDS


#: Queries encoded in one batch by :meth:`QuerySpec.vectors` (an evaluation's, an export's).
ENCODE_BATCH = 64
#: Edited texts handed to the encoder at once by :meth:`QuerySpec.encode_sparse` (it
#: batches them by length itself).
SPARSE_GROUP = 2048

#: A query vector kept sparse: (columns int64, weights float32).
Sparse = tuple[np.ndarray, np.ndarray]
_EMPTY: Sparse = (np.zeros(0, np.int64), np.zeros(0, np.float32))


@dataclass(frozen=True)
class QuerySpec:
    """The one rule that turns a query into its vector: the encoder, the mode and the gate.

    A text's vector is :meth:`of` its encoding — the gated ``E_q = V ⊙ G`` (``parametric``)
    or the bag of its own tokens (``bow``; a head over dense features, which has no text
    tower, tokenises into its vocabulary) — and an image's is always gated. Each way of
    asking encodes as its callers always have (one text alone with its per-unit rows, a
    benchmark's queries in batches without them, edited texts each once and kept sparse),
    and :attr:`calls` counts the inputs the model encoded."""

    encoder: Encoder
    mode: str = "parametric"
    gate_k: int = DEFAULT_GATE_K
    #: query vectors already made (A and B are used by every method of an evaluation)
    _memo: dict = field(default_factory=dict, compare=False, repr=False)
    #: the texts cut to the encoder's token limit, as they were encoded
    _cut: dict = field(default_factory=dict, compare=False, repr=False)
    #: the sparse vectors of texts encoded by :meth:`encode_sparse`
    _kept: dict = field(default_factory=dict, compare=False, repr=False)
    _count: list = field(default_factory=lambda: [0], compare=False, repr=False)

    @property
    def calls(self) -> int:
        """The texts and images the model encoded through this rule."""
        return self._count[0]

    def of(self, encoding: LexicalEncoding) -> np.ndarray:
        """A text's query vector from its encoding: gated, or its bag of words (mode bow)."""
        if self.mode == "bow":
            return bow_query(encoding, self.encoder.vocab, self.encoder.bow_normalize)
        return gate(encoding, self.encoder.vocab, self.gate_k)

    def _encodings(self, texts: list[str], units: bool) -> list[LexicalEncoding]:
        """The model's encodings of ``texts`` as queries, in one call (``units``: with their
        per-unit rows); a feature head's own tokens in mode bow."""
        if self.mode == "bow" and not self.encoder.can(Capability.TEXT_LEXICAL):
            return self.encoder.tokenize_texts(texts)
        encodings = self.encoder.encode_texts(texts, side="query", keep_units=units)
        self._count[0] += len(texts)
        return encodings

    def encode(
        self, texts: Sequence[str], *, units: bool = False
    ) -> list[tuple[np.ndarray, LexicalEncoding]]:
        """Each text's vector and encoding, the texts handed to the model at once."""
        return [(self.of(e), e) for e in self._encodings(list(texts), units)]

    def encode_with_units(self, text: str) -> tuple[np.ndarray, LexicalEncoding]:
        """One text's vector and its encoding with per-unit rows (provenance), encoded alone."""
        return self.encode([text], units=True)[0]

    def vector(self, text: str) -> np.ndarray:
        """One typed query's vector, encoded alone (read-only, kept per text; a text cut
        to the token limit is listed by :meth:`truncations`)."""
        if not isinstance(text, str) or not text.strip():
            raise InputError("the query is empty: type some words")
        if text not in self._memo:
            vector, enc = self.encode_with_units(text)
            cut = truncation(self.encoder, text, enc, f"query {opening(text)}")
            if cut is not None:
                self._cut[text] = cut
            vector.setflags(write=False)
            self._memo[text] = vector
        return self._memo[text]

    def vectors(
        self,
        texts: Sequence[str],
        progress: Progress | None = None,
        *,
        names: Sequence[str] | None = None,
        cuts: list[Truncation] | None = None,
    ) -> list[np.ndarray]:
        """Every query's vector, encoded in batches of :data:`ENCODE_BATCH`. ``cuts``, when
        given, receives each query cut to the encoder's token limit (named ``query`` and its
        id from ``names``)."""
        vectors: list[np.ndarray] = []
        for start in range(0, len(texts), ENCODE_BATCH):
            batch = list(texts[start : start + ENCODE_BATCH])
            for i, (vector, enc) in enumerate(self.encode(batch), start):
                if cuts is not None and enc.truncated:
                    name = f"query {names[i]}" if names else f"query {opening(texts[i])}"
                    cuts.append(truncation(self.encoder, texts[i], enc, name))
                vectors.append(vector)
            if progress:
                progress(min(1.0, (start + len(batch)) / len(texts)), "encoding the queries")
        return vectors

    def truncations(self) -> list[Truncation]:
        """The query texts encoded by :meth:`vector` that were cut to the token limit."""
        return list(self._cut.values())

    # ------------------------------------------------------------------ kept sparse
    def _sparse_of(self, encoding: LexicalEncoding) -> Sparse:
        """:meth:`of` an encoding, kept sparse (when the top-k holds every positive weight
        and the others are zero, the gate keeps ``V`` as it is: its non-zero terms are read
        without the gate's pass)."""
        weights = None if self.mode == "bow" else encoding.weights
        k = self.gate_k
        if weights is not None and k > 0 and np.count_nonzero(weights) <= k and weights.min() >= 0:
            vector = weights.astype(np.float32, copy=True)  # E_q = V
        else:
            vector = self.of(encoding)
        cols = np.flatnonzero(vector)
        return cols.astype(np.int64), vector[cols].astype(np.float32)

    def encode_sparse(self, texts: Sequence[str]) -> None:
        """Encode every text not kept yet (distinct, in groups of :data:`SPARSE_GROUP`) and
        keep its vector sparse. A text left with no word (every word deleted) is an empty
        query: the encoder refuses it and no system would run it; its vector is zero."""
        todo = [t for t in dict.fromkeys(texts) if t not in self._kept]
        for t in [t for t in todo if not t.strip()]:
            self._kept[t] = _EMPTY
        todo = [t for t in todo if t.strip()]
        for start in range(0, len(todo), SPARSE_GROUP):
            group = todo[start : start + SPARSE_GROUP]
            for text, enc in zip(group, self._encodings(group, False), strict=True):
                self._kept[text] = self._sparse_of(enc)

    def sparse(self, text: str) -> Sparse:
        """The kept sparse vector of ``text`` (encoded now if it is not)."""
        if text not in self._kept:
            self.encode_sparse([text])
        return self._kept[text]

    # ------------------------------------------------------------------ images
    def image_with_units(self, image: Any) -> tuple[np.ndarray, LexicalEncoding]:
        """An image query's gated vector and its encoding with per-unit rows (its cells)."""
        enc = self.encoder.encode_images([image], keep_units=True)[0]
        self._count[0] += 1
        return gate(enc, self.encoder.vocab, self.gate_k), enc

    def image(self, image: Any) -> np.ndarray:
        """An image query's gated vector."""
        return self.image_with_units(image)[0]

    def images(self, images: Sequence[Any]) -> list[np.ndarray]:
        """Images' gated vectors, encoded at once (without per-unit rows)."""
        encodings = self.encoder.encode_images(list(images), keep_units=False)
        self._count[0] += len(encodings)
        return [gate(e, self.encoder.vocab, self.gate_k) for e in encodings]


def check_vocabulary(target: Collection, encoder: Encoder, argument: str = "query_encoder") -> None:
    """Refuse an encoder (the ``argument`` a message names) whose vocabulary differs from
    the collection's."""
    if is_stored(target):
        if vocab_hash(encoder.vocab) != target.vocab_hash:
            partner = partner_for(target.encoder_name, "text")
            hint = f" (e.g. {partner!r})" if partner else ""
            raise InputError(
                f"{argument} {encoder.name!r} ({len(encoder.vocab)} terms) does not share the "
                f"vocabulary of the index {target.label} (built with {target.encoder_name!r}, "
                f"{target.vocab_size} terms): pick an encoder in the same vocabulary{hint}"
            )
    elif encoder.vocab != target.vocab:
        raise InputError(f"{argument} {encoder.name!r} does not share the collection's vocabulary")


def default_query_encoder(
    target: Collection, modality: str, argument: str = "query_encoder"
) -> str:
    """The encoder name that puts ``modality`` queries into ``target``'s vocabulary (refused
    naming ``argument``'s flag when there is none)."""
    if is_stored(target):
        caps = set(target.manifest.encoder.capabilities)
        wanted = str(Capability.TEXT_LEXICAL if modality == "text" else Capability.IMAGE_LEXICAL)
        spec = target.encoder_spec
        if wanted in caps:
            return spec
        if modality == "text" and str(Capability.FEATURE_LEXICAL) in caps:
            return spec  # a D2S head: bag-of-words text queries (--query-mode bow)
        partner = partner_for(target.encoder_name, modality)
        if partner:
            return partner
        raise InputError(
            f"the index was built with {target.encoder_name!r}, which does not encode "
            f"{modality}s: pass --{argument.replace('_', '-')} with an encoder in the same "
            "vocabulary"
        )
    return target.encoder_name


def query_encoder_for(
    target: Collection,
    query_encoder: Any,
    device: str | None = None,
    modality: str = "text",
    *,
    needs: Needs | None = None,
    argument: str = "query_encoder",
) -> Encoder:
    """The one choice of the encoder that puts queries (or captions) into ``target``'s
    vocabulary: the one given (loaded from its spec on ``device``; an empty spec is refused
    like any other wrong one), else :func:`default_query_encoder`'s for ``modality``; with
    ``needs``, a registry name is checked from its card before it loads; refused when its
    vocabulary differs. ``argument`` is the name messages give it."""
    if query_encoder is None:
        query_encoder = default_query_encoder(target, modality, argument)
    encoder = encoder_argument(query_encoder, argument, needs=needs, device=device)
    check_vocabulary(target, encoder, argument)
    return encoder
