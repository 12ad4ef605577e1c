"""History holds one run per input a quick page was given: a dozen slider drags on the
Images page update its run (the last value kept for a reload), a new image or text starts
a new one; a failed job can be dismissed."""

from __future__ import annotations

from tests.helpers import app_page


def _runs(page: str) -> list:
    from lexlens.app.runtime import runs

    return [r for r in runs.list_runs() if r.page == page]


def test_silent_wrong_a_dozen_slider_drags_on_images_make_one_run(monkeypatch, tmp_path):
    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    at = app_page("app_pages/images.py")
    assert not at.exception and not at.error
    assert len(_runs("images")) == 1
    for top in range(10, 34, 2):  # twelve drags of the top-terms slider
        at.slider(key="image_k").set_value(top).run()
    at.toggle(key="image_merge").set_value(False).run()
    assert not at.exception and not at.error
    (run,) = _runs("images")
    assert run.inputs["image_k"] == 32 and run.inputs["image_merge"] is False
    at.multiselect(key="image_samples").set_value(["coffee (scikit-image)"]).run()
    assert not at.exception and not at.error
    assert len(_runs("images")) == 2  # a new image: a new run


def test_silent_wrong_text_display_settings_update_the_run_a_new_text_starts_one(
    monkeypatch, tmp_path
):
    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    at = app_page("app_pages/text.py")
    for top in (12, 30, 45, 60):
        at.slider(key="text_k").set_value(top).run()
    assert len(_runs("text")) == 1 and _runs("text")[0].inputs["text_k"] == 60
    at.text_area(key="text_input").set_value("a giraffe eating leaves")
    next(b for b in at.button if b.label == "Encode").click().run()
    assert not at.exception and not at.error
    assert len(_runs("text")) == 2


def test_silent_wrong_search_and_contrib_settings_update_the_run_a_new_query_starts_one(
    monkeypatch, tmp_path
):
    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    at = app_page("app_pages/search.py")
    at.radio(key="search_source").set_value("Sample texts (data/collection.csv)").run()
    at.text_input(key="search_query").set_value("a cat").run()
    before = len(_runs("search"))
    for top in (5, 8, 12, 20):
        at.slider(key="search_top").set_value(top).run()
    assert not at.exception and not at.error
    assert len(_runs("search")) == before  # settings: the same run, updated
    assert max(_runs("search"), key=lambda r: r.created).inputs["search_top"] == 20
    at.text_input(key="search_query").set_value("a red train").run()
    assert len(_runs("search")) == before + 1  # a new query: a new run
    at = app_page("app_pages/contrib.py")
    before = len(_runs("contrib"))
    for k in (16, 32, 64):
        at.number_input(key="contrib_k").set_value(k).run()
    assert not at.exception and not at.error
    assert len(_runs("contrib")) == before
    at.text_input(key="contrib_q_text").set_value("a red train").run()
    assert len(_runs("contrib")) == before + 1


def test_silent_wrong_the_device_auto_chose_and_each_jobs_device_are_shown(monkeypatch, tmp_path):
    """The sidebar says where ``auto`` went ("auto → cpu", the device the page's encoder was
    loaded on); a job keeps the device its encoders ran on with its run, shown in its sidebar
    entry and in History (also once the server forgot the job)."""
    from lexlens.app.runtime import runs
    from lexlens.app.runtime.jobs import job_manager
    from tests.helpers import click_and_wait

    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LEXLENS_DATA_ROOTS", str(tmp_path))
    at = app_page("app_pages/text.py")
    assert not at.exception and not at.error
    assert at.selectbox(key="device").value == "auto"
    from lexlens.app.runtime.state import get_encoder

    loaded_on = get_encoder(at.selectbox(key="text_encoder").value, "auto").device
    assert f"auto → {loaded_on}" in [c.value for c in at.sidebar.caption]
    # A build as a job: its encoder's device is its run's, in the sidebar and in History.
    (tmp_path / "pets.csv").write_text("id,text\na,a dog on the beach\nb,a cat in the snow\n")
    at.switch_page("app_pages/collections.py").run()
    at.radio(key="collections_source").set_value("Path on this server").run()
    at.text_input(key="collections_path").set_value(str(tmp_path / "pets.csv")).run()
    at.selectbox(key="collections_encoder").set_value("splade-tiny").run()
    click_and_wait(at, next(b for b in at.button if b.label == "Build").click)
    assert not at.exception and not at.error
    (run,) = [r for r in runs.list_runs() if r.page == "collections"]
    job = job_manager().get(run.id)
    from lexlens.models import load_encoder

    built_on = load_encoder("splade-tiny", device=None).device  # what auto loads it on
    assert job.device == run.device == built_on
    assert any(c.value.endswith(f"· on {built_on}") for c in at.sidebar.caption)
    at.switch_page("app_pages/history.py").run()
    table = at.dataframe[0].value
    assert table.loc[table["run"] == run.id, "device"].item() == built_on
    job_manager().dismiss(run.id)
    at.run()
    table = at.dataframe[0].value
    assert table.loc[table["run"] == run.id, "device"].item() == built_on


def test_silent_wrong_history_shows_a_runs_inputs_as_the_page_had_them(monkeypatch, tmp_path):
    """A run's inputs are stored typed (a patch group's X range is a tuple): History shows
    ``xA=(0.5, 1.0)``, as the page had it, never the stored form ``{'__tuple__': …}``."""
    from lexlens.analysis.core.results import state_of
    from lexlens.app.runtime import runs

    monkeypatch.setenv("LEXLENS_HOME", str(tmp_path))
    given = {"image_xA": (0.5, 1.0), "image_samples": ["chelsea (scikit-image)"], "image_k": 20}
    run = runs.create("images", "a patch group", {k: state_of(v) for k, v in given.items()}, [], "")
    assert isinstance(runs.load(run.id).inputs["image_xA"], dict)  # stored typed
    at = app_page("app_pages/history.py")
    assert not at.exception and not at.error
    (line,) = [c.value for c in at.caption if c.value.startswith("Inputs: ")]
    assert line == "Inputs: xA=(0.5, 1.0), samples=['chelsea (scikit-image)'], k=20"
