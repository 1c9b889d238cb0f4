"""Report seeds and development seeds never meet: a report trains on seeds below ``DEV_SEED_MIN``, presets are
tuned on seeds at or above it, and every tuning or probe script refuses a report seed."""
from __future__ import annotations

import ast
import hashlib
from pathlib import Path

import pytest

import bma_verify.reports.checks.trained as trained
import bma_verify.reports.claims.exp_fig2_attention.claim as fig2
import bma_verify.reports.claims.exp_fig5_generalization.claim as fig5_claim
import bma_verify.reports.claims.footnote1_selective_induction.claim as footnote1
from bma_verify.model.seeds import DEV_SEED_MIN, report_training_seeds, require_dev_seeds
from bma_verify.reports.core import CheckContext
from bma_verify.reports.plans import PRESETS, TUNED_ON
from bma_verify.reports.protocol import RUN_SETS, SEEDS_PER_TIER
from tests.trained_stand_ins import stand_in_run

ROOT = Path(__file__).resolve().parents[1]
#: Functions that train a model: a script calling one of them is tuning or probing code.
TRAINING_CALLS = {"train", "train_preset", "train_preset_runs", "train_attention_only", "train_selective",
                  "train_gpt", "run_grid", "run_tier_grid", "tune"}


def test_require_dev_seeds_refuses_report_seeds():
    assert require_dev_seeds([1000, 2**40]) == [1000, 2**40]
    for bad in ([0], [999, 1000], [], [1000.0], ["1000"]):
        with pytest.raises(ValueError, match="seeds must be development seeds"):
            require_dev_seeds(bad)


def test_report_training_seeds_are_distinct_below_the_development_range_and_follow_the_protocol_hash():
    digests = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(3)]
    for report_seed in range(50):
        for digest in digests:
            full = report_training_seeds(report_seed, digest, SEEDS_PER_TIER["full"])
            assert len(set(full)) == len(full) and all(0 <= s < DEV_SEED_MIN for s in full)
    assert report_training_seeds(0, digests[0], 5) != report_training_seeds(0, digests[1], 5)
    assert report_training_seeds(0, digests[0], 5) != report_training_seeds(1, digests[0], 5)
    with pytest.raises(ValueError, match="n must be"):
        report_training_seeds(0, digests[0], 0)
    with pytest.raises(ValueError, match="protocol_sha256 must be 64"):
        report_training_seeds(0, "model:fig2", 3)


def test_changing_a_threshold_or_a_step_count_draws_new_report_seeds(monkeypatch):
    # pre-registration by construction: the seeds come from the protocol's hash, so a threshold cannot be fitted to
    # seeds already seen. Reference: the seeds before the change, computed the same way.
    ctx = CheckContext(tier="quick", seed=0)
    before = {name: trained.training_seeds(ctx, name) for name in RUN_SETS}
    monkeypatch.setitem(trained.THRESHOLDS["quick"], "parent_loss_gap", 0.029)
    after = {name: trained.training_seeds(ctx, name) for name in RUN_SETS}
    assert after["fig2"] != before["fig2"]  # fig2, fig3 and thm2 decide on it
    assert after["fig5"] == before["fig5"] and after["footnote1-selective-induction"] == before[
        "footnote1-selective-induction"]
    monkeypatch.setattr(fig5_claim, "NEAR_BMA", fig5_claim.NEAR_BMA + 0.01)
    assert trained.training_seeds(ctx, "fig5") != before["fig5"]
    monkeypatch.setitem(footnote1.TRAIN_SIZES, "quick", footnote1.TRAIN_SIZES["quick"] | {"steps": 3001})
    assert trained.training_seeds(ctx, "footnote1-selective-induction") != before["footnote1-selective-induction"]


def test_presets_are_tuned_on_development_seeds_only():
    assert set(TUNED_ON) <= set(PRESETS)
    for name, seeds in TUNED_ON.items():
        assert require_dev_seeds(seeds) == list(seeds), name


def _calls(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            names.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "")
    return names


def tuning_scripts() -> list[Path]:
    """The probe scripts, the tuning module and its command line: every file there that trains is tuning code."""
    return (sorted((ROOT / "docs" / "probes").glob("*.py")) + sorted((ROOT / "model").glob("tuning*.py"))
            + [ROOT / "reports" / "claims" / "exp_robustness" / "plan.py"])


@pytest.mark.parametrize("path", tuning_scripts(), ids=lambda p: p.name)
def test_every_tuning_script_that_trains_refuses_report_seeds(path):
    calls = _calls(ast.parse(path.read_text()))
    if calls & TRAINING_CALLS:
        assert "require_dev_seeds" in calls, f"{path.name} trains without require_dev_seeds"


def test_a_report_trains_only_on_its_report_seeds(monkeypatch):
    # reference: the seeds the preset trainer is called with, recorded by a stand-in
    seen = []
    run = {"fig2": stand_in_run(L=5, test_L=(1, 2, 5), construction=True)}

    def fake(name, *, tier, seed, device, quiet, output):
        seen.append(seed)
        return run

    monkeypatch.setattr(trained, "train_preset_runs", fake)
    outcome = fig2.exp_fig2_attention(CheckContext(tier="quick", seed=7))
    assert seen == trained.training_seeds(CheckContext(tier="quick", seed=7), "fig2")
    assert outcome.seeds["training_seeds"] == seen and all(s < DEV_SEED_MIN for s in seen)
