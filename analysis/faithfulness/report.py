"""The faithfulness section of an HTML report (Jinja2, autoescaped; self-contained: the
deletion-curve chart is inline SVG, no script): the summary against the random baseline,
the mean deletion curves, and each failure's explanation tested."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from lexlens.analysis.render.html import num

if TYPE_CHECKING:
    from lexlens.analysis.faithfulness.benchmark import FailuresFaithfulness

#: Failures listed in the section (the CSV and JSON hold all).
LISTED = 200

SECTION = """
<section id="faithfulness"><h2>Faithfulness of the explanations (measured by {{ s.measured_by }})</h2>
<p class="note">For each failure, the query words that produced its decisive terms are deleted,
the query re-encoded and both items rescored; comprehensiveness = share of the score gap that
closes; random = as many random query words ({{ settings.draws }} seeded draws, seed
{{ settings.seed }}); AOPC (Samek et al. 2017) over k = 0…{{ settings.curve_k }} words, normalised
by the gap. {{ s.failures }} failures measured, {{ s.model_calls }} edited queries re-encoded in
{{ num(s.seconds) }} s.</p>
{%- for n in notes %}<p class="note">{{ n }}</p>{% endfor %}
<table class="data" id="faithfulness-summary"><thead><tr><th></th><th>explanation</th><th>random</th></tr></thead><tbody>
<tr><td>comprehensiveness (median share of the gap closed)</td><td class="num">{{ num(s.comprehensiveness) }}</td><td class="num">{{ num(s.random_comprehensiveness) }}</td></tr>
<tr><td>comprehensiveness (mean, each share capped at 1)</td><td class="num">{{ num(s.capped_comprehensiveness) }}</td><td class="num">{{ num(s.capped_random_comprehensiveness) }}</td></tr>
<tr><td>explanation closes more than random</td><td class="num" colspan="2">{{ num(s.beats_random) }}</td></tr>
<tr><td>pairs flipped</td><td class="num">{{ num(s.flip_rate) }}</td><td class="num">{{ num(s.random_flip_rate) }}</td></tr>
<tr><td>AOPC (median, share of the gap)</td><td class="num">{{ num(s.aopc) }}</td><td class="num">{{ num(s.random_aopc) }}</td></tr>
<tr><td>words deleted (mean)</td><td class="num" colspan="2">{{ num(s.words_deleted) }}</td></tr>
<tr><td>Wilcoxon p (comprehensiveness, paired)</td><td class="num" colspan="2">{{ num(s.wilcoxon_p) }}</td></tr>
</tbody></table>
<h3>Deletion curve: median share of the gap closed after k words</h3>
{{ chart|safe }}
<table class="data" id="faithfulness-failures"><thead><tr><th>query</th><th>words deleted</th><th>edited query</th><th>gap</th><th>gap after</th><th>comprehensiveness</th><th>random</th><th>flipped</th><th>AOPC</th><th>random AOPC</th></tr></thead><tbody>
{%- for r in rows %}
<tr><td>{{ r.query_id }}: {{ r.query }}</td><td>{{ r.words|join(" ") }}</td><td>{{ r.edited_query }}</td><td class="num">{{ num(r.gap) }}</td><td class="num">{{ num(r.gap_after) }}</td><td class="num">{{ num(r.comprehensiveness) }}</td><td class="num">{{ num(r.random_comprehensiveness) }}</td><td>{{ "yes" if r.flipped else "no" }}</td><td class="num">{{ num(r.curve.normalized_aopc) }}</td><td class="num">{{ num(r.curve.normalized_random_aopc) }}</td></tr>
{%- endfor %}
</tbody></table>
{%- if hidden %}<p class="note">{{ hidden }} more failures in faithfulness.csv</p>{% endif %}
</section>
"""


@functools.cache
def _template():
    from jinja2 import Environment, StrictUndefined

    env = Environment(autoescape=True, undefined=StrictUndefined)
    env.globals["num"] = num
    return env.from_string(SECTION)


def svg_curves(series: dict[str, list[float]], *, width: int = 420, height: int = 220) -> str:
    """A small line chart of curves over k = 0…K as inline SVG (one colour per series, a
    legend, the y range from the data and 0)."""
    from html import escape

    values = [v for ys in series.values() for v in ys]
    if not values:
        return ""
    low, high = min(0.0, *values), max(1.0, *values)
    k = max(len(ys) for ys in series.values()) - 1
    pad, colours = 36, ("#b2182b", "#2166ac", "#4d9221", "#8c510a")

    def x(i: int) -> float:
        return pad + (width - 2 * pad) * (i / k if k else 0.0)

    def y(v: float) -> float:
        return height - pad - (height - 2 * pad) * (v - low) / ((high - low) or 1.0)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             'role="img" aria-label="deletion curves">',
             f'<line x1="{pad}" y1="{y(0):.1f}" x2="{width - pad}" y2="{y(0):.1f}" stroke="#999"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="#999"/>',
             f'<text x="{pad - 4}" y="{y(high):.1f}" font-size="10" text-anchor="end">'
             f'{high:.2g}</text>',
             f'<text x="{pad - 4}" y="{y(low):.1f}" font-size="10" text-anchor="end">'
             f'{low:.2g}</text>',
             f'<text x="{width / 2:.0f}" y="{height - 6}" font-size="10" '
             f'text-anchor="middle">k (words deleted), 0…{k}</text>']  # fmt: skip
    for n, (name, ys) in enumerate(series.items()):
        colour = colours[n % len(colours)]
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(ys))
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>'
        )
        parts.append(f'<text x="{pad + 8}" y="{pad + 12 * n}" font-size="11" fill="{colour}">'
                     f"{escape(name)}</text>")  # fmt: skip
    parts.append("</svg>")
    return "".join(parts)


def faithfulness_section(result: FailuresFaithfulness) -> str:
    """The HTML section of a benchmark's faithfulness."""
    s = result.summary
    chart = svg_curves({"explanation's order": s.curve, "random order": s.random_curve})
    return _template().render(
        s=s, settings=result.settings, notes=result.notes, chart=chart,
        rows=result.failures[:LISTED], hidden=max(0, len(result.failures) - LISTED),
    )  # fmt: skip
