"""The Compare page's inputs: each side's gate k (drawn from the one gate declaration), and
for stored collections the two collections, their gates, the text encoders (each
collection's own by default), a query — one of the collection's kept queries, with its
judgements, or one typed — and its mode. Nothing is computed until **Compare** is pressed;
the comparison (:func:`~lexlens.analysis.compare.compare_collections.compare_indexes` with
:class:`~lexlens.analysis.compare.options.CompareIndexOptions`) then runs as a job."""

from __future__ import annotations

from typing import Any

import streamlit as st

from lexlens.analysis.collections.store import open_index
from lexlens.analysis.collections.workspace import list_collections
from lexlens.analysis.compare.compare_collections import compare_indexes
from lexlens.analysis.compare.kept_queries import kept_queries
from lexlens.analysis.compare.options import CompareIndexOptions
from lexlens.analysis.compare.result import CompareResult
from lexlens.analysis.compare.sides import COMPARE_NEEDS
from lexlens.analysis.core.gating import GATE_K
from lexlens.analysis.retrieval.queries import default_query_encoder
from lexlens.app.runtime import state
from lexlens.app.runtime.state import CUSTOM, kept
from lexlens.app.views.widgets import option_widget
from lexlens.models import LexlensError, available_encoders

SAME = "(the same collection as A)"
NO_QUERY, KEPT_QUERY, OWN_QUERY = "No query", "A kept query", "My own query"


def encoder_key(encoder) -> str:
    """What identifies a loaded encoder in a cache key."""
    return f"{encoder.name}|{encoder.source}|{encoder.device}"


def gate_input(
    where: Any, side: str, key: str, default: int | None, note: str = "", **extra: Any
) -> int | None:
    """One side's gate k: a number input with the gate declaration's lower limit and help
    (``default`` ``None``: empty until the user types one)."""
    if default is None and key not in st.session_state:
        extra["value"] = None  # empty, not the lowest gate
    return where.number_input(
        f"Gate k of {side}{note}",
        min_value=int(GATE_K.spec.low),
        step=8,
        key=kept(key, default),
        help=extra.pop("help", GATE_K.spec.help),
        **extra,
    )


def seed_picker(key: str, spec: str) -> None:
    """Start a picker on a collection's own encoder, also when it is a local directory (the
    picker's "local checkpoint directory" entry with the path typed in)."""

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
        "Collection B",
        [SAME, *names],
        key=kept("compare_index_b"),
        format_func=lambda n: n if n == SAME else describe(n),
    )
    card_a = by_name[name_a]
    return card_a, card_a if name_b in (SAME, name_a) else by_name[name_b]


def _gates(card_a: dict, card_b: dict) -> tuple[int | None, int | None]:
    """Both gates: each collection's stored k, except B's when B is A (typed by the user)."""
    same = card_b is card_a
    c1, c2 = st.columns(2)
    ka = gate_input(
        c1,
        "A",
        f"compare_index_gate_a_{card_a['name']}",
        int(card_a["gate_k"]),
        f" (stored: {card_a['gate_k']})",
    )
    kb = gate_input(
        c2,
        "B",
        f"compare_index_gate_b_{card_b['name']}_{'same' if same else 'other'}",
        None if same else int(card_b["gate_k"]),
        f" (stored: {card_b['gate_k']})",
        placeholder="a smaller k than A's, e.g. 64" if same else None,
        help="A stored collection re-gates exactly at any k up to the one it was built "
        "with (its k largest stored weights and each text's own tokens).",
    )
    return ka, kb


def _query(card_a: dict, card_b: dict) -> dict[str, Any]:
    """The query: none, one the collection keeps (with its judgements) or one typed."""
    kept_a = kept_queries(open_index(card_a["path"])) or kept_queries(open_index(card_b["path"]))
    sources = [NO_QUERY, KEPT_QUERY, OWN_QUERY] if kept_a else [NO_QUERY, OWN_QUERY]
    if st.session_state.get("compare_query_source") not in sources:
        st.session_state["compare_query_source"] = KEPT_QUERY if kept_a else NO_QUERY
    source = st.radio(
        "Query searched on both", sources, horizontal=True, key=kept("compare_query_source")
    )
    q1, q2 = st.columns([3, 2])
    chosen: dict[str, Any] = {"query": None, "query_id": None}
    if source == KEPT_QUERY and kept_a:
        listed = {q["id"]: q for q in kept_a.listed()}
        st.caption(
            f"The collection keeps {len(listed):,} queries and "
            f"{sum(len(v) for v in kept_a.qrels.values()):,} judgements: the judged items are "
            "marked in both rankings and the metrics use them."
        )
        ids = list(listed)
        if st.session_state.get("compare_query_id") not in listed:
            st.session_state["compare_query_id"] = ids[0]
        chosen["query_id"] = q1.selectbox(
            "Kept query",
            ids,
            key=kept("compare_query_id"),
            format_func=lambda q: (
                f"{q} — {listed[q]['text'][:80]} ({listed[q]['relevant']} relevant)"
            ),
        )
    elif source == OWN_QUERY:
        chosen["query"] = (
            option_widget(CompareIndexOptions, "query", "compare_query", q1, default="").strip()
            or None
        )
    chosen["query_mode"] = option_widget(
        CompareIndexOptions, "query_mode", "compare_query_mode", q2
    )
    return chosen


def _encoder_specs(card_a: dict, card_b: dict) -> tuple[str | None, str | None]:
    """The text encoder of each side as the sidebar names it (each collection's own by
    default); loaded only when the comparison starts."""
    defaults = [default_query_encoder(open_index(c["path"]), "text") for c in (card_a, card_b)]
    needs = COMPARE_NEEDS["index"]
    keys = [f"compare_index_encoder_{s}_{c['name']}" for s, c in (("a", card_a), ("b", card_b))]
    for key, spec in zip(keys, defaults, strict=True):
        seed_picker(key, spec)
    spec_a = state.encoder_choice(
        "Text encoder A (queries, caption tokens)", needs, keys[0], defaults[0]
    )
    spec_b = state.encoder_choice(
        "Text encoder B (queries, caption tokens)", needs, keys[1], defaults[1]
    )
    return spec_a, spec_b


#: The widgets whose values are a comparison's inputs (with the gate and encoder keys of
#: the collections picked): a run stores them, a reload gives them back.
INPUT_KEYS = (
    "compare_kind",
    "compare_index_a",
    "compare_index_b",
    "compare_query_source",
    "compare_query_id",
    "compare_query",
    "compare_query_mode",
    "compare_k",
    "device",
)


def collection_result(top_key: str) -> CompareResult | None:
    """Draw the inputs; on **Compare**, run the comparison as a job. Returns the result of
    these inputs when one is stored (``None``: nothing to show yet)."""
    card_a, card_b = _pick_collections()
    try:
        ka, kb = _gates(card_a, card_b)
        settings = _query(card_a, card_b)
        k = option_widget(CompareIndexOptions, "k", "compare_k", label="k of Exact@k")
        spec_a, spec_b = _encoder_specs(card_a, card_b)
    except LexlensError as exc:
        st.error(str(exc))
        return None
    keys = [*INPUT_KEYS, top_key, *_side_keys(card_a, card_b)]
    inputs = {key: st.session_state.get(key) for key in keys}
    inputs["compare_updated"] = [card_a.get("updated"), card_b.get("updated")]
    ready = None not in (ka, kb, spec_a, spec_b)
    if ready and st.button("Compare", type="primary", key="compare_collections_go"):
        _start(
            card_a,
            card_b,
            inputs,
            {
                "gate_k": (int(ka), int(kb)),
                "k": int(k),
                "top": int(st.session_state[top_key]),
                **settings,
            },
            (spec_a, spec_b),
        )
    result, job, status = state.job_outcome("compare", CompareResult, inputs)
    if state.show_job_state(job, status, "Comparing", "comparison"):
        return None
    if result is None:
        st.info(
            "Choose the collections, both gates and a query, then press **Compare**: it reads "
            "every stored vector once per collection and gate, as a job; another query on the "
            "same sides then takes about a second."
            if ready
            else "Type the gate k of B (a smaller k than A's re-gates A's stored vectors) to "
            "compare the collection with itself."
        )
    return result


def _side_keys(card_a: dict, card_b: dict) -> list[str]:
    """The widget keys of both gates and both encoder pickers for the collections picked."""
    same = "same" if card_b is card_a else "other"
    encoders = [f"compare_index_encoder_{s}_{c['name']}" for s, c in (("a", card_a), ("b", card_b))]
    return [
        f"compare_index_gate_a_{card_a['name']}",
        f"compare_index_gate_b_{card_b['name']}_{same}",
        *encoders,
        *(f"{key}_dir" for key in encoders),
    ]


def _start(
    card_a: dict, card_b: dict, inputs: dict, settings: dict, specs: tuple[str, str]
) -> None:
    """Check the options, load both encoders (cached) and queue the comparison as a job."""
    try:
        options = CompareIndexOptions.of(**settings)
        needs = COMPARE_NEEDS["index"]
        encoder_a, encoder_b = (state.load_checked(s, needs) for s in specs)
    except LexlensError as exc:
        st.error(str(exc))
        return
    if encoder_a is None or encoder_b is None:
        return
    path_a, path_b = card_a["path"], card_b["path"]
    what = options.query_id or options.query
    summary = (
        f"compare {card_a['name']} k={options.gate_k[0]} / {card_b['name']} k={options.gate_k[1]}"
        + (f": {what}" if what else "")
    )
    state.start_job(
        "compare",
        summary,
        inputs,
        {},
        lambda progress: compare_indexes(
            path_a,
            None if path_b == path_a else path_b,
            encoder_a=encoder_a,
            encoder_b=encoder_b,
            options=options,
            progress=progress,
        ),
    )
