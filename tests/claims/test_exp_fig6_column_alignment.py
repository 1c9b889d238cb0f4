"""exp-fig6-column-alignment on a stand-in run: the Theorem 1 construction with log π + 1aᵀ in W_KQ (Prop. 1: the
same A^(2), log π's column softmax, a row softmax that is not π), as training leaves it, on a flat held-out curve;
the construction with its selector frozen at another kernel is a converged run that cannot represent BMA."""
from __future__ import annotations

import numpy as np

import bma_verify.model.analysis as analysis_module
import bma_verify.reports.claims.exp_fig6_column_alignment as fig6
from bma_verify.reports.core import NOT_DISCRIMINATING, CheckContext, settle
from tests.trained_stand_ins import patch_runs, stand_in_run


def _identity_shift(W, b):
    return np.asarray(W, float)


def test_fig6_passes_a_column_shifted_selector_and_rejects_a_row_shifted_one(monkeypatch):
    # reference: Prop. 1: log π + 1aᵀ has log π's column softmax, a row softmax that is not π
    run = stand_in_run(L=3, H=6, construction=True, column_shift=True)
    patch_runs(monkeypatch, {"fig6": {"fig6": run}})
    outcome = fig6.exp_fig6_column_alignment(CheckContext(tier="quick", seed=0))
    assert outcome.measured["column_error"] < 1e-6 < outcome.measured["row_error"]
    assert outcome.verdict == "pass" and outcome.converged["plateaued"] and outcome.control.rejected
    assert outcome.control.measured["column_error"] > fig6.THRESHOLDS["quick"]["column_error"]
    monkeypatch.setattr(analysis_module, "row_shift", _identity_shift)  # the control is then the trained W_tf
    outcome = fig6.exp_fig6_column_alignment(CheckContext(tier="quick", seed=0))
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def test_fig6_rule_needs_the_column_error_below_the_row_error_by_more_than_the_band():
    # hand-made errors around the band (0.007): below the threshold, but not below the row error, is undecided
    ctx = CheckContext(tier="quick", seed=0)
    band = fig6.NOISE_BAND["column_error"]
    assert fig6.column_sides(ctx, 0.01, 0.35) == {"column_error": "pass", "column_below_row": "pass"}
    assert fig6.column_sides(ctx, 0.01, 0.01 + band / 2)["column_below_row"] == "noise"
    assert fig6.column_sides(ctx, 0.30, 0.20) == {"column_error": "fail", "column_below_row": "fail"}


def test_fig6_fails_a_converged_run_that_cannot_represent_bma(monkeypatch):
    # reference: a selector frozen at another kernel's log π on a plateaued curve: its columns are not π's, so the
    # claim is NOT REPRODUCED (not inconclusive)
    run = stand_in_run(L=3, H=6, construction=True, wrong_selector=True)
    patch_runs(monkeypatch, {"fig6": {"fig6": run}})
    outcome = fig6.exp_fig6_column_alignment(CheckContext(tier="quick", seed=0))
    assert outcome.converged["plateaued"] and outcome.verdict == "fail", outcome.summary
    assert settle(outcome) == ("fail", "")
