"""How a query becomes a vector in a collection's vocabulary, and which encoder makes it.

A text query is the query encoder's gated vector ``E_q = V_q ⊙ G_q`` (``parametric``) or
the bag of its own tokens (``bow``, VDR's nonparametric query; a D2S head over dense
features makes only these); an image query is the image encoder's gated vector. The query
encoder must share the collection's vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lexlens.analysis.collections.store import vocab_hash
from lexlens.analysis.collections.stored import is_stored
from lexlens.analysis.core.arguments import encoder_argument
from lexlens.analysis.core.collection import Collection
from lexlens.analysis.core.gating import DEFAULT_GATE_K, bow_query, gate
from lexlens.analysis.core.truncation import Truncation, opening, truncation
from lexlens.models.base import Capability, Encoder, InputError, Needs
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


@dataclass(frozen=True)
class QuerySpec:
    """How queries become vectors: the encoder, the mode and the gate."""

    encoder: Encoder
    mode: str = "parametric"
    gate_k: int = DEFAULT_GATE_K
    #: query vectors already made (A and B are used by every method of an evaluation)
    _memo: dict = field(default_factory=dict, compare=False, repr=False)
    #: the texts cut to the encoder's token limit, as they were encoded
    _cut: dict = field(default_factory=dict, compare=False, repr=False)

    def text(self, text: str) -> np.ndarray:
        if not isinstance(text, str) or not text.strip():
            raise InputError("the query is empty: type some words")
        if text not in self._memo:
            if self.mode == "bow" and not self.encoder.can(Capability.TEXT_LEXICAL):
                enc = self.encoder.tokenize_texts([text])[0]  # a feature head: own tokens
            else:
                enc = self.encoder.encode_texts([text], side="query")[0]
            cut = truncation(self.encoder, text, enc, f"query {opening(text)}")
            if cut is not None:
                self._cut[text] = cut
            if self.mode == "bow":
                vector = bow_query(enc, self.encoder.vocab, self.encoder.bow_normalize)
            else:
                vector = gate(enc, self.encoder.vocab, self.gate_k)
            vector.setflags(write=False)
            self._memo[text] = vector
        return self._memo[text]

    def truncations(self) -> list[Truncation]:
        """The query texts encoded so far that were cut to the encoder's token limit."""
        return list(self._cut.values())

    def image(self, image: Any) -> np.ndarray:
        enc = self.encoder.encode_images([image])[0]
        return gate(enc, self.encoder.vocab, self.gate_k)


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
