"""The two sides of a comparison and how their vocabularies relate (the same, or how many
tokens of each have no counterpart in the other)."""

from __future__ import annotations

#: The two sides of every comparison, in order.
SIDES = ("a", "b")


def vocabulary_overlap(vocab_a: list[str], vocab_b: list[str]) -> dict:
    """How the two vocabularies relate: the same, or how many tokens lack a counterpart."""
    if vocab_a is vocab_b or vocab_a == vocab_b:
        n = len(vocab_a)
        return {"same": True, "size_a": n, "size_b": n, "shared": n, "only_a": 0, "only_b": 0}
    sa, sb = set(vocab_a), set(vocab_b)
    return {
        "same": False,
        "size_a": len(vocab_a),
        "size_b": len(vocab_b),
        "shared": len(sa & sb),
        "only_a": len(sa - sb),
        "only_b": len(sb - sa),
    }


def vocabulary_note(v: dict) -> str | None:
    if v["same"]:
        return None
    return (
        f"A and B use different vocabularies ({v['size_a']:,} and {v['size_b']:,} terms): "
        f"they are compared on the {v['shared']:,} tokens both have; {v['only_a']:,} tokens "
        f"of A's vocabulary and {v['only_b']:,} of B's have no counterpart in the other"
    )
