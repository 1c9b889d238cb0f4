"""The check of claim ext-dag-training (reports/claims/ext_dag_training.py).

Compared against: its control (the pair model at initialisation) rejected by the rule, and, with the control made
to pass, ``settle`` withholding the pass ("not discriminating"); a plateaued run far from BMA fails, the same run
still improving reads inconclusive. Training itself is tested in
tests/test_dag_training.py.
"""
import numpy as np

import bma_verify.reports.claims.ext_dag_training as E
from bma_verify.model.dag_training import DagTrainConfig
from bma_verify.reports.core import CheckContext, settle


def _loss_record(shape: str) -> list:
    """[[step, loss]] every 50 steps for 3000 steps: "flat" (a plateau) or "falling" (still dropping)."""
    steps = np.arange(50, 3001, 50)
    noise = np.random.default_rng(0).normal(scale=0.002, size=len(steps))
    values = 1.0 + noise + (0.0 if shape == "flat" else 200.0 / steps)
    return [[int(s), float(v)] for s, v in zip(steps, values)]


def _fake_runs(final_pair, init_pair, shape="flat"):
    base = {"lpa_model": 1.0, "lpa_bma": 0.9, "loss_model": 1.0, "loss_bma": 0.95}
    config = DagTrainConfig(steps=10).__dict__
    run = lambda init, final: {"config": config, "init": {**base, **init}, "final": {**base, **final},  # noqa
                               "losses": _loss_record(shape), "converged": True, "seconds": 0.0}
    bad = {"lpa_gap": 0.4, "lpa_gap_se": 0.01, "query_gap": 0.14, "query_gap_se": 0.01}
    return {"pair": run(init_pair, final_pair), "heads": run(bad, bad)}


def test_training_check_rejects_the_initialised_model(monkeypatch):
    good = {"lpa_gap": 0.01, "lpa_gap_se": 0.001, "query_gap": 0.001, "query_gap_se": 0.001}
    bad = {"lpa_gap": 0.4, "lpa_gap_se": 0.01, "query_gap": 0.14, "query_gap_se": 0.01}
    monkeypatch.setattr(E, "training_runs", lambda ctx: _fake_runs(good, bad))
    out = E.ext_dag_training(CheckContext(tier="quick", seed=0))
    assert out.verdict == "pass" and out.control.rejected and settle(out) == ("pass", "")
    # the control made harmless (initialisation already at BMA): the pass is withheld
    monkeypatch.setattr(E, "training_runs", lambda ctx: _fake_runs(good, good))
    out = E.ext_dag_training(CheckContext(tier="quick", seed=0))
    verdict, reason = settle(out)
    assert not out.control.rejected and verdict == "inconclusive" and "not discriminating" in reason


def test_a_plateaued_run_far_from_bma_fails_and_one_still_improving_is_inconclusive(monkeypatch):
    # reference: the rule's own bounds on hand-set gaps (0.4 + 3 · 0.01 > LPA_TOL) and the loss records' shapes
    bad = {"lpa_gap": 0.4, "lpa_gap_se": 0.01, "query_gap": 0.14, "query_gap_se": 0.01}
    monkeypatch.setattr(E, "training_runs", lambda ctx: _fake_runs(bad, bad))
    out = E.ext_dag_training(CheckContext(tier="quick", seed=0))
    assert out.converged["plateaued"] and out.verdict == "fail" and settle(out) == ("fail", "")
    monkeypatch.setattr(E, "training_runs", lambda ctx: _fake_runs(bad, bad, shape="falling"))
    out = E.ext_dag_training(CheckContext(tier="quick", seed=0))
    assert not out.converged["plateaued"] and out.verdict == "inconclusive" and out.reason.startswith("not converged")


def test_training_check_runs_small(monkeypatch):
    monkeypatch.setitem(E.SIZES, "quick", {**E.SIZES["quick"], "pair_steps": 20, "heads_steps": 20,
                                           "eval_contexts": 50})
    out = E.ext_dag_training(CheckContext(tier="quick", seed=0))
    assert out.control.rejected  # the initialised model is far from BMA
    assert out.verdict in ("pass", "fail", "inconclusive")
