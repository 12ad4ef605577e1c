"""Integrated Gradients per sub-vector: time against the hardware floor, Captum, adaptive steps,
the Attribution page's default run, and the peak memory of the largest allowed run.

Every figure is measured in this run on the same 20-word text with minilm-pq (M = 24, K = 256,
the page's defaults); contenders run interleaved, best of ``REPEAT``. Ratios use the CPU time
of one-thread runs: on a shared 2-core machine two OpenMP threads can wait on each other for
most of a backward pass, so wall time with two threads says more about the neighbours than
about the code (IG itself runs with one thread on ≤ 2-CPU machines, see
``lexlens.analysis.core.threads``; the two-thread timings are kept in the details).

- **Floor**: exact per-sub-vector gradients need one forward pass and M
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
  allowed step count (1000), ``--m 2`` to keep the run short: the chunked graph, not
  M, sets the peak (goal < 2.5 GB). The full M = 24 run, measured once with ``/usr/bin/time -v``
  (one thread, niced, on the shared machine): 1,533,064 kB peak, 1 h 42 min.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench.run import child_run, figure

REPEAT = 3
TEXT20 = (
    "a small striped cat sleeps on a wooden chair near the window while the rain falls "
    "softly on the old garden"
)
NODES = 33


def _floor(encoder, text: str, nodes: int):
    """One forward over the nodes' interpolated inputs + M backward passes, nothing else."""
    import torch

    from lexlens.analysis.attribution.objective import prepare, targets
    from lexlens.analysis.attribution.quadrature import quadrature

    prep = prepare(encoder, text, "unk")
    alphas, _ = quadrature(nodes, "gausslegendre")
    a = torch.as_tensor(alphas, dtype=prep.x.dtype).view(-1, 1, 1)

    def run() -> None:
        path = (prep.xb + a * (prep.x - prep.xb)).requires_grad_(True)
        big_f = targets(
            encoder, encoder.forward_embeds(path, prep.mask.expand(nodes, -1)), prep.dhat
        )
        for k in range(big_f.shape[1]):
            torch.autograd.grad(big_f[:, k].sum(), path, retain_graph=k < big_f.shape[1] - 1)

    return run


def _captum_multi(encoder, text: str, nodes: int):
    """One Captum call for all M targets: the input repeated M times, target=list(range(M))."""
    from captum.attr import IntegratedGradients

    from lexlens.analysis.attribution.objective import prepare, targets

    prep = prepare(encoder, text, "unk")
    m = encoder.m

    def forward(embeds):
        f = encoder.forward_embeds(embeds, prep.mask.expand(len(embeds), -1))
        return targets(encoder, f, prep.dhat)  # [B, M]: Captum picks one column per row

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
    """Peak RSS (MB) of ``lexlens attribute`` in a fresh process on a 512-token text at
    ``--steps 1000`` (the CLI's ``main``, as the console script runs it)."""
    import tempfile

    words = (
        "the river flows past the old mill and the miller counts his sacks of grain " * 40
    ).split()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "long.txt"
        corpus.write_text(" ".join(words[:512]) + "\n", encoding="utf-8")
        argv = [
            "attribute",
            "--encoder",
            "minilm-pq",
            "--corpus",
            str(corpus),
            "--steps",
            "1000",
            "--m",
            "2",
            "--json",
        ]
        start = time.perf_counter()
        try:
            out = child_run(
                f"""
                import contextlib, io
                from lexlens.app.cli import main
                buf = io.StringIO()
                with contextlib.redirect_stdout(buf):
                    code = main({argv!r})
                text = json.loads(buf.getvalue())["texts"][0] if code == 0 else {{}}
                _done({{"returncode": code, "tokens": len(text.get("tokens", [])),
                        "truncated": text.get("truncated"), "nodes": text.get("steps")}})
                """
            )
        except RuntimeError as exc:
            return None, {"command": " ".join(argv), "error": str(exc)[-500:]}
    details = {"command": " ".join(argv), "seconds": time.perf_counter() - start, **out}
    if out["returncode"] != 0:
        return None, details
    return out["peak_rss_mb"], details


def _interleaved(fns: dict, repeat: int = REPEAT) -> dict[str, dict[str, float]]:
    """Best wall and CPU time of each function, the calls interleaved (a load spike on a
    shared machine then hits every contender alike rather than one of them)."""
    best = {k: {"wall": float("inf"), "cpu": float("inf")} for k in fns}
    for _ in range(repeat):
        for key, fn in fns.items():
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            best[key]["wall"] = min(best[key]["wall"], time.perf_counter() - wall)
            best[key]["cpu"] = min(best[key]["cpu"], time.process_time() - cpu)
    return best


def run() -> list[dict]:
    import numpy as np
    import torch

    from lexlens.analysis.attribution.ig import attribute_texts
    from lexlens.analysis.attribution.report import attribution_report
    from lexlens.models import load_encoder

    encoder = load_encoder("minilm-pq", device="cpu")  # M = 24, K = 256 (cached codebooks)
    m = encoder.m
    attribute_texts(encoder, [TEXT20], steps=2)  # warm-up (and the memory probe)
    n_tokens = len(encoder.tokenizer.tokenize(TEXT20)) + 2
    results: list[dict] = []
    threads = torch.get_num_threads()

    def ours():
        return attribute_texts(encoder, [TEXT20], steps=NODES)[0]

    floor = _floor(encoder, TEXT20, NODES)
    captum = _captum_multi(encoder, TEXT20, NODES)
    rel = float(np.abs(ours().token_attributions - captum()).max() / np.abs(captum()).max())
    many = _interleaved({"floor": floor, "ig": ours, "captum": captum})
    torch.set_num_threads(1)
    try:  # one thread: CPU time is the work done, whatever else runs on the machine
        one = _interleaved({"floor": floor, "ig": ours, "captum": captum})
    finally:
        torch.set_num_threads(threads)
    common = {"text_words": 20, "tokens": n_tokens, "m": m, "nodes": NODES, "threads": threads}
    results.append(
        figure(
            "ig_time_vs_floor",
            one["ig"]["cpu"] / one["floor"]["cpu"],
            "x",
            goal=("<=", 1.3),
            measured_with=f"CPU time, one thread, best of {REPEAT} interleaved runs: Lexlens IG at "
            f"{NODES} Gauss–Legendre nodes / (one forward + M input-gradient backward passes "
            "over the same nodes, nothing else)",
            details={
                **common,
                "one_thread": one,
                "default_threads": many,
                "wall_ratio_default_threads": many["ig"]["wall"] / many["floor"]["wall"],
            },
        )
    )
    results.append(
        figure(
            "ig_speedup_vs_one_captum_call",
            one["captum"]["cpu"] / one["ig"]["cpu"],
            "x",
            goal=(">=", 1.0),
            measured_with="CPU time, one thread: one Captum IntegratedGradients call with "
            "target=list(range(M)) (the input repeated M times) / Lexlens IG, same nodes",
            details={
                **common,
                "one_thread": one,
                "default_threads": many,
                "wall_speedup_default_threads": many["captum"]["wall"] / many["ig"]["wall"],
                "max_relative_difference": rel,
            },
        )
    )

    out = attribute_texts(encoder, [TEXT20])[0]
    adaptive = _interleaved({"adaptive": lambda: attribute_texts(encoder, [TEXT20])})
    gap = np.abs(out.gap())
    results.append(
        figure(
            "ig_adaptive_time_to_converged",
            adaptive["adaptive"]["wall"],
            "s",
            measured_with="attribute_texts(steps=None): Clenshaw–Curtis 9, 17, 33, … nodes until "
            "every |delta_i| ≤ 1 % of max(|F_i(x) − F_i(x′)|, mean gap); wall, default threads",
            details={
                **common,
                "nodes_used": out.steps,
                "converged": out.converged,
                "cpu_s": adaptive["adaptive"]["cpu"],
                "max_relative_delta": float(np.max(np.abs(out.delta) / gap)),
                "max_delta_over_floor": float(
                    np.max(np.abs(out.delta) / np.maximum(gap, gap.mean()))
                ),
            },
        )
    )

    def page_run():
        return attribution_report(encoder, [TEXT20], m=24)

    page = _interleaved({"page": page_run})
    torch.set_num_threads(1)
    try:
        page_1 = _interleaved({"page": page_run})
    finally:
        torch.set_num_threads(threads)
    results.append(
        figure(
            "attribution_page_default_run",
            page["page"]["wall"],
            "s",
            goal=("<", 6.0),
            measured_with=f"best of {REPEAT}: attribution_report(encoder, [20-word text], m=24) "
            "with the page's defaults (adaptive steps, no MoT), warm encoder, as Attribute runs "
            "it; wall time, default threads",
            details={
                **common,
                "nodes_used": page_run().attribution.texts[0].steps,
                "cpu_s": page["page"]["cpu"],
                "one_thread_wall_s": page_1["page"]["wall"],
                "load_average": list(os.getloadavg()),
            },
        )
    )

    if os.environ.get("LEXLENS_BENCH_SKIP_RSS"):
        rss, details = None, {"skipped": "LEXLENS_BENCH_SKIP_RSS is set"}
        how = "skipped"
    else:
        rss, details = _peak_rss_cli()
        how = "VmHWM of a fresh process running `lexlens attribute`: 512-token text, --steps 1000"
    results.append(
        figure(
            "attribute_peak_rss_max_steps",
            rss,
            "MB",
            goal=("<", 2500.0),
            measured_with=how,
            details=details,
        )
    )
    return results
