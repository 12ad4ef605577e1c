"""The counterfactuals' section of evaluation.html (Jinja2, autoescaped, self-contained):
the summary — FlipRate, mean edits, mean model calls — and each failure's verified edits
(or, not found, the closest tried and its rank)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from lexlens.analysis.render.html import num

if TYPE_CHECKING:
    from lexlens.analysis.counterfactual.evaluation import EvaluationCounterfactuals

#: Failures listed in the section (the CSV and JSON hold all).
LISTED = 200

SECTION = """
<section id="counterfactuals"><h2>What would it take? Counterfactuals of the failures</h2>
<p class="note">For each failure, the shortest sequence of edits — delete a query word, insert
one of the query's words into the relevant item's text — whose re-encoded inputs rank the
relevant item first against every item of the collection ({{ settings.side }} side, at most
{{ settings.max_edits }} edits and {{ settings.max_calls }} model calls each). Every edit shown
was applied, re-encoded and ranked; "not found" rows show the closest tried, not a fix.
Term level: the smallest set of vocabulary terms removed from the query vector (exact up to 4).</p>
{%- for n in notes %}<p class="note">{{ n }}</p>{% endfor %}
<table class="data" id="counterfactual-summary"><tbody>
<tr><td>FlipRate (failures fixed by a verified text edit)</td><td class="num">{{ num(s.flip_rate) }} ({{ s.found }} of {{ s.tried }})</td></tr>
<tr><td>mean edits (of those fixed)</td><td class="num">{{ num(s.mean_edits) }}</td></tr>
<tr><td>mean model calls per failure</td><td class="num">{{ num(s.mean_model_calls) }}</td></tr>
<tr><td>term level: flip rate / mean terms removed</td><td class="num">{{ num(s.term_flip_rate) }} / {{ num(s.mean_terms) }}</td></tr>
<tr><td>median seconds per failure</td><td class="num">{{ num(s.median_seconds) }}</td></tr>
</tbody></table>
<table class="data" id="counterfactual-failures"><thead><tr><th>query</th><th>relevant item</th><th>rank before</th><th>edits</th><th>rank after</th><th>found</th><th>model calls</th><th>terms removed</th></tr></thead><tbody>
{%- for r in rows %}
<tr><td>{{ r.query_id }}: {{ r.query }}</td><td>{{ r.target }}</td><td class="num">{{ r.text.rank_before if r.text.rank_before is not none else "not retrieved" }}</td>
<td>{% for e in r.text.edits %}{{ e.op }} {{ e.side }} <b>{{ e.word or e.cell }}</b>{% if not loop.last %}; {% endif %}{% endfor %}</td>
<td class="num">{{ r.text.rank_after if r.text.rank_after is not none else "not retrieved" }}</td><td>{{ "yes" if r.text.found else "no (closest)" }}</td>
<td class="num">{{ r.text.model_calls }}</td><td>{% for e in r.terms.edits %}{{ e.term }} {% endfor %}{% if not r.terms.found %}(none){% endif %}</td></tr>
{%- endfor %}
</tbody></table>
{%- if hidden %}<p class="note">{{ hidden }} more failures in counterfactuals.csv</p>{% endif %}
</section>
"""


@functools.cache
def _template():
    from jinja2 import Environment, StrictUndefined

    env = Environment(autoescape=True, undefined=StrictUndefined)
    env.globals["num"] = num
    return env.from_string(SECTION)


def counterfactual_section(result: EvaluationCounterfactuals) -> str:
    """The HTML section of a benchmark's counterfactuals."""
    doc = result.to_dict()
    rows = doc["failures"][:LISTED]
    for r in rows:  # a missing key reads as empty under StrictUndefined
        for e in r["text"]["edits"]:
            e.setdefault("word", None)
            e.setdefault("cell", None)
    return _template().render(
        s=result.summary, settings=result.settings, notes=result.notes, rows=rows,
        hidden=max(0, len(doc["failures"]) - LISTED),
    )  # fmt: skip
