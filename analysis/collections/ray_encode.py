"""Corpus-scale encoding on Ray (``lexlens index … --ray [ADDRESS]``).

Ray Data runs one encoder per actor (a GPU per actor where the cluster has GPUs); each
actor loads the encoder by its registry name or checkpoint path, reads its items (image
files from the source folder, which the workers must see at the same path, or texts),
encodes and gates them with the in-process build's own step
(:func:`.encoding.encode_payloads`), and sends back the sparse rows with each text's token
ids. The driver writes them into the same index, in source order.

The work is cut into the in-process build's batches (``batch_size`` items each, in source
order), one Ray row per batch: a network's float sums depend on the batch an input is
padded with, so the same batches give the same bytes — the index equals the in-process
build's, file for file, but for the manifest's dates.

``--ray`` alone (``local``) starts a private Ray on this machine, bound to 127.0.0.1, and
stops it afterwards; ``--ray auto`` joins the cluster this machine belongs to; ``--ray
ray://HOST:PORT`` connects a Ray client to a cluster's head. Ray's dashboard and its usage
statistics are off (``RAY_USAGE_STATS_ENABLED=0``): a build never reports anywhere. Needs
``pip install "lexlens[ray]"``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from lexlens.analysis.collections.encoding import encode_payloads
from lexlens.analysis.datasets.items import Skipped
from lexlens.models import load_encoder
from lexlens.models.base import Encoder, InputError


def check_ray() -> None:
    """Ray is installed (before any work starts, without importing it; the address is
    checked by its declaration, :class:`~.options.IndexOptions`)."""
    spec = importlib.util.find_spec("ray")
    if spec is None or not str(spec.origin or "").endswith("__init__.py"):
        # not installed (a folder named ray, read as a namespace package, is no Ray)
        raise InputError('encoding on Ray needs Ray: pip install "lexlens[ray]" (or drop --ray)')


#: What a local Ray's processes are started with: no usage statistics; addresses on the
#: loopback only (Ray would otherwise look for this machine's outward address); and,
#: because Ray's usage module asks cloud metadata services (169.254.169.254,
#: metadata.google.internal) which cloud it runs on even with statistics off, an HTTP proxy
#: that refuses at once (127.0.0.1:9) for every address but this machine's.
LOCAL_RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "no_proxy": "127.0.0.1,localhost,::1",
    "NO_PROXY": "127.0.0.1,localhost,::1",
}
#: Ray's options for every start or join: no dashboard, quiet.
RAY_OPTIONS: dict[str, Any] = {
    "ignore_reinit_error": True,
    "include_dashboard": False,
    "logging_level": logging.ERROR,
    "log_to_driver": False,
}


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in this process's environment for the block (what Ray's processes
    started in it inherit), the previous environment afterwards."""
    before = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def start_local_ray(num_cpus: int | None = None) -> bool:
    """Start a private Ray on this machine (``--ray`` alone): bound to 127.0.0.1, no
    dashboard, no usage statistics, nothing sent off the machine (:data:`LOCAL_RAY_ENV`;
    Ray reads part of it when first imported, so this comes before any other import of
    Ray in the process, or its choice is overridden for the start). Returns whether it
    started one (``False``: a Ray already runs in this process, which is used as it is)."""
    with _environment(LOCAL_RAY_ENV), _loopback_only():
        import ray  # optional extra: ray, read with this environment

        if ray.is_initialized():
            return False
        ray.init(num_cpus=num_cpus, **RAY_OPTIONS)
    return True


@contextlib.contextmanager
def _loopback_only() -> Iterator[None]:
    """Ray reads ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` once, at its first import: a
    process that imported Ray before would look for its outward address and bind every
    interface. Its module constant is set to the loopback choice for the start (the
    node's address is fixed by then), and put back afterwards."""
    if "ray" not in sys.modules:
        yield
        return
    from ray._private import ray_constants  # optional extra: ray

    before = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before


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
    """One encoder per actor: loads it once, then encodes one build batch per row."""

    def __init__(self, spec: str, gate_k: int, device: str | None, root: str, threads: int) -> None:
        import torch  # heavy: torch loads on first use

        torch.set_num_threads(threads)
        logging.getLogger().setLevel(logging.ERROR)
        self.encoder = load_encoder(spec, device=device)
        self.gate_k = gate_k
        self.root = Path(root)

    def __call__(self, rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out: dict[str, list] = {key: [] for key in _RESULT_FIELDS}
        for n, batch in zip(rows["n"], rows["batch"], strict=True):
            result = self.encode(json.loads(str(batch))) | {"n": int(n)}
            for key in _RESULT_FIELDS:
                out[key].append(result[key])
        return {key: np.array(values, dtype=object) for key, values in out.items()}

    def encode(self, batch: list[list[str]]) -> dict[str, Any]:
        """One build batch of (kind, image path or text, where): the rows of those that
        encode (concatenated, with their lengths) and a reason for each that does not."""
        payloads: list[tuple[str, Any, str]] = []
        reasons: list[str] = [""] * len(batch)
        slots = []
        for i, (kind, value, where) in enumerate(batch):
            if kind == "image":
                try:
                    payloads.append((kind, (self.root / value).read_bytes(), where))
                except OSError as exc:
                    reasons[i] = f"cannot read ({exc.strerror or exc})"
                    continue
            else:
                payloads.append((kind, value, where))
            slots.append(i)
        lengths = np.zeros(len(batch), np.int64)
        token_lengths = np.full(len(batch), -1, np.int64)
        cols, vals, tokens = [], [], []
        for slot, result in zip(
            slots, encode_payloads(self.encoder, self.gate_k, payloads), strict=True
        ):
            if isinstance(result, Skipped):
                reasons[slot] = result.reason
                continue
            indices, weights, token_ids = result
            lengths[slot] = indices.size
            cols.append(np.asarray(indices, np.int32))
            vals.append(np.asarray(weights, np.float32))
            if token_ids is not None:
                token_lengths[slot] = token_ids.size
                tokens.append(np.asarray(token_ids, np.int32))
        joined = (np.concatenate(x).tobytes() if x else b"" for x in (cols, vals, tokens))
        return dict(
            zip(
                _RESULT_FIELDS[1:],
                (lengths.tobytes(), *joined, token_lengths.tobytes(), json.dumps(reasons)),
                strict=True,
            )
        )


#: What an actor sends back for one batch.
_RESULT_FIELDS = ("n", "lengths", "indices", "data", "tokens", "token_lengths", "reasons")


def _unpacked(row: dict[str, Any]) -> Iterator[tuple[np.ndarray, np.ndarray, Any] | str]:
    """The items of one batch's result, in order: (indices, weights, token ids) or a reason."""
    lengths = np.frombuffer(row["lengths"], np.int64)
    token_lengths = np.frombuffer(row["token_lengths"], np.int64)
    indices = np.frombuffer(row["indices"], np.int32)
    data = np.frombuffer(row["data"], np.float32)
    tokens = np.frombuffer(row["tokens"], np.int32)
    at = tok = 0
    for length, token_length, reason in zip(
        lengths, token_lengths, json.loads(row["reasons"]), strict=True
    ):
        if reason:
            yield reason
            continue
        ids = None
        if token_length >= 0:
            ids = tokens[tok : tok + token_length]
            tok += token_length
        yield indices[at : at + length], data[at : at + length], ids
        at += length


def _actor_shape(gpus: int) -> tuple[int, int, int]:
    """(torch threads, CPUs reserved, count) of the actors: a GPU each where the cluster
    has GPUs; else as many threads as this process's own build would use (a network's
    float sums, a convolution's above all, depend on how its work is split among threads:
    the same split gives the same bytes), CPUs reserved to match on the largest node, and
    as many actors as the cluster's CPUs hold. ``LEXLENS_RAY_THREADS`` sets the threads."""
    import ray  # optional extra: ray
    import torch  # heavy: torch loads on first use

    threads = int(os.environ.get("LEXLENS_RAY_THREADS", "0")) or torch.get_num_threads()
    if gpus:
        return threads, 0, gpus
    largest = max(
        (int(node["Resources"].get("CPU", 0)) for node in ray.nodes() if node.get("Alive")),
        default=1,
    )
    per_actor = max(1, min(threads, largest))
    total = int(ray.cluster_resources().get("CPU", 1))
    return threads, per_actor, max(1, total // per_actor)


class RayEncoder:
    """Encodes a list of pending items on Ray Data, yielding results in their order."""

    def __init__(
        self, encoder: Encoder, gate_k: int, batch_size: int, *, address: str, spec: str
    ) -> None:
        check_ray()
        self.gate_k, self.batch_size, self.spec = gate_k, batch_size, spec
        try:
            if address == "local":
                self._started = start_local_ray()
            else:
                with _environment({"RAY_USAGE_STATS_ENABLED": "0"}):
                    import ray  # optional extra: ray, read with this environment

                    self._started = not ray.is_initialized()
                    ray.init(address=address, **RAY_OPTIONS)
        except Exception as exc:  # noqa: BLE001 (Ray raises ConnectionError, RuntimeError…)
            raise InputError(f"--ray {address}: cannot start or reach Ray ({exc})") from None
        import ray  # optional extra: ray

        _quiet()
        self.gpus = int(ray.cluster_resources().get("GPU", 0))
        self.threads, self.cpus_per_actor, self.actors = _actor_shape(self.gpus)

    def encode_all(
        self, todo: list[tuple[str, str, str]], root: Path
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray | None] | str]:
        """For each (kind, image path or text, where): (indices, weights, a text's token ids)
        as :func:`.encoding.encode_payloads` gives them, or a reason."""
        import ray  # optional extra: ray

        if not todo:
            return

        _quiet()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Ray's deprecation notices about its own settings
            context = ray.data.DataContext.get_current()
            context.execution_options.preserve_order = True
            context.enable_progress_bars = False
        size = max(1, self.batch_size)
        batches = [
            {"n": n, "batch": json.dumps(todo[start : start + size])}
            for n, start in enumerate(range(0, len(todo), size))
        ]
        dataset = ray.data.from_items(
            batches, override_num_blocks=max(1, min(len(batches), self.actors * 4))
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
                    "threads": self.threads,
                },
                batch_size=1,
                compute=ray.data.ActorPoolStrategy(size=min(self.actors, len(batches))),
                num_gpus=1 if self.gpus else 0,
                num_cpus=0 if self.gpus else self.cpus_per_actor,
                batch_format="numpy",
                max_restarts=0,
            )
        waiting: dict[int, Any] = {}
        expected = done = 0
        rows = iter(encoded.iter_rows())
        while True:
            with warnings.catch_warnings():  # the notices again, as Ray runs the plan
                warnings.simplefilter("ignore")
                row = next(rows, None)
            if row is None:
                break
            waiting[int(row["n"])] = row
            while expected in waiting:
                for result in _unpacked(waiting.pop(expected)):
                    done += 1
                    yield result
                expected += 1
        if done != len(todo):
            raise InputError(f"Ray returned {done} of {len(todo)} items")

    def close(self) -> None:
        """Shut down the Ray this encoder started (a cluster it joined keeps running)."""
        import ray  # optional extra: ray

        if self._started and ray.is_initialized():
            ray.shutdown()
