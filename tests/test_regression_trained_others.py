"""Regression of trained values: the quick tier's model checks of the group "others" (tests/trained_regression.py),
rerun and compared with reports/reference (values within their stated tolerances, verdicts and reasons)."""
import pytest

from tests.trained_regression import rerun_and_compare


@pytest.mark.slow
def test_quick_tier_trained_results_match_the_reference(tmp_path):
    moved = rerun_and_compare("others", tmp_path)
    assert not moved, "\n".join(moved)
