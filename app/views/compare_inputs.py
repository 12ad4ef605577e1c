"""The Compare page's inputs for stored collections: the two collections, their gates (one
default rule, :func:`~lexlens.analysis.compare.compare.default_gates`), the query encoders
(each collection's own by default) and a query; the comparison is
:func:`~lexlens.analysis.compare.compare_collections.compare_indexes`."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from lexlens.analysis.collections.store import open_index
from lexlens.analysis.collections.workspace import list_collections
from lexlens.analysis.compare.compare import COMPARE_NEEDS, default_gates
from lexlens.analysis.compare.compare_collections import compare_indexes
from lexlens.analysis.compare.result import CompareResult
from lexlens.analysis.deviation.options import DEFAULT_K
from lexlens.analysis.search.queries import default_query_encoder
from lexlens.app.runtime.state import encoder_picker, kept
from lexlens.models import LexlensError

SAME = "(the same collection as A)"


def encoder_key(encoder) -> str:
    """What identifies a loaded encoder in a cache key."""
    return f"{encoder.name}|{encoder.source}|{encoder.device}"


def seed_picker(key: str, spec: str) -> None:
    """Start a picker on a collection's own encoder, also when it is a local directory (the
    picker's "local checkpoint directory" entry with the path typed in)."""
    from lexlens.app.runtime.state import CUSTOM
    from lexlens.models import available_encoders

    if key in st.session_state or spec in {c.name for c in available_encoders()}:
        return
    st.session_state[key] = CUSTOM
    st.session_state[f"{key}_dir"] = spec


def collection_inputs(
    top: int, remember: Callable[[CompareResult], None], fail: Callable[[LexlensError], None]
) -> None:
    """Draw the inputs; compare when both encoders are ready and keep the result."""

    cards = [c for c in list_collections() if "error" not in c]
    if not cards:
        st.info(
            "No stored collection yet: build them on the **Collections** page or with "
            "`lexlens index --encoder NAME --source PATH --out DIR` (the same source with two "
            "encoders, or one index compared at two gate k)."
        )
        st.stop()
    by_name = {c["name"]: c for c in cards}

    def describe(n: str) -> str:
        c = by_name[n]
        return f"{n} — {c['items']:,} {c['modality']} items, {c['encoder']}, gate k {c['gate_k']}"

    names = list(by_name)
    if st.session_state.get("compare_index_a") not in names:
        st.session_state["compare_index_a"] = names[0]
    if st.session_state.get("compare_index_b") not in [SAME, *names]:
        st.session_state["compare_index_b"] = SAME
    c1, c2 = st.columns(2)
    name_a = c1.selectbox("Collection A", names, key=kept("compare_index_a"), format_func=describe)
    name_b = c2.selectbox(
        "Collection B", [SAME, *names], key=kept("compare_index_b"),
        format_func=lambda n: n if n == SAME else describe(n),
    )  # fmt: skip
    card_a = by_name[name_a]
    card_b = card_a if name_b in (SAME, name_a) else by_name[name_b]
    ka = c1.number_input(
        "Gate k of A (≤ the stored k)", min_value=-1, step=8,
        key=kept(f"compare_index_gate_a_{name_a}", int(card_a["gate_k"])),
    )  # fmt: skip
    same = card_b is card_a
    _, default_b = default_gates(
        "index", same, (int(card_a["gate_k"]), int(card_b["gate_k"])), card_b["mean_nnz"]
    )
    kb = c2.number_input(
        "Gate k of B (≤ the stored k)", min_value=-1, step=8,
        key=kept(f"compare_index_gate_b_{card_b['name']}_{'same' if same else 'other'}", default_b),
        help="A stored collection re-gates exactly at any k up to the one it was built with.",
    )  # fmt: skip
    q1, q2 = st.columns([3, 1])
    query = q1.text_input("Query searched on both (optional)", key=kept("compare_query", "dog"))
    k = q2.number_input(
        "k of Exact@k", min_value=1, max_value=1000, key=kept("compare_k", DEFAULT_K)
    )
    try:
        ix_a = open_index(card_a["path"])
        ix_b = open_index(card_b["path"])
        defaults = [default_query_encoder(ix, "text") for ix in (ix_a, ix_b)]
    except LexlensError as exc:
        fail(exc)
        ix_a = ix_b = None
    if ix_a is not None:
        needs = COMPARE_NEEDS["index"]
        keys = [f"compare_index_encoder_{s}_{c['name']}" for s, c in (("a", card_a), ("b", card_b))]
        for key, spec in zip(keys, defaults, strict=True):
            seed_picker(key, spec)
        encoder_a = encoder_picker(
            "Text encoder A (queries, caption tokens)", needs, key=keys[0], default=defaults[0]
        )
        encoder_b = encoder_picker(
            "Text encoder B (queries, caption tokens)", needs, key=keys[1], default=defaults[1]
        )
        if encoder_a is not None and encoder_b is not None:

            @st.cache_data(show_spinner=False, max_entries=8)
            def collection_result(
                _a, _b, key_a: str, key_b: str, path_a: str, path_b: str, updated: str,
                gates: tuple[int, int], query: str | None, top: int, k: int,
            ) -> CompareResult:  # fmt: skip
                bar = st.progress(0.0, f"Comparing {key_a} and {key_b}…")
                try:
                    return compare_indexes(
                        path_a, None if path_b == path_a else path_b, encoder_a=_a,
                        encoder_b=_b, gate_k=gates, query=query, top=top, k=k,
                        progress=lambda f, msg: bar.progress(min(max(f, 0.0), 1.0), msg),
                    )  # fmt: skip
                finally:
                    bar.empty()

            try:
                remember(
                    collection_result(
                        encoder_a,
                        encoder_b,
                        encoder_key(encoder_a),
                        encoder_key(encoder_b),
                        card_a["path"],
                        card_b["path"],
                        f"{card_a.get('updated')}|{card_b.get('updated')}",
                        (int(ka), int(kb)),
                        query.strip() or None,
                        int(top),
                        int(k),
                    )  # fmt: skip
                )
            except LexlensError as exc:
                fail(exc)
