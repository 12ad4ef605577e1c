"""Bad input at every entry point, one table: no traceback, no NaN, one clear line.

Each row runs one ``lexlens`` command in this process (``main(argv)``) on a hostile input
built below (unreadable, empty, corrupt, mislabelled or absurd files and options) and states
what a user must see:

- ``ERR``: exit status 2 and exactly one stderr line ``lexlens CMD: error: …`` that names
  the culprit (the needle), with no traceback;
- ``OK``: exit status 0, strict JSON on stdout (no ``NaN``/``Infinity``), and no stray
  stderr lines (library warnings) before or after it;
- ``ANY``: either of the two above (the input is odd but legitimate).

The pages get the same treatment at the end (AppTest): a bad upload or an empty input
shows ``st.error`` naming the user's file, never an exception, and earlier results stay.
"""

from __future__ import annotations

import io
import json
import os
import re
import struct
import sys
import zlib
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import formula_cells, skimage_path

ERR, OK, ANY = "error", "ok", "any"
ROOT = Path(__file__).resolve().parents[2]
#: A file the kernel refuses to read even to root (procfs, mode --w-------): a symlink to
#: it is an unreadable file whatever user runs the tests.
DENIED = Path("/proc/sys/vm/compact_memory")
#: A folder nobody may create, root included (sysfs).
UNWRITABLE_OUT = "/sys/lexlens-robustness-out"


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    expect: str
    needle: str = ""  # must appear in the one-line error (case-insensitive)
    env: dict[str, str] = field(default_factory=dict)


def C(id: str, *argv: str, expect: str = ERR, needle: str = "", **env: str) -> Case:
    return Case(id, argv, expect, needle, env)


# ---------------------------------------------------------------------------- the inputs


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG that declares ``width``×``height`` pixels but holds one row: a decompression bomb
    for any reader that trusts the header."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\x00" * (width + 1)))
        + chunk(b"IEND", b"")
    )


def _unreadable(path: Path) -> Path:
    """``path`` made unreadable: a symlink to ``DENIED`` (or mode 000 for a non-root user)."""
    if DENIED.exists():
        path.symlink_to(DENIED)
    elif os.geteuid() != 0:
        path.write_text("secret\n")
        path.chmod(0)
    else:
        pytest.skip("no way to make a file unreadable to root here")
    return path


def _model_copy(base: Path, dest: Path, edit: Callable[[dict], None] | None = None) -> Path:
    """A model folder whose files link to ``base``'s; ``edit`` rewrites its config.json."""
    dest.mkdir()
    for item in base.iterdir():
        (dest / item.name).symlink_to(item)
    if edit is not None:
        config = json.loads((base / "config.json").read_text())
        edit(config)
        (dest / "config.json").unlink()
        (dest / "config.json").write_text(json.dumps(config))
    return dest


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """Every hostile file of the table, built once."""
    from PIL import Image

    from lexlens.models.packaged import splade_tiny_dir

    d = tmp_path_factory.mktemp("bad")
    f: dict[str, str] = {"tmp": str(d), "chelsea": str(skimage_path("chelsea.png"))}

    def put(name: str, data: bytes | str) -> str:
        path = d / name
        path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
        f[name] = str(path)
        return str(path)

    # Text files.
    put("good.txt", "a dog on a beach\na cat on a sofa\na red bicycle\n")
    put("empty.txt", "")
    put("blank.txt", "\n   \n\t\n")
    put("latin1.txt", "caf\xe9 au lait\n".encode("latin-1"))
    put("binary.csv", bytes(range(256)) * 4)
    put("badquote.csv", 'text,labels\n"a dog, unclosed quote\nb,c,d,e,f\n')
    put("nocolumn.csv", "caption,labels\na dog,dog\n")
    put("badline.jsonl", '{"text": "a dog"}\n{not json}\n')
    put("emoji.txt", "a dog on a beach\n🐶🏖️\na cat on a sofa\n")
    put("one.txt", "a single text\n")
    put("notes.md", "# not a corpus\n")
    put("formula.txt", '=HYPERLINK("http://evil.example","click")\n+1+1\n-2\n@SUM(A1)\n')
    put("eval_bad.csv", "x,y\n1,2\n")
    f["missing.txt"] = str(d / "no-such-file.txt")
    f["unreadable.txt"] = str(_unreadable(d / "unreadable.txt"))
    f["unreadable.csv"] = str(_unreadable(d / "unreadable.csv"))
    (d / "a-folder.txt").mkdir()
    f["folder.txt"] = str(d / "a-folder.txt")
    put("a-file", "not a folder\n")

    # Images.
    put("empty.png", b"")
    put("text.png", "this is not an image\n")
    with io.BytesIO() as buf:
        Image.open(f["chelsea"]).save(buf, format="PNG")
        put("truncated.png", buf.getvalue()[:2000])
    put("bomb.png", _png_header_only(30_000, 30_000))
    nan = np.full((32, 32), np.nan, dtype=np.float32)
    Image.fromarray(nan, mode="F").save(d / "nan.tiff")
    f["nan.tiff"] = str(d / "nan.tiff")

    # Model folders: corrupt configs and weights, copies of the packaged splade-tiny.
    base = splade_tiny_dir()
    f["arch_null"] = str(_model_copy(base, d / "arch_null", lambda c: c.update(architectures=None)))
    f["arch_ints"] = str(
        _model_copy(base, d / "arch_ints", lambda c: c.update(architectures=[1, 2]))
    )
    f["huge_hidden"] = str(
        _model_copy(base, d / "huge_hidden", lambda c: c.update(hidden_size=10**6))
    )
    f["huge_vocab"] = str(_model_copy(base, d / "huge_vocab", lambda c: c.update(vocab_size=10**9)))
    f["bad_json"] = str(_model_copy(base, d / "bad_json"))
    (d / "bad_json" / "config.json").unlink()
    (d / "bad_json" / "config.json").write_text("{ not json")
    f["list_json"] = str(_model_copy(base, d / "list_json"))
    (d / "list_json" / "config.json").unlink()
    (d / "list_json" / "config.json").write_text("[1, 2, 3]")
    f["no_weights"] = str(_model_copy(base, d / "no_weights"))
    (d / "no_weights" / "model.safetensors").unlink()
    f["cfg_unreadable"] = str(_model_copy(base, d / "cfg_unreadable"))
    (d / "cfg_unreadable" / "config.json").unlink()
    _unreadable(d / "cfg_unreadable" / "config.json")
    f["nan_weights"] = str(_model_copy(base, d / "nan_weights"))
    _poison(d / "nan_weights" / "model.safetensors", np.nan)
    f["inf_weights"] = str(_model_copy(base, d / "inf_weights"))
    _poison(d / "inf_weights" / "model.safetensors", np.inf)
    f["trunc_weights"] = str(_model_copy(base, d / "trunc_weights"))
    w = d / "trunc_weights" / "model.safetensors"
    data = w.read_bytes()[: 1 << 20]
    w.unlink()
    w.write_bytes(data)
    f["empty_dir"] = str(d / "empty_dir")
    (d / "empty_dir").mkdir()

    # A GloVe file with a NaN and a short row.
    put("glove.txt", "dog 0.1 0.2 0.3\ncat nan 0.1 0.2\nbeach 0.5 0.5\n")

    # A stored collection (with labels, for --eval).
    put(
        "labelled.csv",
        "text,labels\na dog on a beach,dog|beach\na dog in a park,dog\n"
        "a cat on a sofa,cat\na cat on a beach,cat|beach\n",
    )
    from lexlens.app.cli import main

    with redirect_stderr(io.StringIO()), redirect_stdout(io.StringIO()):
        code = main(["index", *SPLADE, "--source", f["labelled.csv"], "--out", str(d / "index")])
    assert code == 0
    f["index"] = str(d / "index")
    return f


def _poison(path: Path, value: float) -> None:
    """Put ``value`` into one weight of a safetensors file (same shapes, same keys)."""
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(path))
    key = sorted(k for k in tensors if k.endswith("word_embeddings.weight"))[0]
    tensors[key] = tensors[key].copy()
    tensors[key][1000, 0] = value
    path.unlink()  # a link to the packaged weights: write a file of our own
    save_file(tensors, str(path))


# ------------------------------------------------------------------------------ the table

T, I = "{tmp}", "{chelsea}"  # noqa: E741
SPLADE = ("--encoder", "splade-tiny")
MINILM = ("--encoder", "minilm-pq")

CASES = [
    # terms
    C("terms-ok", "terms", *SPLADE, "--text", "a cat on a book", "--json", expect=OK),
    C("terms-empty-text", "terms", *SPLADE, "--text", "  ", needle="empty"),
    C("terms-top-0", "terms", *SPLADE, "--text", "x", "--top", "0", needle="--top"),
    C("terms-top-neg", "terms", *SPLADE, "--text", "x", "--top", "-1", needle="--top"),
    C("terms-device-gpu", "terms", *SPLADE, "--text", "x", "--device", "gpu", needle="device"),
    C("terms-device-cuda", "terms", *SPLADE, "--text", "x", "--device", "cuda", needle="cuda"),
    C("terms-unknown-encoder", "terms", "--encoder", "nope", "--text", "x", needle="nope"),
    C(
        "terms-image-missing",
        "terms",
        "--encoder",
        "efficientnet-lite0-lexical",
        "--image",
        "{missing.txt}",
        needle="no-such-file",
    ),
    C(
        "terms-image-empty",
        "terms",
        "--encoder",
        "efficientnet-lite0-lexical",
        "--image",
        "{empty.png}",
        needle="empty.png",
    ),
    C(
        "terms-image-text",
        "terms",
        "--encoder",
        "efficientnet-lite0-lexical",
        "--image",
        "{text.png}",
        needle="text.png",
    ),
    C(
        "terms-image-truncated",
        "terms",
        "--encoder",
        "efficientnet-lite0-lexical",
        "--image",
        "{truncated.png}",
        needle="truncated.png",
    ),
    C(
        "terms-image-bomb",
        "terms",
        "--encoder",
        "efficientnet-lite0-lexical",
        "--image",
        "{bomb.png}",
        needle="bomb.png",
    ),
    C(
        "terms-image-nan-tiff",
        "terms",
        "--encoder",
        "efficientnet-lite0-lexical",
        "--image",
        "{nan.tiff}",
        needle="nan.tiff",
    ),
    C(
        "terms-image-unreadable",
        "terms",
        "--encoder",
        "efficientnet-lite0-lexical",
        "--image",
        "{unreadable.txt}",
        needle="unreadable.txt",
    ),
    C(
        "terms-box-inverted",
        "terms",
        "--encoder",
        "efficientnet-lite0-lexical",
        "--image",
        I,
        "--box",
        "0.9,0.9,0.1,0.1",
        needle="box",
    ),
    C(
        "terms-box-outside",
        "terms",
        "--encoder",
        "efficientnet-lite0-lexical",
        "--image",
        I,
        "--box",
        "0,0,2,2",
        needle="box",
    ),
    C(
        "terms-box-nan",
        "terms",
        "--encoder",
        "efficientnet-lite0-lexical",
        "--image",
        I,
        "--box",
        "nan,0,1,1",
        needle="box",
    ),
    C(
        "terms-box-words",
        "terms",
        "--encoder",
        "efficientnet-lite0-lexical",
        "--image",
        I,
        "--box",
        "a,b,c,d",
        needle="box",
    ),
    C(
        "terms-box-ok",
        "terms",
        "--encoder",
        "efficientnet-lite0-lexical",
        "--image",
        I,
        "--box",
        "0,0,0.5,0.5",
        "--json",
        expect=OK,
    ),
    # model folders
    C(
        "model-arch-null",
        "terms",
        "--encoder",
        "{arch_null}",
        "--text",
        "x",
        "--json",
        expect=ANY,
        needle="config.json",
    ),
    C(
        "model-arch-ints",
        "terms",
        "--encoder",
        "{arch_ints}",
        "--text",
        "x",
        "--json",
        expect=ANY,
        needle="config.json",
    ),
    C(
        "model-huge-hidden",
        "terms",
        "--encoder",
        "{huge_hidden}",
        "--text",
        "x",
        needle="hidden_size",
    ),
    C("model-huge-vocab", "terms", "--encoder", "{huge_vocab}", "--text", "x", needle="vocab"),
    C("model-bad-json", "terms", "--encoder", "{bad_json}", "--text", "x", needle="config.json"),
    C("model-list-json", "terms", "--encoder", "{list_json}", "--text", "x", needle="config.json"),
    C("model-no-weights", "terms", "--encoder", "{no_weights}", "--text", "x", needle="weights"),
    C(
        "model-config-unreadable",
        "terms",
        "--encoder",
        "{cfg_unreadable}",
        "--text",
        "x",
        needle="config.json",
    ),
    C(
        "model-nan-weights",
        "terms",
        "--encoder",
        "{nan_weights}",
        "--text",
        "x",
        needle="word_embeddings",
    ),
    C(
        "model-inf-weights",
        "terms",
        "--encoder",
        "{inf_weights}",
        "--text",
        "x",
        needle="word_embeddings",
    ),
    C(
        "model-truncated-weights",
        "terms",
        "--encoder",
        "{trunc_weights}",
        "--text",
        "x",
        needle="model.safetensors",
    ),
    C("model-empty-dir", "terms", "--encoder", "{empty_dir}", "--text", "x", needle="empty_dir"),
    C("model-a-file", "terms", "--encoder", "{a-file}", "--text", "x", needle="a-file"),
    # contrib
    C(
        "contrib-ok",
        "contrib",
        *SPLADE,
        "--query",
        "cat",
        "--doc",
        "a cat on a mat",
        "--json",
        expect=OK,
    ),
    C("contrib-empty-query", "contrib", *SPLADE, "--query", "", "--doc", "x", needle="query"),
    C("contrib-empty-doc", "contrib", *SPLADE, "--query", "x", "--doc", " ", needle="doc"),
    C(
        "contrib-topk-renamed",
        "contrib",
        *SPLADE,
        "--query",
        "x",
        "--doc",
        "y",
        "--topk",
        "-2",
        needle="--topk is now --gate-k",
    ),
    C(
        "contrib-show-0",
        "contrib",
        *SPLADE,
        "--query",
        "x",
        "--doc",
        "y",
        "--show",
        "0",
        expect=ANY,
        needle="show",
    ),
    C(
        "contrib-doc-image-bad",
        "contrib",
        *SPLADE,
        "--query",
        "cat",
        "--doc-image",
        "{text.png}",
        needle="text.png",
    ),
    # deviation
    C("deviation-ok", "deviation", *SPLADE, "--captions", "{good.txt}", "--json", expect=OK),
    C(
        "deviation-emoji-caption",
        "deviation",
        *SPLADE,
        "--captions",
        "{emoji.txt}",
        "--json",
        expect=OK,
    ),
    C(
        "deviation-missing",
        "deviation",
        *SPLADE,
        "--captions",
        "{missing.txt}",
        needle="no-such-file",
    ),
    C(
        "deviation-unreadable",
        "deviation",
        *SPLADE,
        "--captions",
        "{unreadable.txt}",
        needle="unreadable.txt",
    ),
    C(
        "deviation-folder",
        "deviation",
        *SPLADE,
        "--captions",
        "{folder.txt}",
        needle="a-folder.txt",
    ),
    C("deviation-empty", "deviation", *SPLADE, "--captions", "{empty.txt}", needle="empty.txt"),
    C("deviation-blank", "deviation", *SPLADE, "--captions", "{blank.txt}", needle="blank.txt"),
    C("deviation-latin1", "deviation", *SPLADE, "--captions", "{latin1.txt}", needle="latin1.txt"),
    C(
        "deviation-binary-csv",
        "deviation",
        *SPLADE,
        "--captions",
        "{binary.csv}",
        needle="binary.csv",
    ),
    C(
        "deviation-bad-quote",
        "deviation",
        *SPLADE,
        "--captions",
        "{badquote.csv}",
        expect=ANY,
        needle="badquote.csv",
    ),
    C(
        "deviation-no-column",
        "deviation",
        *SPLADE,
        "--captions",
        "{nocolumn.csv}",
        needle="nocolumn.csv",
    ),
    C(
        "deviation-bad-jsonl",
        "deviation",
        *SPLADE,
        "--captions",
        "{badline.jsonl}",
        needle="badline.jsonl",
    ),
    C(
        "deviation-wrong-suffix",
        "deviation",
        *SPLADE,
        "--captions",
        "{notes.md}",
        needle="notes.md",
    ),
    C("deviation-k-0", "deviation", *SPLADE, "--captions", "{good.txt}", "--k", "0", needle="k"),
    C(
        "deviation-gate-k-neg",
        "deviation",
        *SPLADE,
        "--captions",
        "{good.txt}",
        "--gate-k",
        "-5",
        needle="gate",
    ),
    C(
        "deviation-rows-neg",
        "deviation",
        *SPLADE,
        "--captions",
        "{good.txt}",
        "--max-rows",
        "-1",
        needle="--max-rows must be",
    ),
    C(
        "deviation-rows-renamed",
        "deviation",
        *SPLADE,
        "--captions",
        "{good.txt}",
        "--rows",
        "5",
        needle="--rows",
    ),
    C(
        "deviation-glove-bad",
        "deviation",
        *SPLADE,
        "--captions",
        "{good.txt}",
        "--glove",
        "{glove.txt}",
        needle="glove.txt",
    ),
    C(
        "deviation-out-unwritable",
        "deviation",
        *SPLADE,
        "--captions",
        "{good.txt}",
        "--out",
        UNWRITABLE_OUT,
        needle="lexlens-robustness-out",
    ),
    C(
        "deviation-out-is-file",
        "deviation",
        *SPLADE,
        "--captions",
        "{good.txt}",
        "--out",
        "{a-file}",
        needle="a-file",
    ),
    C(
        "deviation-formula-csv",
        "deviation",
        *SPLADE,
        "--captions",
        "{formula.txt}",
        "--out",
        T + "/formula-out",
        expect=OK,
    ),
    # search
    C(
        "search-ok",
        "search",
        "--collection",
        "{good.txt}",
        *SPLADE,
        "--query",
        "dog",
        "--json",
        expect=OK,
    ),
    C(
        "search-exclude-ok",
        "search",
        "--collection",
        "{good.txt}",
        *SPLADE,
        "--query",
        "dog",
        "--exclude",
        "beach",
        "--json",
        expect=OK,
    ),
    C(
        "search-same-a-b",
        "search",
        "--collection",
        "{good.txt}",
        *SPLADE,
        "--query",
        "dog",
        "--exclude",
        "dog",
        "--json",
        expect=ANY,
        needle="dog",
    ),
    C(
        "search-empty-query",
        "search",
        "--collection",
        "{good.txt}",
        *SPLADE,
        "--query",
        " ",
        needle="query",
    ),
    C(
        "search-k-items-0",
        "search",
        "--collection",
        "{good.txt}",
        *SPLADE,
        "--query",
        "dog",
        "--exclude",
        "beach",
        "--k-items",
        "0",
        needle="k-items",
    ),
    C(
        "search-k-items-neg",
        "search",
        "--collection",
        "{good.txt}",
        *SPLADE,
        "--query",
        "dog",
        "--exclude",
        "beach",
        "--k-items",
        "-1",
        needle="k-items",
    ),
    C(
        "search-coverage-0",
        "search",
        "--collection",
        "{good.txt}",
        *SPLADE,
        "--query",
        "dog",
        "--exclude",
        "beach",
        "--coverage",
        "0",
        needle="coverage",
    ),
    C(
        "search-coverage-nan",
        "search",
        "--collection",
        "{good.txt}",
        *SPLADE,
        "--query",
        "dog",
        "--exclude",
        "beach",
        "--coverage",
        "nan",
        needle="coverage",
    ),
    C(
        "search-top-0",
        "search",
        "--collection",
        "{good.txt}",
        *SPLADE,
        "--query",
        "dog",
        "--top",
        "0",
        needle="--top must be an integer from 1",
    ),
    C(
        "search-topk-renamed",
        "search",
        "--collection",
        "{good.txt}",
        *SPLADE,
        "--query",
        "dog",
        "--topk",
        "5",
        needle="--topk is now --gate-k",
    ),
    C(
        "search-gate-k-bad",
        "search",
        "--collection",
        "{good.txt}",
        *SPLADE,
        "--query",
        "dog",
        "--gate-k",
        "-2",
        needle="--gate-k must be",
    ),
    C(
        "search-coverage-above-1",
        "search",
        "--collection",
        "{good.txt}",
        *SPLADE,
        "--query",
        "dog",
        "--exclude",
        "beach",
        "--coverage",
        "1.5",
        needle="--coverage must be a share",
    ),
    C(
        "search-method-unknown",
        "search",
        "--collection",
        "{good.txt}",
        *SPLADE,
        "--query",
        "dog",
        "--exclude",
        "beach",
        "--method",
        "svm",
        needle="--method must be one of",
    ),
    C(
        "search-query-mode-unknown",
        "search",
        "--collection",
        "{good.txt}",
        *SPLADE,
        "--query",
        "dog",
        "--query-mode",
        "dense",
        needle="--query-mode must be one of",
    ),
    C(
        "search-coverage-without-sr",
        "search",
        "--collection",
        "{good.txt}",
        *SPLADE,
        "--query",
        "dog",
        "--coverage",
        "0.3",
        needle="--coverage applies to the sr exclusion method only",
    ),
    C(
        "search-collection-unreadable",
        "search",
        "--collection",
        "{unreadable.csv}",
        *SPLADE,
        "--query",
        "dog",
        needle="unreadable.csv",
    ),
    C(
        "search-collection-bad-quote",
        "search",
        "--collection",
        "{badquote.csv}",
        *SPLADE,
        "--query",
        "dog",
        expect=ANY,
        needle="badquote.csv",
    ),
    C(
        "search-collection-empty",
        "search",
        "--collection",
        "{empty.txt}",
        *SPLADE,
        "--query",
        "dog",
        needle="empty.txt",
    ),
    C(
        "search-index-ok",
        "search",
        "--index",
        "{index}",
        "--query",
        "dog",
        "--exclude",
        "beach",
        "--json",
        expect=OK,
    ),
    C(
        "search-eval-bad",
        "search",
        "--index",
        "{index}",
        "--eval",
        "{eval_bad.csv}",
        needle="eval_bad.csv",
    ),
    C(
        "search-eval-needs-index",
        "search",
        "--collection",
        "{good.txt}",
        *SPLADE,
        "--eval",
        "{eval_bad.csv}",
        needle="--index",
    ),
    C(
        "search-eval-min-relevant-0",
        "search",
        "--index",
        "{index}",
        "--eval",
        "{eval_bad.csv}",
        "--min-relevant",
        "0",
        needle="--min-relevant must be an integer from 1 to 10,000, not 0",
    ),
    # evaluate
    C(
        "evaluate-no-queries",
        "evaluate",
        "--index",
        "{index}",
        needle="keeps no queries and judgements",
    ),
    C(
        "evaluate-top-0",
        "evaluate",
        "--index",
        "{index}",
        "--top",
        "0",
        needle="--top must be an integer from 1 to 16,777,216, not 0",
    ),
    C(
        "evaluate-topk-renamed",
        "evaluate",
        "--index",
        "{index}",
        "--topk",
        "5",
        needle="--topk is now --gate-k",
    ),
    C(
        "evaluate-query-mode",
        "evaluate",
        "--index",
        "{index}",
        "--query-mode",
        "dense",
        needle="--query-mode must be one of parametric, bow, not 'dense'",
    ),
    C(
        "evaluate-queries-missing",
        "evaluate",
        "--index",
        "{index}",
        "--queries",
        "{missing.txt}",
        "--qrels",
        "{good.txt}",
        needle="no-such-file",
    ),
    # export
    C(
        "export-no-format",
        "export",
        "--index",
        "{index}",
        "--out",
        T + "/exp1",
        needle="--format must be given: one of trec-run, anserini, seismic",
    ),
    C(
        "export-scale-nan",
        "export",
        "--index",
        "{index}",
        "--out",
        T + "/exp2",
        "--format",
        "anserini",
        "--scale",
        "nan",
        needle="--scale must be a finite number from 1 to 1,000,000",
    ),
    C(
        "export-out-inside-index",
        "export",
        "--index",
        "{index}",
        "--out",
        "{index}/x",
        "--format",
        "seismic",
        needle="inside the index folder",
    ),
    C(
        "export-trec-run-without-queries",
        "export",
        "--index",
        "{index}",
        "--out",
        T + "/exp3",
        "--format",
        "trec-run",
        needle="a TREC run needs queries",
    ),
    C(
        "search-index-missing",
        "search",
        "--index",
        T + "/no-index",
        "--query",
        "dog",
        needle="no-index",
    ),
    # index
    C(
        "index-source-missing",
        "index",
        *SPLADE,
        "--source",
        "{missing.txt}",
        "--out",
        T + "/idx1",
        needle="no-such-file",
    ),
    C(
        "index-source-empty",
        "index",
        *SPLADE,
        "--source",
        "{empty.txt}",
        "--out",
        T + "/idx2",
        needle="empty.txt",
    ),
    C(
        "index-out-unwritable",
        "index",
        *SPLADE,
        "--source",
        "{good.txt}",
        "--out",
        UNWRITABLE_OUT,
        needle="lexlens-robustness-out",
    ),
    C(
        "index-batch-0",
        "index",
        *SPLADE,
        "--source",
        "{good.txt}",
        "--out",
        T + "/idx3",
        "--batch-size",
        "0",
        needle="batch",
    ),
    # attribute / report / mot-eval (validation happens before any gradient)
    C("attribute-empty-text", "attribute", *MINILM, "--text", " ", needle="empty"),
    C("attribute-steps-0", "attribute", *MINILM, "--text", "x", "--steps", "0", needle="steps"),
    C(
        "attribute-steps-words",
        "attribute",
        *MINILM,
        "--text",
        "x",
        "--steps",
        "many",
        needle="steps",
    ),
    C(
        "attribute-steps-huge",
        "attribute",
        *MINILM,
        "--text",
        "x",
        "--steps",
        "100000000",
        needle="steps",
    ),
    C(
        "attribute-tolerance-0",
        "attribute",
        *MINILM,
        "--text",
        "x",
        "--tolerance",
        "0",
        needle="tolerance",
    ),
    C("attribute-m-0", "attribute", *MINILM, "--text", "x", "--m", "0", needle="--m must be"),
    C("attribute-m-odd", "attribute", *MINILM, "--text", "x", "--m", "7", needle="does not divide"),
    C(
        "attribute-subvectors-old-spelling",
        "attribute",
        *MINILM,
        "--text",
        "x",
        "--subvectors",
        "12",
        needle="--subvectors",
    ),
    C(
        "attribute-corpus-missing",
        "attribute",
        *MINILM,
        "--corpus",
        "{missing.txt}",
        needle="no-such-file",
    ),
    C(
        "attribute-out-unwritable",
        "attribute",
        *MINILM,
        "--text",
        "a cat",
        "--out",
        UNWRITABLE_OUT,
        needle="lexlens-robustness-out",
    ),
    C("attribute-lexical-encoder", "attribute", *SPLADE, "--text", "a cat", needle="splade"),
    C(
        "report-out-is-file",
        "report",
        *MINILM,
        "--text",
        "a cat",
        "--out",
        "{a-file}",
        needle="a-file",
    ),
    C(
        "report-keep-0",
        "report",
        *MINILM,
        "--text",
        "a cat",
        "--out",
        T + "/rep",
        "--mot",
        "--keep",
        "0",
        needle="keep",
    ),
    C(
        "mot-eval-seed-neg",
        "mot-eval",
        *MINILM,
        "--corpus",
        "{good.txt}",
        "--seed",
        "-1",
        needle="seed",
    ),
    C(
        "mot-eval-keep-big",
        "mot-eval",
        *MINILM,
        "--corpus",
        "{good.txt}",
        "--keep",
        "1.5",
        needle="keep",
    ),
    C("mot-eval-one-text", "mot-eval", *MINILM, "--corpus", "{one.txt}", needle="two"),
    C(
        "mot-eval-k-0",
        "mot-eval",
        *MINILM,
        "--corpus",
        "{good.txt}",
        "--k",
        "0",
        needle="--k must be",
    ),
    C(
        "mot-eval-m-values-1",
        "mot-eval",
        *MINILM,
        "--corpus",
        "{good.txt}",
        "--m-values",
        "1",
        needle="--m-values must be",
    ),
    C(
        "mot-eval-limit-0",
        "mot-eval",
        *MINILM,
        "--corpus",
        "{good.txt}",
        "--limit",
        "0",
        needle="limit",
    ),
    C(
        "mot-eval-out-unwritable",
        "mot-eval",
        *MINILM,
        "--corpus",
        "{good.txt}",
        "--out",
        UNWRITABLE_OUT,
        needle="lexlens-robustness-out",
    ),
    # the environment
    C(
        "cache-is-a-file",
        "terms",
        *SPLADE,
        "--text",
        "a cat",
        "--json",
        expect=OK,
        LEXLENS_CACHE="{a-file}",
    ),
    C("usage-error", "terms", "--encoder", needle="--encoder"),
    C("unknown-command", "frobnicate", needle="frobnicate"),
]


# ------------------------------------------------------------------------------ checking


def _fill(template: str, files: dict[str, str]) -> str:
    """``{name}`` → the path of the hostile file ``name`` (names contain dots)."""
    return re.sub(r"\{([^{}]+)\}", lambda m: files[m.group(1)], template)


def _strict_json(text: str) -> object:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in the JSON output")

    return json.loads(text, parse_constant=refuse)


def _run(argv: list[str], env: dict[str, str], monkeypatch, capsys) -> tuple[int, str, str]:
    from lexlens.app.cli import main

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # a command that exits on its own must still be one line
        code = int(exc.code or 0)
    except BaseException as exc:  # a traceback is the one thing that must never happen
        raise AssertionError(f"lexlens {' '.join(argv)} raised {exc!r}") from exc
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("case", CASES, ids=[c.id if isinstance(c, Case) else None for c in CASES])
def test_cli_bad_input(case: Case, files, monkeypatch, capsys) -> None:
    argv = [_fill(a, files) for a in case.argv]
    env = {k: _fill(v, files) for k, v in case.env.items()}
    code, out, err = _run(argv, env, monkeypatch, capsys)
    assert "Traceback" not in err and "Traceback" not in out
    lines = err.strip().splitlines()
    if code == 2 and case.expect in (ERR, ANY):
        assert len(lines) == 1, err
        assert lines[0].startswith("lexlens") and ": error: " in lines[0], lines[0]
        assert case.needle.lower() in lines[0].lower(), lines[0]
        assert "/tmp/tmp" not in lines[0]  # never a temporary file's name
    elif code == 0 and case.expect in (OK, ANY):
        assert not [line for line in lines if "warning" in line.lower()], err
        if "--json" in argv:
            _strict_json(out)
    else:
        pytest.fail(f"exit {code}, expected {case.expect}: {err.strip() or out[-300:]}")


def test_formula_cells_are_neutralised_in_written_csvs(files, monkeypatch, capsys) -> None:
    """The deviation run on formula-like captions wrote CSVs: no cell starts a formula."""
    import csv

    out = Path(files["tmp"]) / "formula-out-2"
    code, _, err = _run(
        ["deviation", *SPLADE, "--captions", files["formula.txt"], "--out", str(out)],
        {},
        monkeypatch,
        capsys,
    )
    assert code == 0, err
    written = sorted(out.glob("*.csv"))
    assert written
    for path in written:
        for row in csv.reader(path.open(encoding="utf-8-sig", newline="")):
            assert not formula_cells(row), (path.name, row)


def test_stdout_on_a_full_device(files, monkeypatch) -> None:
    """Output to a full device: one line on stderr, exit 2, no traceback."""
    from lexlens.app.cli import main

    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    err = io.StringIO()
    with open("/dev/full", "w") as full, redirect_stderr(err):
        monkeypatch.setattr(sys, "stdout", full)
        code = main(["terms", *SPLADE, "--text", "a cat on a book " * 200, "--json"])
        monkeypatch.undo()
    lines = err.getvalue().strip().splitlines()
    assert code == 2 and len(lines) == 1, err.getvalue()
    assert "space" in lines[0]


def test_tests_never_write_to_the_users_cache() -> None:
    """conftest points every cache at the checkout: a test run leaves ~/.cache alone."""
    from lexlens.models.packaged import cache_dir

    assert Path(cache_dir()).resolve().is_relative_to(ROOT.resolve())
    home_cache = (Path.home() / ".cache" / "lexlens").resolve()
    assert not Path(cache_dir()).resolve().is_relative_to(home_cache)
    assert Path(os.environ["LEXLENS_HOME"]).resolve().is_relative_to(ROOT.resolve())


# ---------------------------------------------------------------------------------- pages

BAD_CSV = b'text,labels\n"a dog, unclosed quote\nb,c,d,e,f\n'


@dataclass(frozen=True)
class PageCase:
    id: str
    page: str
    steps: tuple[tuple, ...]
    needle: str  # must appear in an st.error (case-insensitive)
    keeps: str = ""  # element kind that a first good run drew and must still be there


PAGE_CASES = [
    PageCase(
        "text-empty",
        "app_pages/text.py",
        (("text", "text_input", "   "), ("click", "Encode")),
        "empty",
        keeps="image",
    ),
    PageCase(
        "images-not-an-image",
        "app_pages/images.py",
        (("upload", "image_uploads", "holiday.png", b"not an image at all"),),
        "holiday.png",
    ),
    PageCase(
        "images-empty-file",
        "app_pages/images.py",
        (("upload", "image_uploads", "blank.png", b""),),
        "blank.png",
    ),
    PageCase(
        "contrib-empty-query", "app_pages/contrib.py", (("text", "contrib_q_text", "  "),), "query"
    ),
    PageCase(
        "deviation-bad-csv",
        "app_pages/deviation.py",
        (("radio", "dev_source", "Upload"), ("upload", "dev_upload", "my captions.csv", BAD_CSV)),
        "my captions.csv",
    ),
    PageCase(
        "deviation-not-utf8",
        "app_pages/deviation.py",
        (
            ("radio", "dev_source", "Upload"),
            ("upload", "dev_upload", "légendes.txt", "café\n".encode("latin-1")),
        ),
        "légendes.txt",
    ),
    PageCase(
        "search-bad-csv",
        "app_pages/search.py",
        (("radio", "search_source", "Upload"), ("upload", "search_upload", "docs.csv", BAD_CSV)),
        "docs.csv",
    ),
    PageCase(
        "search-empty-query",
        "app_pages/search.py",
        (("radio", "search_source", "Sample"), ("text", "search_query", " ")),
        "empty",
    ),
    PageCase(
        "attribution-empty-text",
        "app_pages/attribution.py",
        (("text", "attr_text", " "), ("click", "Attribute")),
        "empty",
    ),
]


def _do(at, step: tuple) -> None:
    kind, *args = step
    if kind == "text":
        key, value = args
        widgets = [w for w in [*at.text_area, *at.text_input] if w.key == key]
        assert widgets, f"no text field {key!r} on the page"
        widgets[0].input(value)
        if widgets[0].form_id:  # a form field counts once its form is submitted
            return
    elif kind == "radio":
        key, prefix = args
        radio = at.radio(key=key)
        radio.set_value(next(o for o in radio.options if o.startswith(prefix)))
    elif kind == "upload":
        key, name, data = args
        at.file_uploader(key=key).set_value((name, data, "application/octet-stream"))
    elif kind == "click":
        (label,) = args
        next(b for b in at.button if b.label == label).click()
    at.run()


@pytest.mark.parametrize("case", PAGE_CASES, ids=[c.id for c in PAGE_CASES])
def test_page_bad_input(case: PageCase) -> None:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=180).run()
    if case.page != "app_pages/text.py":
        at.switch_page(case.page).run()
    assert not at.exception, [e.value for e in at.exception]
    before = len(at.get(case.keeps)) if case.keeps else 0
    if case.keeps:
        assert before > 0, f"the first run drew no {case.keeps}"
    for step in case.steps:
        _do(at, step)
        assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert any(case.needle.lower() in e.lower() for e in errors), errors
    assert not any("/tmp/" in e or "tmp" in Path(e.split(":")[0]).name for e in errors), errors
    if case.keeps:
        assert len(at.get(case.keeps)) >= 1, f"the earlier {case.keeps} are gone"
