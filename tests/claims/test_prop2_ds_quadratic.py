"""The checks of claim prop2-ds-quadratic (reports/claims/prop2_ds_quadratic/claim.py): verdicts on the real instance,
their negative controls, and planted bugs they must catch. The symbolic check's shared control tests run in
tests/test_symbolic_checks.py."""
import json

import numpy as np
import pytest

import bma_verify.numerics.ds_fit as ds_fit_module
import bma_verify.reports.claims.prop2_ds_quadratic.claim as prop2
from bma_verify.model.ds import DSModel
from bma_verify.model.ds_runs import shrunk_key_norm_evaluations
from bma_verify.numerics.ds import ds_log_parent_posterior
from bma_verify.numerics.ds_fit import bilinear_only_log_posterior
from bma_verify.reports.checks.trained import training_seeds
from bma_verify.reports.checks import trained
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
    residual = prop2.decide_fit(_curve([1e-12, 2e-13, 6e-9], [2e-14, 5e-15, 2e-9], [1e-12, 3e-13, 3e-7],
                                     [2e-14, 5e-15, 2e-7]))
    assert not residual["gap_found"] and not residual["shrinks"] and residual["verdict"] == "fail"
    real = prop2.decide_fit(_curve([0.044, 0.072, 2e-7], [1e-3, 2e-3, 6e-8], [0.044, 0.075, 5e-4],
                                 [1e-3, 2e-3, 4e-4]))
    assert real["gap_found"] and real["shrinks"] and real["verdict"] == "pass"
    # A gap judged against its uncertainty: 0.004 ± 0.002 is not found.
    noisy = prop2.decide_fit(_curve([0.004, 0.072, 2e-7], [2e-3, 2e-3, 6e-8], [0.044, 0.075, 5e-4],
                                  [1e-3, 2e-3, 4e-4]))
    assert noisy["gap_at_small_L"] == [False, True] and noisy["verdict"] == "fail"
    # An unconverged fit at small L' gives no lower estimate: inconclusive.
    stuck = _curve([0.044, 0.072, 2e-7], [1e-3, 2e-3, 6e-8], [0.044, 0.075, 5e-4], [1e-3, 2e-3, 4e-4])
    stuck["converged"][0] = False
    assert prop2.decide_fit(stuck)["verdict"] == "inconclusive"


def test_checks_are_deterministic_for_a_seed(tmp_path, monkeypatch):
    monkeypatch.setitem(prop2.SIZES, "quick", {**SMALL, "fit_L": (1, 3), "n_fit": 200, "n_eval": 200})
    a = prop2.prop2_bilinear_fit(CheckContext(tier="quick", seed=4, figures_dir=tmp_path / "a"))
    b = prop2.prop2_bilinear_fit(CheckContext(tier="quick", seed=4, figures_dir=tmp_path / "b"))
    assert jsonable(a.measured) == jsonable(b.measured)
    assert a.control.as_dict() == b.control.as_dict()


# ------------------------------------------------------------------------------------------ model check

def test_model_checks_run_on_short_runs_with_their_controls_and_power(tmp_path, monkeypatch):
    # Real models, 20 steps. Compared against the exact posterior: the control's gap slot (key-norm selector at the
    # exact W*, c*) is BMA (gap at float32 rounding); the power curve's λ = 1 point is BMA (the FFN rule accepts it)
    # and its λ = 0 point (uniform attention) is far from it (rejected).
    monkeypatch.setitem(prop2.SIZES, "quick", TINY)
    monkeypatch.setitem(prop2.SIZES, "full", TINY)
    ctx = CheckContext(tier="quick", seed=0, figures_dir=tmp_path)
    out = prop2.prop2_trained_models(ctx)
    json.dumps(jsonable(out.measured))
    json.dumps(out.control.as_dict())
    assert out.control.rejected and out.seeds["n"] == 3 and all(s < 1000 for s in out.seeds["training_seeds"])
    assert out.control.measured["exact_key_norm_max_gap"] < 1e-6
    assert out.control.measured["bilinear_closing_gap_upper"] > prop2.CLOSES_TOL
    assert [p["x"] for p in out.control.power] == list(prop2.POWER_SCALES) and out.control.power[0]["rejected"]
    assert any("by construction" in a for a in out.assumptions)
    quick = prop2.prop2_ffn_closes_gap(ctx)  # the quick tier does not train the FFN
    assert quick.verdict == "inconclusive" and quick.reason.startswith("quick tier cannot decide")
    assert quick.control.rejected and quick.findings[0].status == "open"
    assert quick.control.power[0]["rejected"] and not quick.control.power[-1]["rejected"]
    assert quick.control.power[-1]["value"] < 1e-6
    full = prop2.prop2_ffn_closes_gap(CheckContext(tier="full", seed=0, figures_dir=tmp_path))
    json.dumps(jsonable(full.measured))
    assert full.seeds["n"] == 5 and full.control.rejected and full.verdict in ("pass", "fail", "inconclusive")


#: Planted per-step training losses (250 steps, the quick tier's): flat (a plateau), and still falling.
FLAT_LOSS = [1.0] * 250
FALLING_LOSS = [1.0 + 50.0 / (step + 1) for step in range(250)]
FIT = _curve([0.044, 0.074, 6e-4], [1e-3, 2e-3, 1e-4], [0.044, 0.075, 4.7e-3], [1e-3, 2e-3, 1.5e-3])


def _eval(gaps, se=1e-3):
    n = len(gaps)
    return {"L": list(SMALL["fit_L"]), "gap": list(gaps), "gap_se": [se] * n, "parent_loss": [0.5] * n,
            "mse": [4.0] * n, "mse_excess": [0.0] * n, "parent_accuracy": [0.8] * n,
            "bma_parent_loss": [0.4] * n, "bma_mse": [4.0] * n}


def _result(A, key_norm_gaps, loss=FLAT_LOSS):
    evals = {"bilinear": _eval(FIT["gap_eval"]), "key-norm": _eval(key_norm_gaps)}
    return {"A": A.tolist(), "models": {},
            "metrics": {name: {"history": {"loss": list(loss), "converged": True}, "eval": e}
                        for name, e in evals.items()}}


@pytest.fixture
def planted_models(ctx, monkeypatch):
    """The trained checks on planted evaluations (no training, no fit): the best bilinear W's gaps of the quick
    tier at L' = 1, 3, 20, per training seed a bilinear model at that optimum and a key-norm model within 0.002
    nats of BMA, an FFN that does not close the gap; the power curve from λ = 0 (far) to 1 (BMA)."""
    monkeypatch.setitem(prop2.SIZES, "full", SMALL)
    A = prop2.instance_A(ctx)
    monkeypatch.setattr(prop2, "_fit_curves", lambda c: {"A": A, "bilinear": FIT})
    results, ffns = {}, {}
    monkeypatch.setattr(prop2, "_trained", lambda c, seed: results.setdefault(seed, _result(A, [0.002] * 3)))
    monkeypatch.setattr(prop2, "_trained_ffn", lambda c, seed: ffns.setdefault(seed, {
        "model": None, "history": {"loss": list(FLAT_LOSS), "converged": True}, "eval": _eval([0.05, 0.09, 0.13])}))
    power = {0.0: _eval([0.3, 0.5, 0.1]), 0.5: _eval([0.05, 0.08, 0.02]), 0.9: _eval([0.002, 0.003, 0.001]),
             1.0: _eval([1e-12] * 3)}
    monkeypatch.setattr(prop2, "power_evaluations", lambda c: power)
    monkeypatch.setattr(prop2.render, "attention_figure", lambda *a, **k: "attention.png")
    # a planted run holds no model: its continuation (the miss rule) is itself, a run more training does not move
    monkeypatch.setattr(trained, "continue_run", lambda run, quiet=True: run)
    return results, ffns, power


def test_trained_models_rule_on_planted_evaluations(ctx, planted_models):
    # Compared against the stated rule: bilinear gap >= 0.075 - 3 SE > 0.02 at L' = 3, closed at L' = 20,
    # key-norm within the closing tolerance (0.002 + 3 SE < 0.007) everywhere, on every seed: pass, with the control (BMA, bilinear) rejected.
    out = prop2.prop2_trained_models(ctx)
    assert settle(out) == ("pass", ""), out.summary
    assert out.converged["plateaued"] and out.control.rejected and out.seeds["counts"]["meet"] == 3
    assert set(out.converged["seeds"][0]["runs"]) == {"bilinear", "key-norm"}
    assert [p["rejected"] for p in out.control.power] == [True, True, False, False]  # λ = 0, 0.5 | 0.9, 1


def test_trained_models_control_accepted_reads_not_discriminating(ctx, planted_models, monkeypatch):
    # Planted: the power curve's λ = 1 point (the control's gap slot) holds the bilinear gap instead of BMA, so the
    # rule accepts the control; compared against settle's 'not discriminating'.
    # The positive control (whose closing slot is the same λ = 1 point) keeps the true BMA, so that only the
    # control is planted.
    _, _, power = planted_models
    bma, ideal = power[1.0], prop2.models_ideal_control
    power[1.0] = _eval(FIT["gap_eval"])
    monkeypatch.setattr(prop2, "models_ideal_control", lambda fit, curve: ideal(fit, {**curve, 1.0: bma}))
    out = prop2.prop2_trained_models(ctx)
    assert out.verdict == "pass" and not out.control.rejected and out.positive_control.passed
    verdict, reason = settle(out)
    assert verdict == "inconclusive" and NOT_DISCRIMINATING in reason


def test_trained_models_count_rule_and_unconverged_seeds(ctx, planted_models):
    # Three seeds: one key-norm model misses (2 of 3 meet: undecided); all three still falling: none counts.
    results, _, _ = planted_models
    seeds = training_seeds(ctx, "prop2-ds")
    A = prop2.instance_A(ctx)
    results[seeds[2]] = _result(A, [0.05] * 3)
    out = prop2.prop2_trained_models(ctx)
    assert out.verdict == "inconclusive" and out.reason.startswith(
        "count rule undecided: 2 of 3 seeds meet the rule, 1 miss it (each confirmed by its continuation)")
    for seed in seeds:
        results[seed] = _result(A, [0.002] * 3, loss=FALLING_LOSS)
    out = prop2.prop2_trained_models(ctx)
    assert not out.converged["plateaued"] and settle(out)[0] == "inconclusive" and "3 not converged" in out.reason


def test_trained_models_miss_on_converged_key_norm_selectors_frozen_off_bma(ctx, planted_models):
    # Stand-in that cannot represent BMA: the key-norm selector frozen at 0.5 × its exact weights (a tempered
    # posterior, evaluated against the exact posterior), flat loss records on every seed, and a continuation that does
    # not move it: every seed's miss is confirmed, NOT REPRODUCED.
    results, _, _ = planted_models
    A = prop2.instance_A(ctx)
    cfg = prop2.DSModelConfig(selector="key-norm", d=prop2.D, H=prop2.H, L=prop2.TRAIN_L, copier="exact")
    frozen = shrunk_key_norm_evaluations(A, prop2.RHO, cfg, (0.5,), SMALL["fit_L"], n_eval=300, seed=1)[0.5]
    assert max(frozen["gap"]) > prop2.CLOSES_TOL
    for seed in training_seeds(ctx, "prop2-ds"):
        results[seed] = _result(A, frozen["gap"]) | {}
        results[seed]["metrics"]["key-norm"]["eval"] = frozen
    out = prop2.prop2_trained_models(ctx)
    assert out.converged["plateaued"] and out.seeds["statuses"] == ["fail"] * 3
    assert settle(out)[0] == "fail" and out.seeds["counts"]["miss"] == 3


def test_closing_tolerance_rejects_the_tempered_selector_that_gap_tol_accepted():
    # The key-norm selector at λ × its exact weights, at the quick tier's real sizes; compared against the exact DS
    # posterior (λ = 1 is BMA itself). λ = 0.8 sits about 0.0125 nats from BMA: GAP_TOL (0.02) accepted it as
    # "within training error", the closing tolerance set on development seeds must reject it.
    evaluations = prop2.power_evaluations(CheckContext(tier="quick", seed=0))
    closes_08, upper_08 = prop2.closes_gap(evaluations[0.8])
    assert not closes_08 and prop2.CLOSES_TOL < upper_08 <= prop2.GAP_TOL
    assert prop2.closes_gap(evaluations[0.95])[0] and prop2.closes_gap(evaluations[1.0])[1] < 1e-9
    assert prop2.CLOSES_TOL < prop2.GAP_TOL


@pytest.mark.slow
def test_trained_models_check_passes(ctx, monkeypatch):
    # SMALL trains fewer steps than the tiers: its key-norm models end within 0.0052-0.0072 of BMA, so this run is
    # judged at 0.01; CLOSES_TOL (0.007) was set on development runs at the tiers' sizes
    monkeypatch.setattr(prop2, "CLOSES_TOL", 0.01)
    out = prop2.prop2_trained_models(ctx)
    assert settle(out) == ("pass", ""), out.summary
    json.dumps(jsonable(out.measured))
    assert len(out.figures) == 2 and all((ctx.figures_dir / f).exists() for f in out.figures)
    assert out.measured["key_norm_gap_upper"] <= prop2.CLOSES_TOL
    assert out.measured["training_converged"] and out.control.rejected


@pytest.mark.slow
def test_trained_models_check_catches_a_key_norm_model_without_its_feature(ctx, monkeypatch):
    # Planted bug: the key-norm selector silently loses c Σ‖v‖² (it becomes bilinear). Training still
    # converges (the bilinear control reaches its optimum), so every seed must miss the rule and the check must not
    # pass; the continuation of each seed's runs (really trained: 2× the steps) cannot give the model the missing
    # term, so each miss is confirmed: NOT REPRODUCED.
    original = DSModel.scores

    def scores_without_key_norm(self, v):
        if self.cfg.selector == "key-norm":
            return original(self, v) - self.c * (v * v).sum(dim=(2, 3))[:, None, :]
        return original(self, v)

    monkeypatch.setattr(DSModel, "scores", scores_without_key_norm)
    out = prop2.prop2_trained_models(ctx)
    assert out.seeds["statuses"] == ["fail"] * 3, out.summary
    assert out.verdict == "fail" and out.seeds["counts"]["miss"] == 3, out.reason
    assert all(c["confirmed"] and c["steps"] > 0 for c in out.converged["continuations"])
    assert out.measured["key_norm_max_gap"] > prop2.CLOSES_TOL


# ------------------------------------------------------------------- the FFN check (open question 3)

def test_ffn_rule_on_planted_evaluations():
    # Compared against the stated rule: within 0.02 nats (+3 SE) at every L' and below the best bilinear W's
    # in-sample gap (− 3 SE) at every L' <= 10 tested (here L' = 1, 3).
    assert prop2.decide_ffn(_eval([0.003, 0.004, 1e-4]), FIT)["verdict"] == "pass"
    at_bilinear = prop2.decide_ffn(_eval([0.044, 0.074, 1e-4]), FIT)  # the bilinear optimum: neither
    assert not at_bilinear["closes"] and at_bilinear["not_below_at_L"] == [1, 3]
    late = prop2.decide_ffn(_eval([0.003, 0.004, 0.03]), FIT)  # below bilinear, but 0.03 at L' = 20
    assert not late["closes"] and late["below_best_bilinear"] and late["verdict"] == "fail"
    noisy = prop2.decide_ffn(_eval([0.003, 0.004, 1e-4], se=0.006), FIT)  # 0.004 + 3 x 0.006 > 0.02
    assert noisy["verdict"] == "fail"


def test_ffn_check_passes_and_rejects_the_best_bilinear_w(planted_models, tmp_path):
    # Planted: an FFN within 0.004 nats of BMA on every seed; the control is the best bilinear W (0.075 at L' = 3).
    _, ffns, _ = planted_models
    ctx = CheckContext(tier="full", seed=0, figures_dir=tmp_path)
    for seed in training_seeds(ctx, "prop2-ds"):
        ffns[seed] = {"model": None, "history": {"loss": list(FLAT_LOSS)}, "eval": _eval([0.003, 0.004, 1e-4])}
    out = prop2.prop2_ffn_closes_gap(ctx)
    assert settle(out) == ("pass", ""), out.summary
    assert out.control.rejected and out.findings[0].status == "holds" and out.seeds["counts"]["meet"] == 5
    assert [p["rejected"] for p in out.control.power] == [True, True, False, False]
    json.dumps(jsonable(out.measured))
    json.dumps(out.findings[0].as_dict())


def test_ffn_check_on_the_best_bilinear_w_stays_open_while_its_misses_are_unconfirmed(planted_models, tmp_path):
    # Stand-in that cannot represent BMA (Proposition 2): the best bilinear W's held-out gaps as the FFN's, on every
    # seed, flat loss records: every seed misses, but the FFN runs have no continuation built
    # (reports.protocol.CONTINUED), so the misses stay unconfirmed and the finding open, never holds; the same with
    # falling records: open (not converged).
    _, ffns, _ = planted_models
    ctx = CheckContext(tier="full", seed=0, figures_dir=tmp_path)
    best = {"L": FIT["L"], "gap": FIT["gap_eval"], "gap_se": FIT["gap_eval_se"]}
    for seed in training_seeds(ctx, "prop2-ds"):
        ffns[seed] = {"model": None, "history": {"loss": list(FLAT_LOSS)}, "eval": _eval(best["gap"])}
    out = prop2.prop2_ffn_closes_gap(ctx)
    assert out.verdict == "inconclusive" and out.findings[0].status == "open"
    assert out.seeds["counts"]["unconfirmed_miss"] == 5 and "misses unconfirmed" in out.reason
    for seed in training_seeds(ctx, "prop2-ds"):
        ffns[seed]["history"]["loss"] = FALLING_LOSS
    out = prop2.prop2_ffn_closes_gap(ctx)
    assert out.verdict == "inconclusive" and "not converged" in out.reason and out.findings[0].status == "open"



def test_trained_models_positive_control_is_the_best_bilinear_w_and_bma(ctx, planted_models):
    # The ideal pair: the best bilinear W (the fit's held-out gaps: 0.075 at L' = 3, closed at 20) and BMA (λ = 1).
    positive = prop2.prop2_trained_models(ctx).positive_control
    assert positive.passed and positive.measured["shows_gap"] and positive.measured["closes"], positive


def test_trained_models_positive_control_fails_when_bma_is_planted_off(ctx, planted_models):
    # Planted wrong ideal: the "BMA" slot (λ = 1) holds the bilinear gaps; the check is then not testable.
    _, _, power = planted_models
    power[1.0] = _eval(FIT["gap_eval"])
    out = prop2.prop2_trained_models(ctx)
    assert not out.positive_control.passed and not out.positive_control.measured["closes"]
    verdict, reason = settle(out)
    assert verdict == "inconclusive" and "not testable" in reason


def test_ffn_positive_control_is_bma_and_passes_and_fails_when_planted_off(planted_models, tmp_path):
    _, _, power = planted_models
    ctx = CheckContext(tier="full", seed=0, figures_dir=tmp_path)
    assert prop2.prop2_ffn_closes_gap(ctx).positive_control.passed
    power[1.0] = _eval([0.05, 0.09, 0.13])  # planted: the curve's end is not BMA
    assert not prop2.prop2_ffn_closes_gap(ctx).positive_control.passed
