"""Property-based tests (hypothesis) of the pure functions the numbers rest on.

No model is loaded: inputs are small random arrays, vocabularies and texts. Each property is
checked against a reference computed here independently (a plain loop, ``math.fsum``,
brute-force pairs) or against a bound that must hold for every input. Hypothesis keeps no
example database in the checkout (``database=None``).
"""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from lexlens.analysis.core.metrics import measure_rankings
from lexlens.analysis.core.outputs import (
    FORMULA_PREFIXES,
    csv_bytes,
    json_text,
    records_csv_bytes,
    safe_cell,
    to_jsonable,
)
from lexlens.analysis.deviation.flops import flops_between, flops_within
from lexlens.analysis.deviation.static_embeddings import StaticEmbeddings
from lexlens.analysis.lexical.contrib import contributions
from lexlens.analysis.lexical.patches import pool_patches
from lexlens.models.base import LexicalEncoding, pool_units
from tests.deviation.helpers import item_deviation
from tests.helpers import model_tolerance

FAST = settings(
    max_examples=60,
    deadline=None,  # the machine is shared: no per-example time limit
    database=None,
    derandomize=True,  # the same examples on every run: a shared suite must not flicker
    suppress_health_check=[HealthCheck.too_slow],
)

weights_1d = st.floats(-50, 50, allow_nan=False, width=32)


@st.composite
def query_doc_vocab(draw):
    """Two vectors over one small vocabulary, sparse like lexical vectors (many exact 0s)."""
    n = draw(st.integers(1, 60))
    sparse = st.one_of(st.just(0.0), weights_1d)
    q = draw(hnp.arrays(np.float32, n, elements=sparse))
    d = draw(hnp.arrays(np.float32, n, elements=sparse))
    return q, d, [f"t{i}" for i in range(n)]


# ----------------------------------------------------------------------- contributions


@FAST
@given(query_doc_vocab())
def test_contributions_sum_to_the_score(case) -> None:
    q, d, vocab = case
    score, rows = contributions(q, d, vocab)
    products = [float(np.float64(a) * np.float64(b)) for a, b in zip(q, d, strict=True)]
    # The score is the inner product ...
    assert math.isclose(score, math.fsum(products), rel_tol=1e-9, abs_tol=1e-9)
    # ... and the listed contributions add up to exactly that score.
    assert math.isclose(math.fsum(r.contribution for r in rows), score, rel_tol=1e-9, abs_tol=1e-9)
    # Every non-zero product is listed once, with its own weights; largest first.
    assert sorted(r.index for r in rows) == [i for i, p in enumerate(products) if p != 0]
    for r in rows:
        assert r.token == vocab[r.index]
        assert r.contribution == products[r.index]
        assert (r.query_weight, r.doc_weight) == (float(q[r.index]), float(d[r.index]))
    values = [r.contribution for r in rows]
    assert values == sorted(values, reverse=True)


# ----------------------------------------------------------------------------- pooling


@st.composite
def patch_encoding(draw):
    """An image-like encoding: a grid of patch rows, pooled by max (optionally L2)."""
    rows, cols = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    vocab = draw(st.integers(1, 40))
    units = draw(
        hnp.arrays(
            np.float32,
            (rows * cols, vocab),
            elements=st.floats(0, 10, allow_nan=False, width=32),
        )
    )
    normalization = draw(st.sampled_from(["none", "l2"]))
    pooled = pool_units(units, normalization)
    encoding = LexicalEncoding(
        weights=pooled,
        unit_weights=units,
        units=[f"r{r}c{c}" for r in range(rows) for c in range(cols)],
        grid=(rows, cols),
        normalization=normalization,
    )
    return encoding, units


@FAST
@given(patch_encoding(), st.randoms(use_true_random=False))
def test_pooling_every_patch_gives_the_image_vector(case, rnd) -> None:
    encoding, units = case
    n = units.shape[0]
    everything = list(range(n))
    rnd.shuffle(everything)
    np.testing.assert_array_equal(pool_patches(encoding, everything), encoding.weights)
    # Repeated indices change nothing.
    np.testing.assert_array_equal(pool_patches(encoding, everything * 2), encoding.weights)
    # The reference: an element-wise maximum by hand, then the L2 norm if any.
    ref = np.zeros(units.shape[1], dtype=np.float64)
    for row in units:
        ref = np.maximum(ref, row)
    if encoding.normalization == "l2" and np.linalg.norm(ref) > 0:
        ref = ref / np.linalg.norm(ref)
    # a float32 division by the norm (a sum of squares): each entry moves with the norm's
    # relative rounding, so its scale is itself
    assert (np.abs(encoding.weights - ref) <= model_tolerance(ref, axis=())).all()


@FAST
@given(patch_encoding(), st.data())
def test_pooling_a_group_never_exceeds_the_whole(case, data) -> None:
    encoding, units = case
    group = data.draw(
        st.lists(st.integers(0, units.shape[0] - 1), min_size=1, unique=True), label="group"
    )
    part = pool_patches(encoding, group)
    if encoding.normalization == "none":
        assert (part <= encoding.weights).all()
        np.testing.assert_array_equal(part, units[group].max(axis=0))
    else:
        norm = np.linalg.norm(part)
        assert norm == 0 or math.isclose(norm, 1.0, rel_tol=1e-5)
    assert part.dtype == np.float32 and np.isfinite(part).all()


# --------------------------------------------------------------------------- deviation


@st.composite
def deviation_case(draw):
    n = draw(st.integers(2, 40))
    vocab = [f"w{i}" for i in range(n)]
    if draw(st.booleans()):
        vocab[0] = "[CLS]"  # special tokens never count as terms
    weights = draw(
        hnp.arrays(np.float32, n, elements=st.one_of(st.just(0.0), st.floats(-5, 5, width=32)))
    )
    caption = draw(st.lists(st.sampled_from(vocab), max_size=8))
    dim = draw(st.integers(1, 6))
    nonneg = draw(st.booleans())
    table = draw(
        hnp.arrays(
            np.float32,
            (n, dim),
            elements=st.floats(0 if nonneg else -3, 3, allow_nan=False, width=32),
        )
    )
    k = draw(st.integers(1, n + 3))
    denominator = draw(st.sampled_from(["k", "active"]))
    return (
        weights,
        vocab,
        caption,
        StaticEmbeddings.from_table(table, vocab),
        k,
        denominator,
        nonneg,
    )


@FAST
@given(deviation_case())
def test_exact_and_semantic_at_k_stay_in_range(case) -> None:
    weights, vocab, caption, static, k, denominator, nonneg = case
    item = item_deviation(weights, vocab, caption, static, k, denominator=denominator)
    positive = sum(1 for w, t in zip(weights, vocab, strict=True) if w > 0 and t != "[CLS]")
    assert item.positive_terms == positive
    assert 0.0 <= item.exact_at_k <= 1.0
    assert 0.0 <= item.cap <= 1.0
    if denominator == "k":
        # Fewer than k positive terms cap Exact@k below 1: the cap the page reports.
        assert item.exact_at_k <= item.cap + 1e-12
    # Semantic@k is a mean of cosines: [-1, 1]; never negative when no cosine can be.
    assert -1.0 - 1e-6 <= item.semantic_at_k <= 1.0 + 1e-6
    if nonneg:
        assert item.semantic_at_k >= -1e-6
    # Reference for Exact@k: the top-k positive non-special terms found in the caption.
    ranked = sorted(
        (i for i, t in enumerate(vocab) if weights[i] > 0 and t != "[CLS]"),
        key=lambda i: (-weights[i], i),
    )[:k]
    matches = sum(vocab[i] in set(caption) for i in ranked)
    den = k if denominator == "k" else max(1, min(k, positive))
    assert item.matches == matches and math.isclose(item.exact_at_k, matches / den)
    assert all(math.isfinite(v) for v in (item.exact_at_k, item.semantic_at_k, item.cap))


binary_rows = hnp.arrays(
    np.int8, st.tuples(st.integers(1, 8), st.integers(1, 12)), elements=st.integers(0, 1)
)


@FAST
@given(binary_rows, st.data())
def test_flops_equal_the_mean_over_pairs(a, data) -> None:
    """FLOPs (D2S): mean number of dimensions two items share, from counts per dimension."""
    n = a.shape[0]
    counts = a.sum(axis=0).astype(np.int64)
    pairs = [int(a[i] @ a[j]) for i in range(n) for j in range(n) if i != j]
    within = flops_within(counts, n)
    if n < 2:
        assert within is None
    else:
        assert math.isclose(within, sum(pairs) / len(pairs), abs_tol=1e-12)
        assert 0 <= within <= a.shape[1]
    b = data.draw(
        hnp.arrays(np.int8, (data.draw(st.integers(1, 8)), a.shape[1]), elements=st.integers(0, 1))
    )
    between = flops_between(counts, n, b.sum(axis=0), b.shape[0])
    cross = [int(x @ y) for x in a for y in b]
    assert math.isclose(between, sum(cross) / len(cross), abs_tol=1e-12)


# ------------------------------------------------------------------------- IR metrics


@st.composite
def rankings(draw):
    docs = [f"d{i}" for i in range(draw(st.integers(1, 25)))]
    queries = [f"q{i}" for i in range(draw(st.integers(1, 4)))]
    ranked = {q: draw(st.permutations(docs)) for q in queries}
    ranked = {q: r[: draw(st.integers(0, len(r)))] for q, r in ranked.items()}
    relevant = {q: set(draw(st.lists(st.sampled_from(docs), max_size=6))) for q in queries}
    return ranked, relevant


@settings(max_examples=30, deadline=None, database=None, derandomize=True)
@given(rankings())
def test_measures_stay_in_unit_interval_and_match_hand_computed_rr(case) -> None:
    ranked, relevant = case
    means, per_query = measure_rankings(ranked, relevant, ("RR@1", "RR@10", "nDCG@10", "AP@10"))
    for q, values in per_query.items():
        for name, value in values.items():
            assert 0.0 <= value <= 1.0, (q, name, value)
        assert values["RR@1"] <= values["RR@10"] + 1e-12
        # Reciprocal rank by hand: 1 / rank of the first relevant item in the top 10.
        first = next((i for i, d in enumerate(ranked[q][:10]) if d in relevant[q]), None)
        assert math.isclose(values["RR@10"], 0.0 if first is None else 1 / (first + 1))
        assert math.isclose(values["RR@1"], 1.0 if first == 0 else 0.0)
        # No relevant item in the top 10: every metric at @10 is 0.
        if first is None:
            assert values["nDCG@10"] == 0.0 and values["AP@10"] == 0.0
    for name, mean in means.items():
        assert 0.0 <= mean <= 1.0
        per = [per_query[q][name] for q in relevant]
        assert math.isclose(mean, sum(per) / len(per))


# ---------------------------------------------------------------------------- outputs

leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    hnp.arrays(
        st.sampled_from([np.float32, np.float64]),
        st.integers(0, 4),
        elements=st.floats(allow_nan=True, allow_infinity=True, width=32),
    ),
    st.floats(allow_nan=True, allow_infinity=True, width=32).map(np.float32),
)
nested = st.recursive(
    leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=5), children, max_size=4),
    ),
    max_leaves=20,
)


def _finite_floats(obj) -> list[float]:
    if isinstance(obj, float):
        return [obj]
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _finite_floats(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in _finite_floats(v)]
    return []


@FAST
@given(nested)
def test_to_jsonable_never_emits_nan_or_infinity(payload) -> None:
    clean = to_jsonable(payload)
    text = json.dumps(clean, allow_nan=False)  # raises on NaN/Infinity
    assert all(math.isfinite(x) for x in _finite_floats(clean))
    assert json.loads(json_text(payload)) == json.loads(text)


@FAST
@given(st.text(max_size=30))
def test_safe_cell_neutralises_formulas_and_nothing_else(value) -> None:
    out = safe_cell(value)
    assert isinstance(out, str)
    assert not out.startswith(FORMULA_PREFIXES)
    if value.startswith(FORMULA_PREFIXES):
        assert out == "'" + value
    else:
        assert out == value


@pytest.mark.parametrize("formula", ['=HYPERLINK("http://x")', "+1", "-2+3", "@SUM(A1)"])
def test_safe_cell_examples(formula: str) -> None:
    assert safe_cell(formula) == "'" + formula
    assert safe_cell(3.5) == 3.5 and safe_cell(float("nan")) == ""


#: Text cells for the CSV property (carriage returns and newlines included).
csv_text = st.text(max_size=12)


@FAST
@given(
    st.lists(
        st.lists(
            st.one_of(
                csv_text,
                st.integers(-1000, 1000),
                st.floats(allow_nan=True, allow_infinity=True),
            ),
            min_size=2,
            max_size=2,
        ),
        max_size=6,
    )
)
def test_csv_cells_never_start_a_formula(rows) -> None:
    """Read back as a spreadsheet would: no text cell starts with = + - @ tab or CR; numbers
    stay numbers (a negative number is not a formula)."""
    for data in (
        csv_bytes(["a", "b"], rows),
        records_csv_bytes([{"a": r[0], "b": r[1]} for r in rows]) if rows else b"",
    ):
        if not data:
            continue
        table = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
        assert table[0] == ["a", "b"]
        for written, row in zip(table[1:], rows, strict=True):
            for cell, original in zip(written, row, strict=True):
                if isinstance(original, str):
                    assert not cell.startswith(FORMULA_PREFIXES), (original, cell)
                elif isinstance(original, float) and not math.isfinite(original):
                    assert cell == ""
                else:
                    assume(cell != "")
                    assert float(cell) == pytest.approx(float(original))


def test_csv_cell_with_a_carriage_return_stays_one_cell() -> None:
    data = csv_bytes(["a", "b"], [["x\ry", "z"], ["\r", ""]])
    table = list(csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")))
    assert table == [["a", "b"], ["x\ry", "z"], ["'\r", ""]]
