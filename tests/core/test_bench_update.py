"""``python -m bench.run --only M --update``: the modules run replace their figures in the
file, every other module's figures are kept as they were, and ``runs`` says which run each
module's figures came from."""

from __future__ import annotations

import json

from bench import run as bench_run


def _figure(name: str, module: str, value: float) -> dict:
    return bench_run.normalise(
        bench_run.figure(name, value, "s", goal=("<=", 1.0), measured_with="test"), module
    )


def test_silent_wrong_an_update_keeps_the_other_modules_figures(tmp_path, monkeypatch):
    out = tmp_path / "results.json"
    before = {  # a file written before runs were listed
        "machine": {"python": "3.11", "load_average": [9.0, 9.0, 9.0]},
        "results": [_figure("a_fig", "bench.text", 2.0), _figure("b_fig", "bench.images", 0.5)],
    }
    out.write_text(json.dumps(before))
    monkeypatch.setattr(bench_run, "BENCHES", ["bench.text", "bench.images"])
    module = type(
        "M",
        (),
        {
            "run": staticmethod(
                lambda: [
                    bench_run.figure("a_fig", 0.25, "s", goal=("<=", 1.0), measured_with="test")
                ]
            )
        },
    )
    monkeypatch.setattr(bench_run.importlib, "import_module", lambda name: module)
    assert bench_run.main(["--out", str(out), "--only", "text", "--update"]) == 0
    doc = json.loads(out.read_text())
    assert [(r["name"], r["module"], r["value"]) for r in doc["results"]] == [
        ("a_fig", "bench.text", 0.25),
        ("b_fig", "bench.images", 0.5),
    ]
    assert [r["modules"] for r in doc["runs"]] == [["bench.images"], ["bench.text"]]
    assert doc["runs"][0]["load_average"] == [9.0, 9.0, 9.0]
    assert doc["summary"]["met"] == 2 and doc["summary"]["missed"] == []
    # without --update the file holds this run's figures only
    assert bench_run.main(["--out", str(out), "--only", "text"]) == 0
    assert [r["name"] for r in json.loads(out.read_text())["results"]] == ["a_fig"]
