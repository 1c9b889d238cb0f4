"""ext-dag-thm3-sets at the quick tier, seed 0. Compared against: the stored H = 4, d = 2, k = 2 counterexamples
(recomputed; margins < 0), as in tests/test_dag_theory.py; for the control, that the shuffled label is flagged."""
import pytest

import bma_verify.reports.claims.ext_dag_thm3_sets.claim as T3
from bma_verify.reports.core import settle
from tests.claims.ext_dag_support import assert_json_ready, quick_context


@pytest.fixture()
def ctx(tmp_path):
    return quick_context(tmp_path)


@pytest.mark.parametrize("check", [T3.ext_dag_thm3_sets_j, T3.ext_dag_thm3_sets_pibar])
def test_thm3_sets_is_refuted_in_both_forms_with_the_smallest_instance(ctx, check):
    # Reference: the stored counterexamples (recomputed; margins < 0); the shuffled label is flagged at almost
    # every position.
    outcome = check(ctx)
    assert_json_ready(outcome)
    assert settle(outcome)[0] == "fail"
    assert outcome.measured["stored_violations"] == 2
    assert all(v < -5e-4 for v in outcome.measured["stored_margins"].values())
    refuted = [f for f in outcome.findings if f.status == "refuted"]
    assert len(refuted) >= 2 and all(f.instance["H"] == 4 for f in refuted)
    assert outcome.instance is not None
    assert outcome.control.rejected
    assert outcome.control.measured["violations"] > 0.9 * outcome.control.measured["positions"]


def test_thm3_argmax_rule():
    assert T3.decide_argmax(0, 1e-15) == "pass"
    assert T3.decide_argmax(1, 1e-15) == "fail"
    assert T3.decide_argmax(0, 1e-6) == "fail"
