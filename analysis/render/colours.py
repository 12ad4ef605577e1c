"""One colour per ranking of words, for every chart and report that draws rankings side by
side: the Attribution page's bars and curves and report.html's curves (MoT, RandT, GlobalT),
and the masking evaluation's baselines (Rand, IDF, TF-IDF). A ranking is known by the first
word of a series' name ("GlobalT (whole vector)" is GlobalT's), so a longer label keeps its
colour. ColorBrewer's Dark2 (colour-blind safe, readable on white)."""

from __future__ import annotations

#: The colour of each ranking, the same in every figure and report.
RANKING_COLOURS = {
    "MoT": "#1b9e77",
    "RandT": "#d95f02",
    "GlobalT": "#7570b3",
    "Rand": "#e7298a",
    "IDF": "#66a61e",
    "TF-IDF": "#e6ab02",
}
#: Colours of series that are no ranking, in order (none of them a ranking's).
OTHER_COLOURS = ("#666666", "#a6761d", "#1f78b4", "#b15928")


def series_colours(names: list[str]) -> dict[str, str]:
    """The colour of each series named in ``names``: its ranking's (:data:`RANKING_COLOURS`),
    else the next of :data:`OTHER_COLOURS`."""
    colours, others = {}, 0
    for name in names:
        ranking = RANKING_COLOURS.get(str(name).split(" ", 1)[0])
        if ranking is None:
            ranking = OTHER_COLOURS[others % len(OTHER_COLOURS)]
            others += 1
        colours[name] = ranking
    return colours
