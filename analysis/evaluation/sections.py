"""What adds to an evaluation: a :class:`Section` — the faithfulness of its explanations,
its failures' counterfactuals, a comparison of several systems — is a result of its own
that an :class:`~lexlens.analysis.evaluation.result.Evaluation` carries in ``sections``.
Each section gives its JSON key (its document sits under it in evaluation.json), the files
it writes beside the evaluation's, its HTML block (evaluation.html renders every section's
block in the order added, through one template) and the lines the command prints."""

from __future__ import annotations

from typing import ClassVar, Protocol, runtime_checkable


@runtime_checkable
class Section(Protocol):
    """One part added to an evaluation (see the module docstring)."""

    #: Its key in evaluation.json (one section of a kind per evaluation).
    key: ClassVar[str]

    def to_dict(self) -> dict:
        """Its JSON document (under :attr:`key`)."""
        ...

    def section_files(self) -> dict[str, bytes]:
        """The files it writes beside the evaluation's (file name → bytes)."""
        ...

    def html(self) -> str:
        """Its block of evaluation.html (autoescaped HTML; empty: no block)."""
        ...

    def text(self) -> str:
        """The lines ``lexlens evaluate`` prints after the evaluation (empty: none)."""
        ...
