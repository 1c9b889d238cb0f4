"""The checks of claim prop2-ds-quadratic (reports/claims/prop2_ds_quadratic.py): verdicts on the real instance,
their negative controls, and planted bugs they must catch. The symbolic check's shared control tests run in
tests/test_symbolic_checks.py."""
import json

import numpy as np
import pytest

import bma_verify.numerics.ds_fit as ds_fit_module
import bma_verify.reports.claims.prop2_ds_quadratic as prop2
from bma_verify.model.ds import DSModel
from bma_verify.numerics.ds import ds_log_parent_posterior
from bma_verify.numerics.ds_fit import bilinear_only_log_posterior
from bma_verify.reports.core import NOT_CONVERGED, NOT_DISCRIMINATING, CheckContext, jsonable, settle

# L' = 20 closes the curve: the fit at L' = 30 takes 3x the iterations (the gap there is at 1e-7 nats).
SMALL = {"fit_L": (1, 3, 20), "key_norm_L": (1,), "n_fit": 400, "n_eval": 400, "steps": 200, "batch": 128,
         "copier": "exact", "model_eval": 500, "ffn": {"ffn_hidden": 8, "ffn_spare": 1}, "ffn_steps": 100,
         "ffn_batch": 32, "ffn_lr": 0.05}
# A few training steps: far from converged, enough to run every line of the trained check (a few seconds).
TINY = {**SMALL, "fit_L": (1, 3, 12), "n_fit": 200, "n_eval": 200, "steps": 20, "batch": 32, "model_eval": 200,
        "ffn_steps": 20, "ffn_batch": 16}


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    monkeypatch.setitem(prop2.SIZES, "quick", SMALL)
    return CheckContext(tier="quick", seed=0, figures_dir=tmp_path)


# ------------------------------------------------------------------------------------------ exact check

def test_bilinear_fit_check_passes_and_rejects_its_control(ctx):
    # Compared against: the claimed gap (> 0.02 nats at L' = 1) on the exact posterior, and no gap (below the
    # fit's resolution) on the bilinear-only posterior of the control.
    out = prop2.prop2_bilinear_fit(ctx)
    assert settle(out) == ("pass", ""), out.summary
    json.dumps(jsonable(out.measured))
    json.dumps(out.control.as_dict())
    assert (ctx.figures_dir / out.figures[0]).stat().st_size < 300_000
    assert out.measured["bilinear_gap_fit"][0] > 0.02  # L' = 1: the small-L' gap
    assert min(out.measured["bilinear_gap_fit_z_small_L"]) > 10
    assert out.measured["key_norm_gap_eval"][0] < 1e-6
    assert out.instance is None
    assert out.control.rejected
    assert out.control.measured["gap_at_small_L"] == [False, False]
    assert max(out.control.measured["gap_fit_small_L"]) < prop2.FIT_RESOLUTION


def test_bilinear_fit_control_accepted_reads_not_discriminating(ctx, monkeypatch):
    # Planted: the control's 'bilinear' posterior is the exact one, so the rule finds the gap there too. A pass
    # whose control is accepted must not stand (compared against settle's 'not discriminating').
    monkeypatch.setattr(prop2, "bilinear_only_log_posterior", ds_log_parent_posterior)
    out = prop2.prop2_bilinear_fit(ctx)
    assert out.verdict == "pass" and not out.control.rejected
    verdict, reason = settle(out)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def test_bilinear_fit_check_catches_a_posterior_without_the_quadratic_term(ctx, monkeypatch):
    # If the exact posterior were bilinear, the best bilinear W would reach zero gap: the check must fail.
    monkeypatch.setattr(ds_fit_module, "ds_log_parent_posterior", bilinear_only_log_posterior)
    out = prop2.prop2_bilinear_fit(ctx)
    assert out.verdict == "fail", out.summary
    assert out.instance is not None and out.instance["positive_at_small_L"] == [False, False]


def _curve(gap_fit, gap_fit_se, gap_eval, gap_eval_se, L=SMALL["fit_L"]):
    return {"L": list(L), "gap_fit": gap_fit, "gap_fit_se": gap_fit_se, "gap_eval": gap_eval,
            "gap_eval_se": gap_eval_se, "converged": [True] * len(L)}


def test_fit_rule_needs_a_gap_above_the_resolution_not_only_many_standard_errors():
    # Compared against: the residuals L-BFGS leaves on a target inside the family (~1e-12 nats with z ~ 40):
    # many SE but no gap. The same z on a 0.04-nat gap is one.
    residual = prop2._decide_fit(_curve([1e-12, 2e-13, 6e-9], [2e-14, 5e-15, 2e-9], [1e-12, 3e-13, 3e-7],
                                     [2e-14, 5e-15, 2e-7]))
    assert not residual["gap_found"] and not residual["shrinks"] and residual["verdict"] == "fail"
    real = prop2._decide_fit(_curve([0.044, 0.072, 2e-7], [1e-3, 2e-3, 6e-8], [0.044, 0.075, 5e-4],
                                 [1e-3, 2e-3, 4e-4]))
    assert real["gap_found"] and real["shrinks"] and real["verdict"] == "pass"
    # A gap judged against its uncertainty: 0.004 ± 0.002 is not found.
    noisy = prop2._decide_fit(_curve([0.004, 0.072, 2e-7], [2e-3, 2e-3, 6e-8], [0.044, 0.075, 5e-4],
                                  [1e-3, 2e-3, 4e-4]))
    assert noisy["gap_at_small_L"] == [False, True] and noisy["verdict"] == "fail"
    # An unconverged fit at small L' gives no lower estimate: inconclusive.
    stuck = _curve([0.044, 0.072, 2e-7], [1e-3, 2e-3, 6e-8], [0.044, 0.075, 5e-4], [1e-3, 2e-3, 4e-4])
    stuck["converged"][0] = False
    assert prop2._decide_fit(stuck)["verdict"] == "inconclusive"


def test_checks_are_deterministic_for_a_seed(tmp_path, monkeypatch):
    monkeypatch.setitem(prop2.SIZES, "quick", {**SMALL, "fit_L": (1, 3), "n_fit": 200, "n_eval": 200})
    a = prop2.prop2_bilinear_fit(CheckContext(tier="quick", seed=4, figures_dir=tmp_path / "a"))
    b = prop2.prop2_bilinear_fit(CheckContext(tier="quick", seed=4, figures_dir=tmp_path / "b"))
    assert jsonable(a.measured) == jsonable(b.measured)
    assert a.control.as_dict() == b.control.as_dict()


# ------------------------------------------------------------------------------------------ model check

def test_trained_models_control_is_rejected_on_a_short_run(tmp_path, monkeypatch):
    # Real models, 20 steps: the control's gap slot (key-norm selector at the exact W*, c*) is BMA, compared
    # against the exact posterior (gap at float32 rounding); the FFN at its initial weights is far from BMA.
    monkeypatch.setitem(prop2.SIZES, "quick", TINY)
    ctx = CheckContext(tier="quick", seed=0, figures_dir=tmp_path)
    out = prop2.prop2_trained_models(ctx)
    json.dumps(jsonable(out.measured))
    json.dumps(out.control.as_dict())
    assert out.control.rejected
    assert out.control.measured["exact_key_norm_max_gap"] < 1e-6
    assert out.control.measured["bilinear_closing_gap_upper"] > prop2.GAP_TOL
    assert not out.measured["ffn_init_closes_gap"] and out.measured["ffn_init_gap_upper"] > 10 * prop2.GAP_TOL
    ffn = prop2.prop2_ffn_closes_gap(ctx)  # the same FFN run (ctx.cache): its control is the FFN at its init
    json.dumps(jsonable(ffn.measured))
    assert ffn.control.rejected and ffn.control.measured["max_gap"] > 10 * prop2.GAP_TOL
    assert ffn.measured["ffn_gap"] == out.measured["ffn_gap"]
    assert out.converged is not None and out.assumptions
    assert any("by construction" in a for a in out.assumptions) and "by construction" in out.summary


#: Planted per-step training losses (250 steps, the quick tier's): flat (a plateau), and still falling.
FLAT_LOSS = [1.0] * 250
FALLING_LOSS = [1.0 + 50.0 / (step + 1) for step in range(250)]


def _eval(gaps, se=1e-3):
    n = len(gaps)
    return {"L": list(SMALL["fit_L"]), "gap": list(gaps), "gap_se": [se] * n, "parent_loss": [0.5] * n,
            "mse": [4.0] * n, "mse_excess": [0.0] * n, "parent_accuracy": [0.8] * n,
            "bma_parent_loss": [0.4] * n, "bma_mse": [4.0] * n}


@pytest.fixture
def planted_models(ctx, monkeypatch):
    """The trained check on planted evaluations (no training, no fit): the best bilinear W's gaps of the
    quick tier at L' = 1, 3, 20, the bilinear model at that optimum, a key-norm model within 0.002 nats of
    BMA, an FFN that does not close the gap."""
    A = prop2._instance_A(ctx)
    fit = _curve([0.044, 0.074, 6e-4], [1e-3, 2e-3, 1e-4], [0.044, 0.075, 4.7e-3], [1e-3, 2e-3, 1.5e-3])
    monkeypatch.setattr(prop2, "_fit_curves", lambda c: {"A": A, "bilinear": fit})
    evals = {"bilinear": _eval(fit["gap_eval"]), "key-norm": _eval([0.002] * 3)}
    history = {"loss": FLAT_LOSS, "converged": True}
    result = {"A": A.tolist(), "models": {},
              "metrics": {name: {"history": dict(history), "eval": e} for name, e in evals.items()}}
    controls = {"exact-key-norm": _eval([1e-12] * 3)}
    ffn = {"model": None, "history": {"loss": list(FLAT_LOSS), "converged": True, "seconds": 1.0},
           "eval": _eval([0.05, 0.09, 0.13]), "init_eval": _eval([1.5, 2.0, 2.5])}
    monkeypatch.setattr(prop2, "_trained", lambda c: result)
    monkeypatch.setattr(prop2, "_control_models", lambda c: controls)
    monkeypatch.setattr(prop2, "_trained_ffn", lambda c: ffn)
    monkeypatch.setattr(prop2, "_attention_figure", lambda *a, **k: "attention.png")
    return result, controls, ffn


def test_trained_models_rule_on_planted_evaluations(ctx, planted_models):
    # Compared against the stated rule: bilinear gap >= 0.075 - 3 SE > 0.02 at L' = 3, closed at L' = 20,
    # key-norm within 0.02 everywhere: pass, with the control (BMA, bilinear) rejected.
    out = prop2.prop2_trained_models(ctx)
    assert settle(out) == ("pass", ""), out.summary
    assert out.converged["plateaued"] is True and out.control.rejected
    assert set(out.converged["runs"]) == {"bilinear", "key-norm"}
    assert not out.measured["ffn_closes_gap"]  # judged apart, not deciding


def test_trained_models_control_accepted_reads_not_discriminating(ctx, planted_models, monkeypatch):
    # Planted: the gap slot of the control holds a model with the bilinear gap instead of BMA, so the rule
    # accepts it; compared against settle's 'not discriminating'.
    result, controls, _ = planted_models
    controls["exact-key-norm"] = result["metrics"]["bilinear"]["eval"]
    out = prop2.prop2_trained_models(ctx)
    assert out.verdict == "pass" and not out.control.rejected
    verdict, reason = settle(out)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def test_trained_models_unconverged_run_is_not_a_pass_or_a_fail(ctx, planted_models):
    # The bilinear run's loss still falls over its last 20% of steps: not converged, so a pass reads 'not
    # converged' and a miss reads inconclusive instead of fail.
    result, _, _ = planted_models
    result["metrics"]["bilinear"]["history"]["loss"] = FALLING_LOSS
    out = prop2.prop2_trained_models(ctx)
    assert out.converged["plateaued"] is False and out.converged["not_plateaued"] == ["bilinear"]
    assert settle(out) == ("inconclusive", NOT_CONVERGED)
    result["metrics"]["key-norm"]["eval"]["gap"] = [0.05] * 3  # and the key-norm model misses
    out = prop2.prop2_trained_models(ctx)
    assert out.verdict == "inconclusive" and "not converged" in out.reason


def test_trained_models_fail_when_the_key_norm_model_does_not_close_on_a_converged_run(ctx, planted_models):
    result, _, _ = planted_models
    result["metrics"]["key-norm"]["eval"]["gap"] = [0.03, 0.05, 0.001]  # misses at L' = 1 and 3
    out = prop2.prop2_trained_models(ctx)
    assert out.converged["plateaued"] is True and out.verdict == "fail" and out.instance is not None
    assert settle(out) == ("fail", "")


@pytest.mark.slow
def test_trained_models_check_passes(ctx):
    out = prop2.prop2_trained_models(ctx)
    assert settle(out) == ("pass", ""), out.summary
    json.dumps(jsonable(out.measured))
    assert len(out.figures) == 2 and all((ctx.figures_dir / f).exists() for f in out.figures)
    assert out.measured["key_norm_gap_upper"] <= prop2.GAP_TOL
    assert out.measured["training_converged"] and out.control.rejected


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
    out = prop2.prop2_trained_models(ctx)
    assert out.verdict == "fail", out.summary
    assert out.instance is not None and max(out.instance["key_norm_gap"]) > prop2.GAP_TOL
    assert np.isfinite(out.measured["key_norm_max_gap"])


# ------------------------------------------------------------------- the FFN check (open question 3)

def test_ffn_rule_on_planted_evaluations():
    # Compared against the stated rule: within 0.02 nats (+3 SE) at every L' and below the best bilinear W's
    # in-sample gap (− 3 SE) at every L' <= 10 tested (here L' = 1, 3).
    fit = _curve([0.044, 0.074, 6e-4], [1e-3, 2e-3, 1e-4], [0.044, 0.075, 4.7e-3], [1e-3, 2e-3, 1.5e-3])
    assert prop2._decide_ffn(_eval([0.003, 0.004, 1e-4]), fit)["verdict"] == "pass"
    at_bilinear = prop2._decide_ffn(_eval([0.044, 0.074, 1e-4]), fit)  # the bilinear optimum: neither
    assert not at_bilinear["closes"] and at_bilinear["not_below_at_L"] == [1, 3]
    late = prop2._decide_ffn(_eval([0.003, 0.004, 0.03]), fit)  # below bilinear, but 0.03 at L' = 20
    assert not late["closes"] and late["below_best_bilinear"] and late["verdict"] == "fail"
    noisy = prop2._decide_ffn(_eval([0.003, 0.004, 1e-4], se=0.006), fit)  # 0.004 + 3 x 0.006 > 0.02
    assert noisy["verdict"] == "fail"


def test_ffn_check_passes_and_rejects_its_control(ctx, planted_models):
    # Planted: an FFN within 0.004 nats of BMA, the FFN at its init 1.5-2.5 nats away (compared against the rule).
    _, _, ffn = planted_models
    ffn["eval"] = _eval([0.003, 0.004, 1e-4])
    out = prop2.prop2_ffn_closes_gap(ctx)
    assert settle(out) == ("pass", ""), out.summary
    assert out.control.rejected and out.findings[0].status == "holds" and out.summary.startswith("reproduced")
    json.dumps(jsonable(out.measured))
    json.dumps(out.findings[0].as_dict())


def test_ffn_check_control_accepted_reads_not_discriminating(ctx, planted_models):
    # Planted: the 'initial weights' already close the gap, so the rule accepts the control: a pass must not
    # stand (compared against settle's 'not discriminating'); the finding is then open, not holds.
    _, _, ffn = planted_models
    ffn["eval"] = ffn["init_eval"] = _eval([0.003, 0.004, 1e-4])
    out = prop2.prop2_ffn_closes_gap(ctx)
    assert out.verdict == "pass" and not out.control.rejected
    verdict, reason = settle(out)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason
    assert out.findings[0].status == "open"


def test_ffn_check_miss_is_refuted_when_converged_and_open_when_not(ctx, planted_models):
    _, _, ffn = planted_models  # the planted FFN sits at 0.05-0.13 nats
    out = prop2.prop2_ffn_closes_gap(ctx)
    assert out.verdict == "fail" and out.findings[0].status == "refuted" and out.instance is not None
    assert out.summary.startswith("not reproduced")
    ffn["history"]["loss"] = FALLING_LOSS
    out = prop2.prop2_ffn_closes_gap(ctx)
    assert out.verdict == "inconclusive" and "not converged" in out.reason and out.findings[0].status == "open"
