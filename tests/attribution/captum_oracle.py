"""A reference for the tests: one plain Captum ``IntegratedGradients`` run (Gauss–Legendre)
on the same target and baseline as Lexlens's IG."""

from __future__ import annotations

import numpy as np
import torch

from lexlens.analysis.attribution.arguments import index_below
from lexlens.analysis.attribution.objective import prepare, targets
from lexlens.analysis.attribution.options import ATTRIBUTION_NEEDS, IgOptions
from lexlens.analysis.core.arguments import texts_argument


def captum_attribution(
    encoder, text: str, subvector: int | None, steps: int, *, baseline: str = "unk"
) -> tuple[np.ndarray, float]:
    """Captum's token attributions ``[n_tokens]`` and convergence delta for one target.

    ``subvector=None`` attributes the whole vector (GlobalT).
    """
    from captum.attr import IntegratedGradients

    ATTRIBUTION_NEEDS.check(encoder)
    texts_argument([text])
    steps = IgOptions.of(steps=steps).steps
    if subvector is not None:
        index_below(subvector, encoder.m, "subvector", f"the codebook has M={encoder.m}")
    prep = prepare(encoder, text, baseline)

    def forward(embeds: torch.Tensor) -> torch.Tensor:
        big_f = targets(
            encoder, encoder.forward_embeds(embeds, prep.mask.expand(len(embeds), -1)), prep.dhat
        )
        return big_f.sum(1) if subvector is None else big_f[:, subvector]

    attr, delta = IntegratedGradients(forward).attribute(
        prep.x.unsqueeze(0),
        baselines=prep.xb.unsqueeze(0),
        n_steps=steps,
        method="gausslegendre",
        return_convergence_delta=True,
    )
    return attr.sum(-1)[0].double().cpu().numpy(), float(delta[0])
