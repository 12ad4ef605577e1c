"""Integrated Gradients per sub-vector: time against the hardware floor, Captum, adaptive steps,
the Attribution page's default run, and the peak memory of the largest allowed run.

Every figure is measured in this run on the same 20-word text with minilm-pq (M = 24, K = 256,
the page's defaults). Wall times are the best of ``REPEAT`` (the machine is shared); CPU time
and a single-thread run are kept in the details because two OpenMP threads on a loaded
2-core machine can wait on each other for most of a backward pass.

- **Floor** (issue 10): exact per-sub-vector gradients need one forward pass and M
  input-gradient backward passes per quadrature node. It is measured directly: one forward
  with autograd over the same nodes, then M plain ``torch.autograd.grad`` calls on that
  graph, nothing else. Lexlens's IG at the same nodes is compared with it (goal ≤ 1.3×).
- **Captum**: one ``IntegratedGradients.attribute`` call with ``target=list(range(M))`` — Captum
  takes one target per example, so the input is repeated M times (the way to ask Captum for
  M targets in one call). Same Gauss–Legendre nodes; the numbers are checked equal.
- **Adaptive**: Clenshaw–Curtis levels 9, 17, 33, … until every sub-vector's |delta| ≤ 1 %
  of its F(x) − F(x′) (floored at the mean gap); time to converge and nodes used.
- **Page default run**: ``attribution_report`` with the page's defaults (adaptive steps, no
  MoT) on the warm encoder, as a press of *Attribute* runs it (goal < 6 s).
- **Peak RSS** of ``lexlens attribute`` in a fresh process on a 512-token text at the largest
  allowed step count (1000), ``--subvectors 4`` to keep the run short: the chunked graph, not
  M, sets the peak (goal < 2.5 GB). The full M = 24 run is measured once by hand (README).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench.run import figure

REPEAT = 2
TEXT20 = (
    "a small striped cat sleeps on a wooden chair near the window while the rain falls "
    "softly on the old garden"
)
NODES = 33


def _best(fn, repeat: int = REPEAT) -> tuple[float, float, object]:
    best_wall = best_cpu = float("inf")
    out = None
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    return best_wall, best_cpu, out


def _floor(encoder, text: str, nodes: int):
    """One forward over the nodes' interpolated inputs + M backward passes, nothing else."""
    import torch

    from lexlens.analysis.attribution import _prepare, _targets, quadrature

    prep = _prepare(encoder, text, "unk")
    alphas, _ = quadrature(nodes, "gausslegendre")
    a = torch.as_tensor(alphas, dtype=prep.x.dtype).view(-1, 1, 1)

    def run() -> None:
        path = (prep.xb + a * (prep.x - prep.xb)).requires_grad_(True)
        big_f = _targets(
            encoder, encoder.forward_embeds(path, prep.mask.expand(nodes, -1)), prep.dhat
        )
        for k in range(big_f.shape[1]):
            torch.autograd.grad(big_f[:, k].sum(), path, retain_graph=k < big_f.shape[1] - 1)

    return run


def _captum_multi(encoder, text: str, nodes: int):
    """One Captum call for all M targets: the input repeated M times, target=list(range(M))."""
    from captum.attr import IntegratedGradients

    from lexlens.analysis.attribution import _prepare, _targets

    prep = _prepare(encoder, text, "unk")
    m = encoder.m

    def forward(embeds):
        f = encoder.forward_embeds(embeds, prep.mask.expand(len(embeds), -1))
        return _targets(encoder, f, prep.dhat)  # [B, M]: Captum picks one column per row

    ig = IntegratedGradients(forward)

    def run():
        attr = ig.attribute(
            prep.x.unsqueeze(0).expand(m, -1, -1),
            baselines=prep.xb.unsqueeze(0).expand(m, -1, -1),
            target=list(range(m)),
            n_steps=nodes,
            method="gausslegendre",
        )
        return attr.sum(-1).double().cpu().numpy()  # [M, T]

    return run


def _peak_rss_cli() -> tuple[float | None, dict]:
    """Peak RSS (MB) of a fresh ``lexlens attribute`` on a 512-token text at --steps 1000."""
    import tempfile

    words = (
        "the river flows past the old mill and the miller counts his sacks of grain " * 40
    ).split()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "long.txt"
        corpus.write_text(" ".join(words[:512]) + "\n", encoding="utf-8")
        exe = Path(sys.executable).parent / "lexlens"
        cmd = [str(exe), "attribute", "--encoder", "minilm-pq", "--corpus", str(corpus),
               "--steps", "1000", "--subvectors", "4", "--json"]  # fmt: skip
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        seconds = time.perf_counter() - start
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    details = {"command": " ".join(cmd[1:]), "seconds": seconds, "returncode": proc.returncode}
    if proc.returncode != 0 or peak_kb <= before:
        details["stderr"] = proc.stderr[-500:]
        return None, details
    import json

    text = json.loads(proc.stdout)["texts"][0]
    details.update(tokens=len(text["tokens"]), truncated=text["truncated"], nodes=text["steps"])
    return peak_kb / 1024, details


def run() -> list[dict]:
    import numpy as np
    import torch

    from lexlens.analysis.attribution import attribute_texts
    from lexlens.analysis.report import attribution_report
    from lexlens.models import load_encoder

    encoder = load_encoder("minilm-pq", device="cpu")  # M = 24, K = 256 (cached codebooks)
    m = encoder.m
    attribute_texts(encoder, [TEXT20], steps=2)  # warm-up (and the memory probe)
    n_tokens = len(encoder.tokenizer.tokenize(TEXT20)) + 2
    results: list[dict] = []
    threads = torch.get_num_threads()

    def ours():
        return attribute_texts(encoder, [TEXT20], steps=NODES)[0]

    floor_w, floor_c, _ = _best(_floor(encoder, TEXT20, NODES))
    ours_w, ours_c, mine = _best(ours)
    captum_w, captum_c, ref = _best(_captum_multi(encoder, TEXT20, NODES), repeat=1)
    rel = float(np.abs(mine.token_attributions - ref).max() / np.abs(ref).max())
    torch.set_num_threads(1)
    try:
        floor_1, _, _ = _best(_floor(encoder, TEXT20, NODES))
        ours_1, _, _ = _best(ours)
    finally:
        torch.set_num_threads(threads)
    common = {"text_words": 20, "tokens": n_tokens, "m": m, "nodes": NODES, "threads": threads}
    results.append(
        figure(
            "ig_time_vs_floor",
            ours_w / floor_w,
            "x",
            goal=("<=", 1.3),
            measured_with=f"best of {REPEAT}: Lexlens IG at {NODES} Gauss–Legendre nodes / "
            "(one forward + M input-gradient backward passes over the same nodes)",
            details={
                **common,
                "ig_s": ours_w,
                "floor_s": floor_w,
                "ig_cpu_s": ours_c,
                "floor_cpu_s": floor_c,
                "ratio_cpu": ours_c / floor_c,
                "one_thread": {"ig_s": ours_1, "floor_s": floor_1, "ratio": ours_1 / floor_1},
            },
        )
    )
    results.append(
        figure(
            "ig_speedup_vs_one_captum_call",
            captum_w / ours_w,
            "x",
            goal=(">=", 1.0),
            measured_with="one Captum IntegratedGradients call with target=list(range(M)) "
            "(input repeated M times) / Lexlens IG, same nodes, wall time",
            details={
                **common,
                "captum_s": captum_w,
                "captum_cpu_s": captum_c,
                "ig_s": ours_w,
                "max_relative_difference": rel,
            },
        )
    )

    (adaptive,) = attribute_texts(encoder, [TEXT20])  # warm
    ada_w, ada_c, out = _best(lambda: attribute_texts(encoder, [TEXT20])[0])
    gap = np.abs(out.gap())
    results.append(
        figure(
            "ig_adaptive_time_to_converged",
            ada_w,
            "s",
            measured_with="attribute_texts(steps=None): Clenshaw–Curtis 9, 17, 33, … nodes until "
            "every |delta_i| ≤ 1 % of max(|F_i(x) − F_i(x′)|, mean gap)",
            details={
                **common,
                "nodes_used": out.steps,
                "converged": out.converged,
                "cpu_s": ada_c,
                "max_relative_delta": float(np.max(np.abs(out.delta) / gap)),
                "max_delta_over_floor": float(
                    np.max(np.abs(out.delta) / np.maximum(gap, gap.mean()))
                ),
            },
        )
    )

    def page_run():
        return attribution_report(encoder, [TEXT20], m=24)

    page_w, page_c, report = _best(page_run)
    torch.set_num_threads(1)
    try:
        page_1, _, _ = _best(page_run)
    finally:
        torch.set_num_threads(threads)
    results.append(
        figure(
            "attribution_page_default_run",
            page_w,
            "s",
            goal=("<", 6.0),
            measured_with=f"best of {REPEAT}: attribution_report(encoder, [20-word text], m=24) "
            "with the page's defaults (adaptive steps, no MoT), warm encoder, as Attribute runs it",
            details={
                **common,
                "nodes_used": report.attribution.texts[0].steps,
                "cpu_s": page_c,
                "one_thread_s": page_1,
                "load_average": list(os.getloadavg()),
            },
        )
    )

    if os.environ.get("LEXLENS_BENCH_SKIP_RSS"):
        rss, details = None, {"skipped": "LEXLENS_BENCH_SKIP_RSS is set"}
        how = "skipped"
    else:
        rss, details = _peak_rss_cli()
        how = "ru_maxrss of a fresh `lexlens attribute` process: 512-token text, --steps 1000"
    results.append(
        figure(
            "attribute_peak_rss_max_steps",
            rss,
            "MB",
            goal=("<", 2500.0),
            measured_with=how,
            details=details,
        )  # fmt: skip
    )
    return results
