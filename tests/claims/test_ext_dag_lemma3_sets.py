"""ext-dag-lemma3-sets at the quick tier, seed 0. Compared against: the DPI, the planted overlap ratio exactly 1
and the stored counterexamples (re-checked); for the control, that its rule flags the planted instance among the
disjoint ratios and that with the plant made harmless the pass is withheld."""
import pytest

import bma_verify.reports.claims.ext_dag_lemma3_sets.claim as L3
from bma_verify.reports.core import settle
from tests.claims.ext_dag_support import assert_json_ready, not_discriminating, quick_context


@pytest.fixture()
def ctx(tmp_path):
    return quick_context(tmp_path)


def test_lemma3_check_passes_with_findings_figure_and_the_planted_control(ctx, tmp_path):
    # Reference: the DPI (no ratio > 1), disjoint ratios < 1, the planted overlap ratio exactly 1 (to 1e-12); the
    # Dobrushin candidate refuted on disjoint sets (stored counterexample, re-checked: ratio 0.5771 > δ = 0.2462).
    outcome = L3.ext_dag_lemma3_sets(ctx)
    assert_json_ready(outcome)
    assert settle(outcome) == ("pass", "")
    m = outcome.measured
    assert m["dpi_violations"] == 0 and m["largest_ratio"]["disjoint"] < 1 - 1e-3
    assert abs(m["planted_overlap_ratio"] - 1) <= 1e-12
    assert (tmp_path / outcome.figures[0]).exists()
    by_statement = {f.statement: f for f in outcome.findings}
    assert outcome.findings[0].status == "refuted"  # no α < 1 for every S
    dobrushin = by_statement[f"{L3.CANDIDATE_TEXT['dobrushin']}, for disjoint S"]
    assert dobrushin.status == "refuted" and dobrushin.instance is not None
    assert all(s["violates"] for s in m["stored_rechecks"])
    stored = {s["candidate"]: s for s in m["stored_rechecks"]}
    assert stored["dobrushin"]["value"] == pytest.approx(0.5771083326728782, abs=1e-10)
    assert outcome.control.rejected and outcome.control.measured["flagged_against_alpha_1_minus_1e-6"]


def test_lemma3_check_is_not_discriminating_when_the_planted_ratio_is_below_one(ctx, monkeypatch):
    monkeypatch.setattr(L3, "lemma3_control_ratio", lambda: {"ratio": 0.5, "mi_true": 0.1})
    assert not_discriminating(L3.ext_dag_lemma3_sets(ctx))


def test_lemma3_rule_and_violation_rule():
    # The rule: DPI violation, a disjoint ratio of 1, or a planted ratio away from 1 each fail.
    assert L3.decide_lemma3(0, [0.3, 0.9], 1.0) == "pass"
    assert L3.decide_lemma3(1, [0.3], 1.0) == "fail"
    assert L3.decide_lemma3(0, [0.3, 1.0], 1.0) == "fail"
    assert L3.decide_lemma3(0, [0.3], 0.99) == "fail"
    assert L3.violates(0.5, 0.4, 0.1) and not L3.violates(0.4, 0.4, 0.1)


def test_lemma3_positive_control_is_enumerated_ratios_and_passes(ctx):
    positive = L3.ext_dag_lemma3_sets(ctx).positive_control
    assert positive.passed and positive.measured["disjoint_ratio"] < 1.0, positive
    assert positive.measured["overlap_ratio"] == pytest.approx(1.0, abs=1e-12)


def test_lemma3_positive_control_fails_when_its_overlap_instance_is_not_flat(ctx, monkeypatch):
    # Planted wrong ideal: the "overlapping" ratio computed for the disjoint complement instead (ratio < 1).
    right = L3.enumerated_ratio
    monkeypatch.setattr(L3, "enumerated_ratio", lambda kernels, parent_sets, h, S: right(
        kernels, parent_sets, h, [p for p in range(h) if p not in S][:len(S)]))
    outcome = L3.ext_dag_lemma3_sets(ctx)
    assert not outcome.positive_control.passed
    assert settle(outcome)[0] == "inconclusive" and "not testable" in settle(outcome)[1]
