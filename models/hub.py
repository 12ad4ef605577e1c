"""Hugging Face hub ids resolved from the local cache only: Lexlens never downloads.

``load_encoder("vsearch/vdr-cross-modal")`` (or ``--encoder naver/splade-v3``) finds the
snapshot a previous ``huggingface-cli download`` / ``from_pretrained`` left in the cache
(``huggingface_hub.snapshot_download(repo_id, local_files_only=True)``) and loads that
folder as a checkpoint directory. ``owner/name@REVISION`` picks a branch, tag or commit
other than ``main``.

The cache is the one huggingface_hub itself uses, read from the environment at call time:
``HF_HUB_CACHE`` (or the legacy ``HUGGINGFACE_HUB_CACHE``), else ``HF_HOME/hub``, else
``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from lexlens.models.base import EncoderCard, LexlensError
from lexlens.models.detect import detect_directory
from lexlens.models.imports import HEAVY_IMPORTS

#: ``owner/name`` with hub-legal characters, optionally ``@revision``.
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*(@[\w./-]+)?$")


class HubCacheError(LexlensError):
    """A hub id that is not (completely) in the local cache."""


def hub_cache_dir() -> Path:
    """The hub cache huggingface_hub would use with the current environment."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        value = os.environ.get(var)
        if value:
            return Path(os.path.expandvars(value)).expanduser()
    home = os.environ.get("HF_HOME")
    if home:
        return Path(os.path.expandvars(home)).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "huggingface" / "hub"


def looks_like_hub_id(spec: str) -> bool:
    """``owner/name`` (not a path that exists, not absolute, no ``./`` or ``~``)."""
    return bool(HUB_ID.match(spec)) and ".." not in spec and not spec.startswith(".")


def split_revision(spec: str) -> tuple[str, str | None]:
    """``owner/name@rev`` → ``("owner/name", "rev")``; no ``@``: revision ``None``."""
    repo_id, _, revision = spec.partition("@")
    return repo_id, revision or None


def resolve(spec: str) -> Path:
    """The cached snapshot folder of ``owner/name[@revision]``; never touches the network.

    Raises :class:`HubCacheError` in one line naming the id and the cache searched.
    """
    with HEAVY_IMPORTS:
        from huggingface_hub import snapshot_download  # heavy: huggingface_hub, under HEAVY_IMPORTS

        # heavy: huggingface_hub, under HEAVY_IMPORTS
        from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    repo_id, revision = split_revision(spec)
    cache = hub_cache_dir()
    where = f"models--{repo_id.replace('/', '--')}"
    try:
        folder = snapshot_download(
            repo_id, revision=revision, cache_dir=str(cache), local_files_only=True
        )
    except HFValidationError as exc:
        raise HubCacheError(f"{spec!r} is not a valid Hugging Face repo id ({exc})") from None
    except LocalEntryNotFoundError:
        rev = f" at revision {revision!r}" if revision else ""
        raise HubCacheError(
            f"{repo_id!r}{rev} is not in the Hugging Face cache {cache} (looked for {where}); "
            "Lexlens never downloads: fetch it with `huggingface-cli download "
            f"{repo_id}` where there is network, or pass a local directory"
        ) from None
    except Exception as exc:  # IncompleteSnapshotError, an unreadable cache …
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HubCacheError(f"{repo_id!r} in the cache {cache}: {text[:200]}") from None
    return Path(folder)


_MEMO: dict[str, tuple[tuple, list[EncoderCard]]] = {}


def cached_models(cache: str | Path | None = None) -> list[EncoderCard]:
    """Cards of the cached hub models Lexlens can load, by repo id (no weights are read).

    ``card.weights`` is the snapshot folder. "Loadable" is decided from the snapshot's files
    alone (:func:`lexlens.models.detect.detect_directory`): a VDR, SPLADE, D2S or dense
    model config with its weight file present. An absent or unreadable cache gives an empty
    list. The cache is scanned again only when its snapshot folders change (the app calls
    this on every rerun).
    """
    root = Path(cache) if cache is not None else hub_cache_dir()
    if not root.is_dir():
        return []
    state = _state(root)
    memo = _MEMO.get(str(root))
    if memo is None or memo[0] != state:
        memo = (state, _scan(root))
        _MEMO[str(root)] = memo
    return list(memo[1])


def _state(root: Path) -> tuple:
    """Modification times of the cache's snapshot folders: a new download changes them."""
    stamps = []
    for repo in sorted(root.glob("models--*")):
        for folder in (repo / "snapshots", *sorted((repo / "snapshots").glob("*"))):
            try:
                stamps.append((str(folder), folder.stat().st_mtime_ns))
            except OSError:
                continue
    return tuple(stamps)


def _scan(root: Path) -> list[EncoderCard]:
    with HEAVY_IMPORTS:
        from huggingface_hub import scan_cache_dir  # heavy: huggingface_hub, under HEAVY_IMPORTS

    try:
        info = scan_cache_dir(root)
    except Exception:  # CacheNotFound, a permission problem: nothing to offer
        return []
    out = []
    for repo in sorted(info.repos, key=lambda r: r.repo_id.lower()):
        if repo.repo_type != "model" or not repo.revisions:
            continue
        main = [r for r in repo.revisions if "main" in r.refs]
        revision = main[0] if main else max(repo.revisions, key=lambda r: r.last_modified)
        snapshot = Path(revision.snapshot_path)
        try:
            kind = detect_directory(snapshot, check_weights=True)
        except LexlensError:
            continue
        out.append(
            EncoderCard(
                name=repo.repo_id,
                summary=f"{kind.description} from the Hugging Face cache",
                capabilities=kind.capabilities,
                vocab_size=kind.vocab_size,
                weights=str(snapshot),
                licence="see the model card",
            )
        )
    return out
