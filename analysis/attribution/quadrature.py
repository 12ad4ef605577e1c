"""Quadrature rules on [0, 1] for the Integrated-Gradients path integral.

A fixed step count uses Gauss–Legendre nodes, the rule Captum uses by default, so one
sub-vector's attribution equals ``captum.attr.IntegratedGradients`` on that target. The
adaptive run uses Clenshaw–Curtis rules on 9, 17, 33, … nodes (:data:`ADAPTIVE_LEVELS`):
their nodes nest, each level reusing every node of the one before, so reaching 33 nodes
costs 33 gradient evaluations, not 9 + 17 + 33.
"""

from __future__ import annotations

import numpy as np

from lexlens.models.base import InputError

METHODS = ("gausslegendre", "clenshaw-curtis")
#: Adaptive Clenshaw–Curtis levels (nodes): 2^k + 1.
ADAPTIVE_LEVELS = (9, 17, 33, 65, 129, 257, 513)


def quadrature(steps: int, method: str = "gausslegendre") -> tuple[np.ndarray, np.ndarray]:
    """``(alphas, weights)`` on [0, 1] of a ``steps``-node rule (float64).

    ``gausslegendre`` is the rule Captum uses by default (``numpy``'s Legendre nodes);
    ``clenshaw-curtis`` (odd ``steps``) has nodes ``(1 − cos(jπ/N)) / 2``, ``N = steps − 1``,
    which include both ends and nest when N doubles.
    """
    if method == "gausslegendre":
        nodes, weights = np.polynomial.legendre.leggauss(int(steps))
        return (nodes + 1) / 2, weights / 2
    if method == "clenshaw-curtis":
        n = int(steps) - 1
        if n < 2 or n % 2:
            raise InputError("Clenshaw–Curtis needs an odd number of nodes ≥ 3")
        j = np.arange(n + 1)
        theta = j * np.pi / n
        k = np.arange(1, n // 2 + 1)
        b = np.where(k == n // 2, 1.0, 2.0) / (4.0 * k**2 - 1)
        c = np.where((j == 0) | (j == n), 1.0, 2.0)
        weights = c / n * (1 - (b[None, :] * np.cos(2 * np.outer(theta, k))).sum(1)) / 2
        return (1 - np.cos(theta)) / 2, weights
    raise InputError(f"unknown quadrature {method!r}: use one of {', '.join(METHODS)}")
