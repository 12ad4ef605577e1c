"""``lexlens index --ray`` on a local 2-CPU Ray cluster writes the in-process build's index,
byte for byte: vectors, token ids, metadata, postings and vocabulary files, and the manifest
but for its dates.

The cluster is private to this module (bound to 127.0.0.1, no dashboard, usage statistics
off) and is shut down after it, its processes gone.
"""

from __future__ import annotations

import ipaddress
import json
import sys
import time
from pathlib import Path

import pytest

from lexlens.analysis.collections.indexing import build_index
from lexlens.analysis.collections.ray_encode import LOCAL_RAY_ENV, check_ray, start_local_ray
from lexlens.app.cli import main
from lexlens.models.base import InputError

try:  # without importing Ray: it reads part of its settings when first imported
    check_ray()
except InputError:
    pytest.skip('Ray is not installed (pip install "lexlens[dev]")', allow_module_level=True)

pytestmark = pytest.mark.slow  # starting Ray and its actors takes ~20 s on 2 cores

#: Texts of varied length (1 to ~60 words): padding differs from batch to batch.
TEXTS = [
    " ".join(
        [
            "retrieval",
            "sparse",
            "vocabulary",
            "dog",
            "beach",
            "encoder",
            "token",
            "river",
            "mountain",
            "the",
            "of",
            "a",
            "night",
            "market",
            "train",
        ][(i * 7 + j) % 15]
        for j in range(1 + (i * 13) % 60)
    )
    for i in range(70)
]


@pytest.fixture(scope="module")
def local_ray():
    """A private local Ray: 2 CPUs, 127.0.0.1 only, no dashboard, no usage statistics;
    shut down afterwards, and its processes waited for."""
    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        pytest.skip("a Ray is already running in this process")
    assert start_local_ray(num_cpus=2)
    import psutil  # Ray ships it (its thirdparty_files, on the path once ray is imported)
    import ray

    try:
        yield ray
    finally:
        children = psutil.Process().children(recursive=True)
        ray.shutdown()
        _, alive = psutil.wait_procs(children, timeout=30)
        for process in alive:  # never leave a cluster behind, whatever happened
            process.kill()
        assert not alive, f"Ray processes still running after shutdown: {alive}"


def _loopback(ip: str) -> bool:
    """Whether an address is this machine's loopback (127.0.0.0/8, ::1, ::ffff:127.x)."""
    address = ipaddress.ip_address(ip)
    return bool((getattr(address, "ipv4_mapped", None) or address).is_loopback)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def assert_same_index(here: Path, on_ray: Path) -> None:
    """Every file byte-identical; the manifests equal once their dates are left out."""
    a, b = _files(here), _files(on_ray)
    assert sorted(a) == sorted(b)
    for name in a:
        if name != "manifest.json":
            assert a[name] == b[name], f"{name} differs"
    dated = ("created", "updated")
    ma, mb = (json.loads(x["manifest.json"]) for x in (a, b))
    assert {k: v for k, v in ma.items() if k not in dated} == {
        k: v for k, v in mb.items() if k not in dated
    }


def test_silent_wrong_ray_text_build_is_byte_identical(local_ray, tmp_path, capsys):
    """`lexlens index --ray` (the CLI, splade-tiny, 70 texts in 9 batches over 2 actors)
    against the in-process build: the same bytes, token ids included."""
    source = tmp_path / "texts.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    common = ["index", "--encoder", "splade-tiny", "--source", str(source), "--batch-size", "8"]
    assert main([*common, "--out", str(tmp_path / "here")]) == 0
    started = time.perf_counter()
    assert main([*common, "--out", str(tmp_path / "ray"), "--ray"]) == 0
    capsys.readouterr()
    assert local_ray.is_initialized()  # --ray joined this module's Ray and left it running
    assert_same_index(tmp_path / "here", tmp_path / "ray")
    assert (tmp_path / "ray" / "token_ids.npy").stat().st_size > 0
    assert time.perf_counter() - started < 300


def test_security_local_ray_stays_on_this_machine(local_ray):
    """Every process of the local cluster listens and talks on the loopback only, runs
    without usage statistics, and sends any HTTP request (Ray's cloud-metadata probes) to
    a proxy on this machine that refuses it."""
    import psutil

    processes = psutil.Process().children(recursive=True)
    assert processes  # the cluster's own processes (GCS, raylet, workers…)
    checked = 0
    for process in processes:
        try:
            sockets = process.net_connections(kind="inet")
            environment = process.environ()
        except psutil.NoSuchProcess:
            continue
        for sock in sockets:
            for address in (sock.laddr, sock.raddr):
                if address:
                    assert _loopback(address.ip), (process, sock)
        if not environment:  # a process that retitled itself overwrote where it is read
            continue
        checked += 1
        for key in ("RAY_USAGE_STATS_ENABLED", "http_proxy", "no_proxy"):
            assert environment.get(key) == LOCAL_RAY_ENV[key], (process.name(), key)
    assert checked  # the GCS server and the raylet at least
    nodes = local_ray.nodes()
    assert [_loopback(n["NodeManagerAddress"]) for n in nodes] == [True]


def test_silent_wrong_ray_image_build_is_byte_identical(local_ray, tmp_path):
    """Images exercise the whole path: actors read the files, encode, gate, and report the
    undecodable one, which the driver lists as skipped, as the in-process build does."""
    from PIL import Image

    from lexlens.models import load_encoder

    skimage = pytest.importorskip("skimage")
    folder = tmp_path / "photos"
    folder.mkdir()
    for name in ("chelsea.png", "coffee.png", "rocket.jpg", "astronaut.png", "camera.png"):
        image = Image.open(Path(skimage.__file__).parent / "data" / name).convert("RGB")
        image.thumbnail((96, 96))
        image.save(folder / Path(name).with_suffix(".png").name)
    (folder / "broken.png").write_bytes(b"not an image")
    effnet = load_encoder("efficientnet-lite0-lexical", device="cpu")
    here = build_index(effnet, folder, tmp_path / "here", batch_size=2)
    on_ray = build_index(effnet, folder, tmp_path / "ray", ray="auto", batch_size=2)
    assert (on_ray.items, on_ray.encoded) == (here.items, here.encoded) == (5, 5)
    assert [Path(s.file).name for s in on_ray.skipped] == ["broken.png"]
    assert_same_index(tmp_path / "here", tmp_path / "ray")


def test_silent_wrong_collections_page_builds_on_ray(local_ray, tmp_path, monkeypatch):
    """The Collections page's build with a Ray address: the collection it stores equals
    `lexlens index` in this process, byte for byte."""
    from tests.helpers import app_page, click_and_wait

    home = tmp_path / "home"
    monkeypatch.setenv("LEXLENS_HOME", str(home))
    monkeypatch.setenv("LEXLENS_DATA_ROOTS", str(tmp_path))
    source = tmp_path / "notes.txt"
    source.write_text("\n".join(TEXTS[:20]) + "\n", encoding="utf-8")
    at = app_page("app_pages/collections.py")
    at.radio(key="collections_source").set_value("Path on this server").run()
    at.text_input(key="collections_path").set_value(str(source)).run()
    at.selectbox(key="collections_encoder").set_value("splade-tiny")
    at.text_input(key="collections_ray").set_value("local").run()
    click_and_wait(at, at.button[0].click)
    assert not at.exception and not at.error
    assert any("notes: 20 items" in s.value for s in at.success)
    assert (
        main(
            [
                "index",
                "--encoder",
                "splade-tiny",
                "--source",
                str(source),
                "--out",
                str(tmp_path / "here"),
            ]
        )
        == 0
    )
    assert_same_index(tmp_path / "here", home / "collections" / "notes")
    assert local_ray.is_initialized()  # the page's build joined the running Ray


#: Imports Ray before Lexlens starts its private Ray, then lists every address the
#: cluster's processes listen or talk on.
_RAY_IMPORTED_FIRST = """
import json
import ray
import psutil
from lexlens.analysis.collections.ray_encode import start_local_ray
assert start_local_ray(num_cpus=1)
ray.get(ray.remote(lambda: 1).remote())
children = psutil.Process().children(recursive=True)
seen = []
for process in children:
    try:
        seen += [a.ip for s in process.net_connections(kind="inet") for a in (s.laddr, s.raddr) if a]
    except psutil.NoSuchProcess:
        pass
node = [n["NodeManagerAddress"] for n in ray.nodes()]
ray.shutdown()
psutil.wait_procs(children, timeout=30)
print(json.dumps({"addresses": seen, "nodes": node}))
"""


def test_security_local_ray_on_loopback_when_ray_was_imported_first():
    """A process that imported Ray before asking for a private local Ray (a notebook that
    ran ``import ray``) still gets one on the loopback only: Ray chose its address at that
    first import, and the start overrides it."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", _RAY_IMPORTED_FIRST],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["addresses"] and seen["nodes"]
    assert all(_loopback(ip) for ip in seen["addresses"] + seen["nodes"]), seen
