"""exp-fig6-column-alignment on stand-in runs: the Theorem 1 construction with log π + 1aᵀ in W_KQ (Prop. 1: the
same A^(2), log π's column softmax, a row softmax that is not π), as training leaves it, on a flat held-out curve;
the construction with its selector frozen at another kernel is a converged run that cannot represent BMA. The full
tier decides on 5 training seeds by the count rule; the quick tier does not train. The control is the trained W_tf
plus a row shift, with the rule's power as the shift shrinks to 0."""
from __future__ import annotations

import numpy as np
import pytest

import bma_verify.reports.checks.trained as trained
import bma_verify.reports.claims.exp_fig6_column_alignment.claim as fig6
from bma_verify.model import analysis
from bma_verify.reports.core import NOT_DISCRIMINATING, CheckContext, settle
from tests.trained_stand_ins import patch_runs, stand_in_run

FULL = CheckContext(tier="full", seed=0)


@pytest.fixture(scope="module")
def column_shifted():
    return stand_in_run(L=3, H=6, construction=True, column_shift=True)


@pytest.fixture(scope="module")
def wrong_selector():
    return stand_in_run(L=3, H=6, construction=True, wrong_selector=True)


def _runs_by_seed(monkeypatch, runs: list) -> list[int]:
    """Train the i-th full-tier training seed to ``runs[i]``; returns the seeds asked for."""
    seeds, asked = trained.training_seeds(FULL, "fig6"), []

    def fake(name, *, tier, seed, device, quiet, output):
        asked.append(seed)
        return {"fig6": runs[seeds.index(seed)]}

    monkeypatch.setattr(trained, "train_preset_runs", fake)
    return asked


def test_fig6_passes_a_column_shifted_selector_on_five_seeds_and_rejects_the_row_shift(column_shifted, monkeypatch):
    # reference: Prop. 1: log π + 1aᵀ has log π's column softmax, a row softmax that is not π
    asked = _runs_by_seed(monkeypatch, [column_shifted] * 5)
    outcome = fig6.exp_fig6_column_alignment(CheckContext(tier="full", seed=0))
    assert asked == trained.training_seeds(FULL, "fig6") and outcome.seeds["n"] == 5
    assert outcome.measured["column_error"] < 1e-6 < outcome.measured["row_error"]
    assert outcome.seeds["counts"]["meet"] == 5 and outcome.converged["converged_seeds"] == 5
    assert outcome.verdict == "pass" and outcome.control.rejected and settle(outcome) == ("pass", "")
    # the near miss lies strictly on the false side: beyond the threshold by the stated margin, clear of the band
    assert outcome.control.measured["column_error"] >= (fig6.THRESHOLDS["full"]["column_error"] + fig6.CONTROL_MARGIN
                                                        - 1e-9)
    assert fig6.CONTROL_MARGIN > fig6.NOISE_BAND["column_error"]


def test_fig6_control_power_rejects_the_far_end_and_passes_the_trained_selector(column_shifted):
    # reference: the column error of W_tf + s·b̂1ᵀ computed here from analysis at each point's shift
    W_tf = analysis.effective_selector_matrices(column_shifted.model, 3, 6)["W_tf"]
    power, s_star = fig6.row_shift_power(FULL, W_tf, column_shifted.kernel)
    assert [p["x"] for p in power] == list(fig6.SHIFT_FACTORS)
    assert power[0]["rejected"] and fig6.combine_sides(power[0]["rule"]) == "fail"  # twice the control's shift
    assert not power[-1]["rejected"] and power[-1]["shift_rms"] == 0.0  # the trained W_tf itself
    assert power[-1]["value"] == pytest.approx(analysis.column_softmax_error(W_tf, column_shifted.kernel))
    z = FULL.rng("fig6:row-shift").normal(size=W_tf.shape[0])
    for p in power:
        shifted = analysis.row_shift(W_tf, p["shift_rms"] * z / np.sqrt(np.mean(z ** 2)))
        assert p["value"] == pytest.approx(analysis.column_softmax_error(shifted, column_shifted.kernel))
    # s* raises the column error by the threshold + margin (the construction's own error is ~0)
    assert power[1]["value"] - power[-1]["value"] == pytest.approx(
        fig6.THRESHOLDS["full"]["column_error"] + fig6.CONTROL_MARGIN, abs=1e-9)


def test_fig6_fails_a_converged_run_that_cannot_represent_bma(wrong_selector, monkeypatch):
    # reference: a selector frozen at another kernel's log π on a plateaued curve, every seed: its columns are not
    # π's, so the claim is NOT REPRODUCED (not inconclusive)
    _runs_by_seed(monkeypatch, [wrong_selector] * 5)
    outcome = fig6.exp_fig6_column_alignment(CheckContext(tier="full", seed=0))
    assert outcome.converged["plateaued"] and outcome.seeds["counts"]["miss"] == 5
    assert outcome.verdict == "fail" and settle(outcome) == ("fail", "")


def test_fig6_count_rule_needs_four_of_five_seeds(column_shifted, wrong_selector, monkeypatch):
    # reference: three seeds that meet the rule and two that miss it, counted by hand: 3 < 4 either way
    _runs_by_seed(monkeypatch, [column_shifted] * 3 + [wrong_selector] * 2)
    outcome = fig6.exp_fig6_column_alignment(CheckContext(tier="full", seed=0))
    assert outcome.seeds["statuses"] == ["pass"] * 3 + ["fail"] * 2
    assert outcome.verdict == "inconclusive" and outcome.reason.startswith(
        "count rule undecided: 3 of 5 seeds meet the rule, 2 miss it")
    col = outcome.seeds["metrics"]["column_error"]
    assert col["min"] < 1e-6 and col["max"] == pytest.approx(outcome.seeds["metrics"]["column_error"]["values"][-1])


def test_fig6_quick_tier_cannot_decide_and_does_not_train(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the quick tier must not train fig6")

    monkeypatch.setattr(trained, "train_preset_runs", refuse)
    outcome = fig6.exp_fig6_column_alignment(CheckContext(tier="quick", seed=0))
    assert outcome.verdict == "inconclusive" and outcome.reason.startswith("quick tier cannot decide:")
    assert settle(outcome) == ("inconclusive", fig6.QUICK_REASON)
    # its control is the row shift on the (column-shifted) construction: the rule passes the construction itself
    # (factor 0), rejects the control (factor 1) and twice it, and the shift's column error scales with the factor
    power = {p["x"]: p for p in outcome.control.power}
    assert outcome.control.rejected and power[1.0]["rejected"] and power[2.0]["rejected"]
    assert not power[0.0]["rejected"] and power[0.0]["value"] < 1e-12
    assert power[1.0]["value"] == pytest.approx(fig6.THRESHOLDS["quick"]["column_error"] + fig6.CONTROL_MARGIN,
                                                rel=1e-6)  # beyond the bar by the stated margin, not at it
    assert all(p["row_error"] == pytest.approx(fig6.PAPER["row_error"], rel=1e-6) for p in power.values())
    assert outcome.seeds["n"] == 0 and outcome.converged["plateaued"] is False


def test_the_column_shifted_construction_keeps_its_columns_and_moves_its_rows():
    # Reference: Prop. 1 (a column shift W + 1aᵀ leaves each column's softmax, and so A^(2), unchanged) checked on
    # the matrix itself: column error 0 against log π, row error the asked value, and it is not log π
    ctx = CheckContext(tier="quick", seed=0)
    kernel = np.random.default_rng(3).dirichlet(np.ones(6), size=6)
    W = fig6.column_shifted_construction(ctx, kernel, 0.2)
    assert analysis.column_softmax_error(W, kernel) < 1e-12
    assert analysis.row_softmax_error(W, kernel) == pytest.approx(0.2, rel=1e-9)
    spread = W - np.log(kernel)
    assert np.allclose(spread, spread[0][None, :]) and np.ptp(spread[0]) > 0.1
    with pytest.raises(ValueError, match="row_error"):
        fig6.column_shifted_construction(ctx, kernel, 5.0)


def test_fig6_with_a_rule_passing_every_matrix_is_not_discriminating(column_shifted, monkeypatch):
    patch_runs(monkeypatch, {"fig6": {"fig6": column_shifted}})
    passing = {"column_error": "pass", "column_below_row": "pass"}
    monkeypatch.setattr(fig6, "column_sides", lambda ctx, col, row: passing)
    verdict, reason = settle(fig6.exp_fig6_column_alignment(CheckContext(tier="full", seed=0)))
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def test_fig6_rule_needs_the_column_error_below_the_row_error_by_more_than_the_band():
    # hand-made errors around the band (0.007): below the threshold, but not below the row error, is undecided
    ctx = CheckContext(tier="quick", seed=0)
    band = fig6.NOISE_BAND["column_error"]
    assert fig6.column_sides(ctx, 0.01, 0.35) == {"column_error": "pass", "column_below_row": "pass"}
    assert fig6.column_sides(ctx, 0.01, 0.01 + band / 2)["column_below_row"] == "noise"
    assert fig6.column_sides(ctx, 0.30, 0.20) == {"column_error": "fail", "column_below_row": "fail"}


def test_shift_for_column_error_raises_it_by_the_asked_amount(column_shifted):
    # reference: the column error recomputed at the shift found; a raise beyond what any shift reaches is refused
    kernel = column_shifted.kernel
    W = np.log(kernel) + 0.3
    direction = np.array([1.0, -1.0, 0.5, -0.5])
    s = fig6.shift_for_column_error(W, kernel, direction, 0.08)
    raised = analysis.column_softmax_error(analysis.row_shift(W, s * direction), kernel)
    assert raised - analysis.column_softmax_error(W, kernel) == pytest.approx(0.08, abs=1e-9)
    assert fig6.shift_for_column_error(W, kernel, direction, 0.0) == 0.0
    with pytest.raises(ValueError, match="raise_by"):
        fig6.shift_for_column_error(W, kernel, direction, 2.5)


def test_fig6_positive_control_is_the_column_shifted_construction_and_passes(column_shifted, monkeypatch):
    # full tier: log π + 1aᵀ for the run's kernel through the whole rule; quick tier: the power curve's end
    _runs_by_seed(monkeypatch, [column_shifted] * 5)
    positive = fig6.exp_fig6_column_alignment(CheckContext(tier="full", seed=0)).positive_control
    assert positive.passed and positive.measured["column_error"] < 1e-9, positive
    assert abs(positive.measured["row_error"] - fig6.PAPER["row_error"]) < 1e-9
    quick = fig6.exp_fig6_column_alignment(CheckContext(tier="quick", seed=0)).positive_control
    assert quick.passed and quick.measured["x"] == 0.0


def test_fig6_with_an_ideal_whose_rows_match_too_is_not_testable(column_shifted, monkeypatch):
    # planted wrong ideal: log π with no column shift (row error 0), whose column error cannot sit below its row error
    _runs_by_seed(monkeypatch, [column_shifted] * 5)
    monkeypatch.setitem(fig6.PAPER, "row_error", 0.0)
    outcome = fig6.exp_fig6_column_alignment(CheckContext(tier="full", seed=0))
    assert not outcome.positive_control.passed
    assert outcome.positive_control.measured["rule"]["column_below_row"] != "pass"
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and "not testable" in reason
