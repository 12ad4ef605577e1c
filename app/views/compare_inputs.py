"""The Compare page's inputs: each side's gate k (drawn from the one gate declaration), and
for stored collections the two collections, their gates (one default rule,
:func:`~lexlens.analysis.compare.options.default_gates`), the query encoders (each
collection's own by default), a query and its mode; the comparison is
:func:`~lexlens.analysis.compare.compare_collections.compare_indexes` with
:class:`~lexlens.analysis.compare.options.CompareIndexOptions`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from lexlens.analysis.collections.store import open_index
from lexlens.analysis.collections.workspace import list_collections
from lexlens.analysis.compare.compare_collections import compare_indexes
from lexlens.analysis.compare.options import CompareIndexOptions, default_gates
from lexlens.analysis.compare.result import CompareResult
from lexlens.analysis.compare.sides import COMPARE_NEEDS
from lexlens.analysis.core.gating import GATE_K
from lexlens.analysis.search.queries import default_query_encoder
from lexlens.app.runtime.state import encoder_picker, kept
from lexlens.app.views.widgets import option_widget
from lexlens.models import LexlensError

SAME = "(the same collection as A)"


def encoder_key(encoder) -> str:
    """What identifies a loaded encoder in a cache key."""
    return f"{encoder.name}|{encoder.source}|{encoder.device}"


def gate_input(where: Any, side: str, key: str, default: int, note: str = "", **extra: Any) -> int:
    """One side's gate k: a number input with the gate declaration's lower limit and help."""
    return where.number_input(
        f"Gate k of {side}{note}", min_value=int(GATE_K.spec.low), step=8,
        key=kept(key, default), help=extra.pop("help", GATE_K.spec.help), **extra,
    )  # fmt: skip


def seed_picker(key: str, spec: str) -> None:
    """Start a picker on a collection's own encoder, also when it is a local directory (the
    picker's "local checkpoint directory" entry with the path typed in)."""
    from lexlens.app.runtime.state import CUSTOM
    from lexlens.models import available_encoders

    if key in st.session_state or spec in {c.name for c in available_encoders()}:
        return
    st.session_state[key] = CUSTOM
    st.session_state[f"{key}_dir"] = spec


def _pick_collections() -> tuple[dict, dict]:
    """The cards of collection A and collection B (B may be A)."""
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
    return card_a, card_a if name_b in (SAME, name_a) else by_name[name_b]


def _settings(card_a: dict, card_b: dict, top: int) -> dict[str, Any]:
    """The comparison's settings as drawn: both gates, the query, its mode and k."""
    c1, c2 = st.columns(2)
    ka = gate_input(
        c1, "A", f"compare_index_gate_a_{card_a['name']}", int(card_a["gate_k"]),
        " (≤ the stored k)",
    )  # fmt: skip
    same = card_b is card_a
    _, default_b = default_gates(
        "index", same, (int(card_a["gate_k"]), int(card_b["gate_k"])), card_b["mean_nnz"]
    )
    kb = gate_input(
        c2, "B", f"compare_index_gate_b_{card_b['name']}_{'same' if same else 'other'}",
        default_b, " (≤ the stored k)",
        help="A stored collection re-gates exactly at any k up to the one it was built with.",
    )  # fmt: skip
    q1, q2, q3 = st.columns([3, 2, 1])
    query = option_widget(CompareIndexOptions, "query", "compare_query", q1, default="dog")
    mode = option_widget(CompareIndexOptions, "query_mode", "compare_query_mode", q2)
    k = option_widget(CompareIndexOptions, "k", "compare_k", q3, label="k of Exact@k")
    return {"gate_k": (int(ka), int(kb)), "query": (query or "").strip() or None,
            "query_mode": mode, "k": int(k), "top": int(top)}  # fmt: skip


def _query_encoders(card_a: dict, card_b: dict, fail: Callable[[LexlensError], None]) -> tuple:
    """The text encoder of each side (each collection's own by default), or ``None``s."""
    try:
        ix_a = open_index(card_a["path"])
        ix_b = open_index(card_b["path"])
        defaults = [default_query_encoder(ix, "text") for ix in (ix_a, ix_b)]
    except LexlensError as exc:
        fail(exc)
        return None, None
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
    return encoder_a, encoder_b


@st.cache_data(show_spinner=False, max_entries=8)
def collection_result(
    _a, _b, key_a: str, key_b: str, path_a: str, path_b: str, updated: str,
    options: CompareIndexOptions,
) -> CompareResult:  # fmt: skip
    """The comparison of two collections, cached on the encoders, folders and options."""
    bar = st.progress(0.0, f"Comparing {key_a} and {key_b}…")
    try:
        return compare_indexes(
            path_a, None if path_b == path_a else path_b, encoder_a=_a, encoder_b=_b,
            options=options, progress=lambda f, msg: bar.progress(min(max(f, 0.0), 1.0), msg),
        )  # fmt: skip
    finally:
        bar.empty()


def collection_inputs(
    top: int, remember: Callable[[CompareResult], None], fail: Callable[[LexlensError], None]
) -> None:
    """Draw the inputs; compare when both encoders are ready and keep the result."""
    card_a, card_b = _pick_collections()
    settings = _settings(card_a, card_b, top)
    encoder_a, encoder_b = _query_encoders(card_a, card_b, fail)
    if encoder_a is None or encoder_b is None:
        return
    try:
        options = CompareIndexOptions.of(**settings)
        remember(
            collection_result(
                encoder_a,
                encoder_b,
                encoder_key(encoder_a),
                encoder_key(encoder_b),
                card_a["path"],
                card_b["path"],
                f"{card_a.get('updated')}|{card_b.get('updated')}",
                options,
            )  # fmt: skip
        )
    except LexlensError as exc:
        fail(exc)
