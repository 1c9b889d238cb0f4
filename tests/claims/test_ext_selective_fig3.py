"""The check of ``ext-selective-fig3``: our tree construction equals the BMA at every T, their construction's
predictor does not; the rules, the control and planted failures."""
import numpy as np

import bma_verify.reports.claims.ext_selective_fig3.claim as F3
from bma_verify.reports.core import CheckContext, settle


def _small(monkeypatch):
    monkeypatch.setitem(F3.SIZES, "quick", {"T": (8, 32), "kernels": 2, "per_kernel": 20})


def test_check_passes_with_its_figure_and_rejects_the_control(monkeypatch, tmp_path):
    _small(monkeypatch)
    out = F3.fig3_comparison(CheckContext(tier="quick", seed=0, figures_dir=tmp_path))
    assert settle(out) == ("pass", "")
    assert out.measured["ours_max_deviation"] < 1e-12 and out.control.rejected
    assert out.figures == ["ext_selective_fig3.png"] and (tmp_path / "ext_selective_fig3.png").exists()


def test_check_fails_when_the_tree_construction_reads_no_window(monkeypatch):
    # planted: uniform lag weights in place of the construction's (the windows not read at all)
    _small(monkeypatch)
    uniform = lambda k, lags, x, **kw: np.full((len(x), len(lags)), 1 / len(lags))  # noqa: E731
    monkeypatch.setattr(F3, "construction_at_last", uniform)
    assert settle(F3.fig3_comparison(CheckContext(tier="quick", seed=0)))[0] == "fail"


def test_rules_on_planted_curves():
    exact = {8: {"true": [0.1, 0.2], "bayes": [0.0, 0.0], "max_dev": 0.0}}
    off = {8: {"true": [0.3, 0.4], "bayes": [0.1, 0.12, 0.11], "max_dev": 0.2}}
    assert F3.equals_bayes(exact) and not F3.equals_bayes(off)
    curves = {"tree construction (ours)": exact, "theirs β = 1": off, "theirs β = 10": exact}
    assert F3.decide(curves)["verdict"] == "fail"  # β = 10 planted equal to the BMA
    curves["theirs β = 10"] = off
    assert F3.decide(curves)["verdict"] == "pass"


def test_positive_control_is_the_bma_in_our_place_and_passes(monkeypatch):
    _small(monkeypatch)
    positive = F3.fig3_comparison(CheckContext(tier="quick", seed=0)).positive_control
    assert positive.passed and positive.measured["ours_equals_bayes"], positive


def test_a_rule_that_nothing_meets_fails_the_positive_control(monkeypatch):
    # planted broken rule: a negative tolerance, which even the BMA compared with itself cannot meet
    _small(monkeypatch)
    monkeypatch.setattr(F3, "EXACT_ATOL", -1.0)
    outcome = F3.fig3_comparison(CheckContext(tier="quick", seed=0))
    assert not outcome.positive_control.passed
    assert settle(outcome)[0] == "inconclusive" and "not testable" in settle(outcome)[1]
