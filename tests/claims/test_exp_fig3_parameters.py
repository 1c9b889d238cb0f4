"""exp-fig3-parameters on stand-in runs: the Theorem 1 construction (block-diagonal W_KQ = log π, copying heads at
offset 0, a flat held-out curve) is a converged run, an untrained model one still improving, and the construction
with its selector frozen at another kernel a converged run that cannot represent BMA. The check must pass the
first, reject its near-miss control (σ(W_OV) moved a quarter of the way to another kernel), never pass the second,
fail the third, and leave a value in its noise band undecided.
"""
from __future__ import annotations

import pytest

import bma_verify.model.analysis as analysis_module
import bma_verify.reports.claims.exp_fig3_parameters.claim as fig3
from bma_verify.reports.core import NOT_DISCRIMINATING, CheckContext, settle
from tests.trained_stand_ins import patch_runs, stand_in_run, with_curve


@pytest.fixture(scope="module")
def converged_fig2():
    return {"fig2": stand_in_run(L=5, test_L=(1, 2, 5), construction=True)}


@pytest.fixture(scope="module")
def untrained_fig2():
    return {"fig2": stand_in_run(L=5, test_L=(1, 2, 5))}


def test_fig3_passes_a_converged_run_and_rejects_its_near_miss_control(converged_fig2, monkeypatch):
    patch_runs(monkeypatch, {"fig2": converged_fig2})
    outcome = fig3.exp_fig3_parameters(CheckContext(tier="quick", seed=0))
    assert outcome.converged["plateaued"] is True
    assert outcome.verdict == "pass", outcome.summary
    assert outcome.control.rejected, outcome.control
    assert settle(outcome) == ("pass", "")


def test_fig3_whose_control_is_accepted_is_not_discriminating(converged_fig2, monkeypatch):
    # a rule that accepts everything accepts the control too: the pass must be withheld
    patch_runs(monkeypatch, {"fig2": converged_fig2})
    monkeypatch.setattr(fig3, "combine_sides", lambda sides: "pass")
    outcome = fig3.exp_fig3_parameters(CheckContext(tier="quick", seed=0))
    assert outcome.verdict == "pass" and not outcome.control.rejected
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def test_fig3_never_passes_a_run_that_has_not_converged(untrained_fig2, converged_fig2, monkeypatch):
    patch_runs(monkeypatch, {"fig2": untrained_fig2})
    outcome = fig3.exp_fig3_parameters(CheckContext(tier="quick", seed=0))
    assert outcome.converged["plateaued"] is False and settle(outcome)[0] != "pass"
    assert outcome.verdict == "inconclusive" and "not converged" in outcome.reason
    # the construction's parameters on a curve still falling: even an accept-all rule cannot make it pass
    patch_runs(monkeypatch, {"fig2": {"fig2": with_curve(converged_fig2["fig2"], "falling")}})
    monkeypatch.setattr(fig3, "combine_sides", lambda sides: "pass")
    outcome = fig3.exp_fig3_parameters(CheckContext(tier="quick", seed=0))
    assert outcome.converged["plateaued"] is False and settle(outcome)[0] == "inconclusive"
    assert "3 not converged" in settle(outcome)[1]


def test_fig3_decides_on_its_own_sides_not_on_fig2s_parent_loss(monkeypatch):
    # reference: the construction's shape (block-diagonal W_KQ, copiers at offset 0, σ(W_OV) = π) with its selector
    # frozen at another kernel's log π, on a plateaued curve: L_pa is far above BMA's (fig2 fails it), but the
    # parameters have the shape fig3 states, so fig3 reads its own sides only and is reproduced
    run = stand_in_run(L=5, test_L=(1, 2, 5), construction=True, wrong_selector=True)
    assert run.metrics["parent_loss_gap"] > 0.1
    patch_runs(monkeypatch, {"fig2": {"fig2": run}})
    outcome = fig3.exp_fig3_parameters(CheckContext(tier="quick", seed=0))
    assert outcome.converged["plateaued"] is True and outcome.verdict == "pass", outcome.summary
    assert set(fig3.seed_outcome(CheckContext(tier="quick", seed=0), run)[1]) == {
        "w_H_peaks_at_0", "off_block_fraction", "softmax_W_OV_error"}


def test_fig3_reads_an_off_block_value_in_its_noise_band_as_inconclusive(converged_fig2, monkeypatch):
    # 0.20 against 0.15 ± 0.075: within the CPU-kernel range of one run, so neither pass nor fail on any seed
    patch_runs(monkeypatch, {"fig2": converged_fig2})
    real = analysis_module.parameter_summary
    monkeypatch.setattr(analysis_module, "parameter_summary",
                        lambda m, k, L, H: real(m, k, L, H) | {"off_block_fraction": 0.20})
    outcome = fig3.exp_fig3_parameters(CheckContext(tier="quick", seed=0))
    assert outcome.verdict == "inconclusive" and "noise" in outcome.reason


def test_fig3_power_curve_over_the_output_shift(converged_fig2, monkeypatch):
    # reference: the construction's σ(W_OV) is π exactly, so its error grows with the shift t towards π'
    # (error(t) = t · (1/d)‖π' − π‖₁ for a mixture of rows); t = 0 is the run itself (accepted), t = 1 rejected
    patch_runs(monkeypatch, {"fig2": converged_fig2})
    control = fig3.exp_fig3_parameters(CheckContext(tier="quick", seed=0)).control
    power = {p["x"]: p for p in control.power}
    assert power[0.0]["value"] == pytest.approx(0.0, abs=1e-9) and not power[0.0]["rejected"]
    assert power[1.0]["rejected"] and control.rejected
    for t in fig3.CONTROL_SHIFTS:
        assert power[t]["value"] == pytest.approx(t * power[1.0]["value"], rel=1e-6, abs=1e-9)


def test_fig3_positive_control_is_the_theorem1_construction_and_passes(converged_fig2, monkeypatch):
    patch_runs(monkeypatch, {"fig2": converged_fig2})
    positive = fig3.exp_fig3_parameters(CheckContext(tier="quick", seed=0)).positive_control
    assert positive.passed, positive
    assert positive.measured["off_block_fraction"] == 0.0 and positive.measured["softmax_W_OV_error"] < 1e-12
    assert positive.measured["w_H_peak_offsets"] and set(positive.measured["w_H_peak_offsets"]) == {0}


def test_fig3_with_a_construction_built_for_another_kernel_is_not_testable(converged_fig2, monkeypatch):
    # planted wrong ideal: the construction's σ(W_OV) for the transposed kernel, not the run's π
    patch_runs(monkeypatch, {"fig2": converged_fig2})
    right = fig3.bma_construction
    monkeypatch.setattr(fig3, "bma_construction", lambda kernel, *a, **k: right(
        kernel.T / kernel.T.sum(1, keepdims=True), *a, **k))
    outcome = fig3.exp_fig3_parameters(CheckContext(tier="quick", seed=0))
    assert not outcome.positive_control.passed
    assert outcome.positive_control.measured["rule"]["softmax_W_OV_error"] == "fail"
    verdict, reason = settle(outcome)
    assert verdict == "inconclusive" and "not testable" in reason
