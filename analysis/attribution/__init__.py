"""Which words decide each discrete code of a dense + product-quantiser encoder (RepMoT,
"Interpreting Dense Retrieval as Mixture of Topics"): Integrated Gradients per sub-vector,
the topic of a code, and the masking evaluation.

- :mod:`.attribution` — the use case ``attribute`` and its :class:`AttributionResult`;
- :mod:`.ig` — the IG core, with :mod:`.objective` (the targets and one text's inputs),
  :mod:`.quadrature`, :mod:`.memory` (node chunks), :mod:`.threads`, :mod:`.words`
  (word pieces, stop words, the baseline) and :mod:`.subvector` (one text's record, RandT);
- :mod:`.options` — the options of IG, ``attribute``, ``mot_evaluate`` and the report, each
  declared once (flags and page widgets derive from them), with :mod:`.arguments` (the
  inputs: encoder, texts, source, progress, sub-vector indices);
- :mod:`.topics` — the texts sharing a code and the cloud of their top words;
- :mod:`.mot` — the masking evaluation ``mot_evaluate``, with :mod:`.mot_rankings`,
  :mod:`.mot_stats` (Wilcoxon, t-test, Benjamini–Hochberg) and :mod:`.mot_result`;
- :mod:`.display` — the tables people read (page, CLI, HTML report);
- :mod:`.report` — the report use cases ``attribution_report`` and ``build_report`` (the
  report ``lexlens report`` writes for any encoder), with :mod:`.report_html` (what the
  HTML and CSV show).
"""
