"""The prop2-ds-quadratic report checks: verdicts on the real instance, and planted bugs they must catch."""
import json

import numpy as np
import pytest

import numerics.ds_fit
from model.ds import DSModel
from numerics.bma import causal_log_softmax
from numerics.ds import ds_score_terms
from reports.checks import ds
from reports.core import CheckContext, jsonable

SMALL = {"fit_L": (1, 3, 30), "key_norm_L": (1,), "n_fit": 500, "n_eval": 500, "steps": 200, "batch": 128,
         "copier": "exact", "model_eval": 500}


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    monkeypatch.setitem(ds.SIZES, "quick", SMALL)
    return CheckContext(tier="quick", seed=0, figures_dir=tmp_path)


def bilinear_only_posterior(A, rho, context):
    """A planted bug: the 'exact' posterior without the key-only quadratic term (Proposition 2 denied)."""
    bilinear, _ = ds_score_terms(A, rho, context)
    return causal_log_softmax(bilinear)


def test_bilinear_fit_check_passes_and_packages_its_results(ctx):
    out = ds.prop2_bilinear_fit(ctx)
    assert out.verdict == "pass", out.summary
    json.dumps(jsonable(out.measured))
    assert (ctx.figures_dir / out.figures[0]).stat().st_size < 300_000
    assert out.measured["bilinear_gap_fit"][0] > 0.02  # L' = 1: the small-L' gap
    assert out.measured["key_norm_gap_eval"][0] < 1e-6
    assert out.instance is None


def test_bilinear_fit_check_catches_a_posterior_without_the_quadratic_term(ctx, monkeypatch):
    # If the exact posterior were bilinear, the best bilinear W would reach zero gap: the check must fail.
    monkeypatch.setattr(numerics.ds_fit, "ds_log_parent_posterior", bilinear_only_posterior)
    out = ds.prop2_bilinear_fit(ctx)
    assert out.verdict == "fail", out.summary
    assert out.instance is not None and out.instance["positive_at_small_L"] == [False, False]


def test_checks_are_deterministic_for_a_seed(tmp_path, monkeypatch):
    monkeypatch.setitem(ds.SIZES, "quick", SMALL)
    a = ds.prop2_bilinear_fit(CheckContext(tier="quick", seed=4, figures_dir=tmp_path / "a"))
    b = ds.prop2_bilinear_fit(CheckContext(tier="quick", seed=4, figures_dir=tmp_path / "b"))
    assert jsonable(a.measured) == jsonable(b.measured)


@pytest.mark.slow
def test_trained_models_check_passes(ctx):
    out = ds.prop2_trained_models(ctx)
    assert out.verdict == "pass", out.summary
    json.dumps(jsonable(out.measured))
    assert len(out.figures) == 2 and all((ctx.figures_dir / f).exists() for f in out.figures)
    assert out.measured["key_norm_max_gap"] <= ds.GAP_TOL
    assert out.measured["training_converged"]


@pytest.mark.slow
def test_trained_models_check_catches_a_key_norm_model_without_its_feature(ctx, monkeypatch):
    # Planted bug: the key-norm selector silently loses c Σ‖v‖² (it becomes bilinear). Training still
    # converges (the bilinear control reaches its optimum), so the check must say fail, not inconclusive.
    original = DSModel.scores

    def scores_without_key_norm(self, v):
        if self.cfg.selector == "key-norm":
            return original(self, v) - self.c * (v * v).sum(dim=(2, 3))[:, None, :]
        return original(self, v)

    monkeypatch.setattr(DSModel, "scores", scores_without_key_norm)
    out = ds.prop2_trained_models(ctx)
    assert out.verdict == "fail", out.summary
    assert out.instance is not None and max(out.instance["key_norm_gap"]) > ds.GAP_TOL
    assert np.isfinite(out.measured["key_norm_max_gap"])
