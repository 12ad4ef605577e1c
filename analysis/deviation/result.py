"""What semantic deviation returns, its notes and the files it is saved as."""

from __future__ import annotations

from dataclasses import dataclass, field

from lexlens.analysis.core.outputs import json_bytes, records_csv_bytes
from lexlens.analysis.core.results import Result, internal
from lexlens.analysis.deviation.sets import SetDeviation
from lexlens.analysis.render.deviation_plots import deviation_scatter
from lexlens.analysis.render.notebook import deviation_html


@dataclass(frozen=True)
class DeviationResult(Result):
    """Semantic deviation of a caption set, or of a stored collection's texts, or of its
    images against their paired captions (``captions`` = those captions, encoded by the
    text encoder; ``flops_captions_images`` = D2S's FLOPs between the two sets)."""

    file_stem = "deviation"

    @property
    def sets(self) -> list[SetDeviation]:
        return [s for s in (self.captions, self.images) if s is not None]

    encoder: str
    input: dict
    k: int
    gate_k: int
    denominator: str
    f_enc: str
    captions: SetDeviation | None
    images: SetDeviation | None = None
    flops_captions_images: float | None = None
    notes: list[str] = field(default_factory=list)
    #: Wall times of the measurement once the encoder was ready, and of getting the encoder
    #: ready (loading it, when given by name): shown by the page, not in the JSON.
    seconds: float | None = internal(default=None)
    load_seconds: float | None = internal(default=None)
    #: CPU time of the thread that measured (the work itself, however busy the machine)
    cpu_seconds: float | None = internal(default=None)

    def files(self) -> dict[str, bytes]:
        """The files a run exports (CLI ``--out`` and the page's downloads): the JSON
        document, per-item rows and each set's top vocabulary terms, as formula-safe CSV."""
        files = {"deviation.json": json_bytes(self)}
        for part in self.sets:
            files[f"{part.kind}.csv"] = records_csv_bytes([r.to_dict() for r in part.rows])
            if part.vocabulary is not None:
                name = "vocabulary.csv" if part is self.sets[0] else f"vocabulary_{part.kind}.csv"
                files[name] = records_csv_bytes([t.to_dict() for t in part.vocabulary.top_terms])
        return files

    def frame_rows(self) -> list[dict]:
        """The first set's items (captions.csv's or texts.csv's rows: word lists joined by
        spaces)."""
        return _item_rows(self.sets[0]) if self.sets else []

    def frame_tables(self) -> dict:
        """Each set's items by its kind (``captions``, ``texts``, ``images``: the CSV file
        of that name)."""
        return {
            part.kind: (
                list(part.rows[0].to_dict()) if part.rows else [],
                lambda part=part: _item_rows(part),
            )
            for part in self.sets
        }

    def notebook_html(self) -> str:
        """Each set's metrics and the page's scatter of its items
        (:mod:`lexlens.analysis.render.notebook`; plotly's script inline, nothing fetched)."""
        figures = {
            part.kind: deviation_scatter(
                [r.to_dict() for r in part.rows], self.k, self.denominator, part.kind[:-1]
            ).to_html(full_html=False, include_plotlyjs=True, config={"displaylogo": False})
            for part in self.sets
            if part.rows
        }
        return deviation_html(self.to_dict(), figures)


def _item_rows(part: SetDeviation) -> list[dict]:
    """A set's item rows as its CSV file holds them (lists joined by spaces)."""
    return [
        {
            k: " ".join(map(str, v)) if isinstance(v, (list, tuple)) else v
            for k, v in r.to_dict().items()
        }
        for r in part.rows
    ]


def set_notes(s: SetDeviation, k: int) -> list[str]:
    """Plain-language notes on one set (positive terms below k, skipped items)."""
    what = s.kind
    notes = []
    below = s.positive_terms["below_k"]
    if below:
        notes.append(
            f"{below} of {s.n_measured} {what} have fewer than {k} positive terms: under the "
            "paper's "
            f"denominator k, their Exact@{k} cannot exceed {s.positive_terms['cap_exact_at_k']:.3f} "
            f"on this set (use denominator 'active' = min(k, positive terms) to compare "
            "without that cap)"
        )
    if s.n_skipped:
        one = what[:-1] if s.n_skipped == 1 else what
        notes.append(
            f"{s.n_skipped} {one} skipped ({s.skipped[0]['reason']}), e.g. "
            f"{s.skipped[0]['text'][:40]!r}; the others were measured"
        )
    return notes
