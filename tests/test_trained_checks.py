"""The machinery every trained check shares (reports/checks/trained.py): the trained-run cache, the noise band
of a decided value, and the verdict of a rule on a run that may not have converged."""
from __future__ import annotations

import pytest
import torch

import bma_verify.reports.checks.trained as trained
from bma_verify.reports.core import CheckContext


def test_a_value_within_its_noise_band_is_not_decided():
    # reference: the band is symmetric around the threshold; NaN (nothing to measure) fails
    band = 0.075
    assert trained.threshold_side(0.25 - band / 2, 0.25, band) == "noise"
    assert trained.threshold_side(0.25 + band / 2, 0.25, band) == "noise"
    assert trained.threshold_side(0.25 - 2 * band, 0.25, band) == "pass"
    assert trained.threshold_side(0.25 + 2 * band, 0.25, band) == "fail"
    assert trained.threshold_side(float("nan"), 0.25, band) == "fail"
    assert trained.threshold_side(0.25 + 2 * band, 0.25, band, upper=False) == "pass"
    assert trained.combine_sides({"a": "pass", "b": "noise"}) == "noise"
    assert trained.combine_sides({"a": "fail", "b": "noise"}) == "fail"


def test_a_failing_rule_on_an_unconverged_run_is_inconclusive():
    # an optimisation shortfall of ours is not evidence against the paper; a converged run's fail stands
    ctx = CheckContext(tier="quick", seed=0)
    stalled = {"parent_loss_gap": 0.26}
    assert not trained.is_converged(ctx, stalled)
    assert trained.trained_verdict(ctx, "fail", True, stalled, {}) == ("fail", "")
    verdict, reason = trained.trained_verdict(ctx, "fail", False, stalled, {})
    assert verdict == "inconclusive" and reason.startswith("not converged: L_pa +0.260")
    verdict, reason = trained.trained_verdict(ctx, "noise", True, stalled, {"gap_to_bma": "noise", "x": "pass"})
    assert verdict == "inconclusive" and reason == "within run-to-run noise of the threshold: gap_to_bma"


def test_trained_runs_train_once_per_report_and_fig3_reads_fig2s_run(monkeypatch):
    # reference: the calls a stand-in trainer records
    asked = []

    def fake(name, *, tier, seed, device, quiet, output):
        asked.append((name, output))
        return {name: object()}

    monkeypatch.setattr(trained, "train_preset_runs", fake)
    ctx = CheckContext(tier="quick", seed=0)
    first = trained.trained_runs(ctx, "fig2")
    assert trained.trained_runs(ctx, "fig3") is first
    trained.trained_runs(ctx, "fig2", output="logit")
    assert asked == [("fig2", "mixture"), ("fig2", "logit")]


def test_presets_train_on_the_checks_device(monkeypatch):
    # reference: the device argument train_preset_runs receives, recorded by a stand-in (CUDA reported present so
    # that the context accepts "cuda" on a machine without one; nothing is trained)
    seen = []

    def fake(name, *, tier, seed, device, quiet, output):
        seen.append(device)
        return {}

    monkeypatch.setattr(trained, "train_preset_runs", fake)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    trained.trained_runs(CheckContext(tier="quick", seed=0), "robustness")
    trained.trained_runs(CheckContext(tier="quick", seed=0, device="cuda"), "robustness")
    assert seen == ["cpu", "cuda"]
    with pytest.raises(ValueError, match="device must be one of"):
        CheckContext(device="tpu")
