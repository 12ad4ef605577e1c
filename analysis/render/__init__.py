"""Drawing: pictures, plots and HTML reports of what an analysis hands over.

render imports only :mod:`lexlens.analysis.core` and libraries (tests/core/test_layers.py
checks it): a report's use case lives with its analysis and calls
:func:`~lexlens.analysis.render.html.render_report`, the one way an HTML report is written.
"""
