"""The figure of a semantic deviation's items (plotly): each item's Exact@k against its
Semantic@k, coloured by whether it has k positive terms (the Semantic deviation page and the
result's notebook view draw this one figure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def deviation_scatter(rows: Sequence[Mapping[str, Any]], k: int, denominator: str, one: str):
    """Per item (``rows``: the items' JSON rows), Exact@k on x and Semantic@k on y, coloured
    by "fewer than k" / "k or more" positive terms; ``denominator`` is the result's ("k" or
    "active"), ``one`` names an item ("caption", "text", "image")."""
    import plotly.express as px  # heavy: plotly loads on first use

    points = {
        "exact_at_k": [r["exact_at_k"] for r in rows],
        "semantic_at_k": [r["semantic_at_k"] for r in rows],
        "text": [r["text"] for r in rows],
        "positive_terms": [r["positive_terms"] for r in rows],
        "cap": [r["cap"] for r in rows],
        "positive": [
            f"fewer than {k}" if r["positive_terms"] < k else f"{k} or more" for r in rows
        ],
    }
    exact_name, sem_name = f"Exact@{k}", f"Semantic@{k}"
    den_text = "k" if denominator == "k" else "min(k, positive terms)"
    fig = px.scatter(
        points,
        x="exact_at_k",
        y="semantic_at_k",
        color="positive",
        hover_data={"text": True, "positive_terms": True, "cap": ":.2f", "positive": False},
        labels={
            "exact_at_k": f"{exact_name}: share of top-{k} terms that are caption tokens",
            "semantic_at_k": f"{sem_name}: mean best cosine to a caption token",
            "positive": "positive terms",
            "text": one,
            "positive_terms": "positive terms",
        },
        title=f"Per {one}: {exact_name} against {sem_name} (denominator {den_text})",
    )
    fig.update_traces(marker={"size": 10, "opacity": 0.8})
    return fig
