"""A flag that tunes --faithfulness or --counterfactuals, given without it, is refused before
any work instead of being ignored."""

from __future__ import annotations

import pytest

from tests.helpers import one_line_error


@pytest.mark.parametrize(
    ("flag", "value", "switch"),
    [
        ("--draws", "3", "--faithfulness"),
        ("--curve-k", "4", "--faithfulness"),
        ("--max-edits", "2", "--counterfactuals"),
        ("--max-calls", "50", "--counterfactuals"),
        ("--side", "query", "--counterfactuals"),
    ],
)
def test_silent_wrong_a_tuning_flag_without_its_switch_is_refused(
    cli, tmp_path, flag, value, switch
):
    run = cli("evaluate", "--index", str(tmp_path / "none"), flag, value)
    one_line_error(run, flag, switch)
