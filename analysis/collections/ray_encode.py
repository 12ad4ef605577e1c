"""Corpus-scale encoding on Ray (``lexlens index … --ray [ADDRESS]``).

Ray Data ``map_batches`` runs one encoder per actor (a GPU per actor where the cluster has
GPUs); each actor loads the encoder by its registry name or checkpoint path, reads its
items (image files from the source folder, or texts), encodes and gates them exactly as
the in-process build does (:func:`.encoding.encode_payloads`), and sends
back the sparse rows. The driver writes them into the same index, in source order.

``--ray`` alone starts a local Ray on this machine; ``--ray auto`` joins the cluster this
machine belongs to; ``--ray ray://HOST:PORT`` connects a Ray client. Needs
``pip install "lexlens[ray]"``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.collections.encoding import encode_payloads
from lexlens.analysis.collections.items import Skipped
from lexlens.models.base import Encoder, InputError


def check_ray() -> None:
    """Ray is installed (before any work starts; the address is checked by its declaration,
    :class:`~.options.IndexOptions`)."""
    try:
        import ray
    except ImportError:
        ray = None
    if not hasattr(ray, "init"):  # not installed (a folder named ray is no Ray)
        raise InputError('encoding on Ray needs Ray: pip install "lexlens[ray]" (or drop --ray)')


def _quiet() -> None:
    """Ray's own INFO/WARNING lines would bury the one-line summary on stderr. Only Ray's
    loggers and handlers are turned down: the caller's (root) handlers, which Ray may list
    on its loggers too, keep their levels."""
    mine = set(logging.getLogger().handlers)
    for name in ("ray", "ray.data", "ray.util", "ray.data._internal"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.ERROR)
        for handler in logger.handlers:
            if handler not in mine:
                handler.setLevel(logging.ERROR)


class _EncodeActor:
    """One encoder per actor: loads it once, then encodes batches of items."""

    def __init__(self, spec: str, gate_k: int, device: str | None, root: str) -> None:
        import torch

        from lexlens.models import load_encoder

        torch.set_num_threads(max(1, int(os.environ.get("LEXLENS_RAY_THREADS", "1"))))
        logging.getLogger().setLevel(logging.ERROR)
        self.encoder = load_encoder(spec, device=device)
        self.gate_k = gate_k
        self.root = Path(root)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        payloads: list[tuple[str, Any, str]] = []
        failed: dict[int, str] = {}
        for i, (kind, value, where) in enumerate(
            zip(batch["kind"], batch["value"], batch["where"], strict=True)
        ):
            if kind == "image":
                try:
                    payloads.append((kind, (self.root / str(value)).read_bytes(), str(where)))
                except OSError as exc:
                    failed[i] = f"cannot read ({exc.strerror or exc})"
                    payloads.append(("text", "x", str(where)))  # placeholder, dropped below
            else:
                payloads.append((kind, str(value), str(where)))
        results = encode_payloads(self.encoder, self.gate_k, payloads)
        indices, data, tokens, errors = [], [], [], []
        for i, result in enumerate(results):
            if i in failed or isinstance(result, Skipped):
                indices.append(b"")
                data.append(b"")
                tokens.append(None)
                errors.append(failed.get(i) or result.reason)
            else:
                cols, vals, token_ids = result
                indices.append(np.asarray(cols, np.int32).tobytes())
                data.append(np.asarray(vals, np.float32).tobytes())
                tokens.append(None if token_ids is None else token_ids.tobytes())
                errors.append("")
        return {
            "n": np.asarray(batch["n"]),
            "indices": np.array(indices, dtype=object),
            "data": np.array(data, dtype=object),
            "tokens": np.array(tokens, dtype=object),
            "error": np.array(errors, dtype=object),
        }


class RayEncoder:
    """Encodes a list of pending items on Ray Data, yielding results in their order."""

    def __init__(
        self, encoder: Encoder, gate_k: int, batch_size: int, *, address: str, spec: str
    ) -> None:
        check_ray()
        import ray

        _quiet()
        self.gate_k, self.batch_size, self.spec = gate_k, batch_size, spec
        self._started = not ray.is_initialized()
        options: dict[str, Any] = {
            "ignore_reinit_error": True,
            "include_dashboard": False,
            "logging_level": logging.ERROR,
            "log_to_driver": False,
        }
        try:
            if address == "local":
                ray.init(**options)
            else:
                ray.init(address=address, **options)
        except Exception as exc:  # noqa: BLE001 (Ray raises ConnectionError, RuntimeError…)
            raise InputError(f"--ray {address}: cannot start or reach Ray ({exc})") from None
        resources = ray.cluster_resources()
        self.gpus = int(resources.get("GPU", 0))
        cpus = int(resources.get("CPU", 1))
        self.actors = max(1, self.gpus if self.gpus else cpus)

    def encode_all(
        self, todo: list[tuple[str, str, str]], root: Path
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | None] | str]:
        """For each (kind, image path or text, where): (indices, weights, a text's token ids)
        as :func:`.encoding.encode_payloads` gives them, or a reason."""
        import ray

        if not todo:
            return
        import warnings

        _quiet()
        context = ray.data.DataContext.get_current()
        context.execution_options.preserve_order = True
        context.enable_progress_bars = False
        items = [
            {"n": n, "kind": kind, "value": value, "where": where}
            for n, (kind, value, where) in enumerate(todo)
        ]
        dataset = ray.data.from_items(
            items, override_num_blocks=max(1, min(len(items), self.actors * 4))
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Ray's deprecation notices about its own arguments
            encoded = dataset.map_batches(
                _EncodeActor,
                fn_constructor_kwargs={
                    "spec": self.spec,
                    "gate_k": self.gate_k,
                    "device": "cuda" if self.gpus else "cpu",
                    "root": str(root),
                },  # fmt: skip
                batch_size=self.batch_size,
                compute=ray.data.ActorPoolStrategy(size=self.actors),
                num_gpus=1 if self.gpus else 0,
                num_cpus=0 if self.gpus else 1,
                batch_format="numpy",
                max_restarts=0,
            )
        waiting: dict[int, Any] = {}
        expected = 0
        for row in encoded.iter_rows():
            waiting[int(row["n"])] = row
            while expected in waiting:
                row = waiting.pop(expected)
                expected += 1
                if row["error"]:
                    yield str(row["error"])
                else:
                    tokens = row["tokens"]
                    yield (
                        np.frombuffer(row["indices"], dtype=np.int32),
                        np.frombuffer(row["data"], dtype=np.float32),
                        None if tokens is None else np.frombuffer(tokens, dtype=np.int32),
                    )
        if expected != len(todo):
            raise InputError(f"Ray returned {expected} of {len(todo)} items")

    def close(self) -> None:
        """Shut down the Ray this encoder started (a cluster it joined keeps running)."""
        import ray

        if self._started and ray.is_initialized():
            ray.shutdown()
