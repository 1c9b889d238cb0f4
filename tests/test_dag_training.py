"""Training on the k-parent DAG task (model/dag_training.py) and the ext-dag-training check.

Compared against: the model at its initialisation (a short training must lower the held-out query-loss gap to
BMA); the exact laws (the heads model's outputs are probability laws); and, for the check, that its control (the
model at initialisation) is rejected by the rule and that with the control made to pass ``settle`` withholds
the pass ("not discriminating").
"""
import numpy as np
import pytest
import torch

import bma_verify.reports.checks.ext_dag_families as E
from bma_verify.model.dag_training import DagTrainConfig, build_dag_model, run_kernels, train_dag
from bma_verify.numerics.dag import sample_dag_task
from bma_verify.reports.core import CheckContext, settle


@pytest.mark.parametrize("name", ["pair", "heads"])
def test_short_training_lowers_the_gap(name):
    run = train_dag(DagTrainConfig(model=name, steps=60, eval_contexts=200, K=6, lr=0.05, warmup=10))
    assert run["final"]["query_gap"] < run["init"]["query_gap"] - 0.02
    assert run["losses"][-1][1] < run["losses"][0][1]


def test_heads_model_outputs_are_laws():
    config = DagTrainConfig(model="heads")
    model = build_dag_model(config, torch.Generator().manual_seed(0)).double()
    batch = sample_dag_task(run_kernels(config), 8, 3, config.H, rng=np.random.default_rng(0))
    log_q, log_f = model(batch.context, batch.query)
    np.testing.assert_allclose(log_q[:, 2:].exp().sum(-1).detach().numpy(), 1.0, atol=1e-12)
    np.testing.assert_allclose(log_f.exp().sum(-1).detach().numpy(), 1.0, atol=1e-12)


def test_config_validation():
    with pytest.raises(ValueError, match="model must be one of"):
        DagTrainConfig(model="ffn")
    with pytest.raises(ValueError, match="k must be at most"):
        DagTrainConfig(k=6, H=6)


def test_same_seed_same_run():
    a = train_dag(DagTrainConfig(steps=5, eval_contexts=20, K=6))
    b = train_dag(DagTrainConfig(steps=5, eval_contexts=20, K=6))
    assert a["final"] == b["final"]


def _fake_runs(final_pair, init_pair):
    base = {"lpa_model": 1.0, "lpa_bma": 0.9, "loss_model": 1.0, "loss_bma": 0.95}
    config = DagTrainConfig(steps=10).__dict__
    run = lambda init, final: {"config": config, "init": {**base, **init}, "final": {**base, **final},  # noqa
                               "losses": [[10, 1.0]], "converged": True, "seconds": 0.0}
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


def test_training_check_runs_small(monkeypatch):
    monkeypatch.setitem(E.SIZES, "quick", {**E.SIZES["quick"], "pair_steps": 20, "heads_steps": 20,
                                           "eval_contexts": 50})
    out = E.ext_dag_training(CheckContext(tier="quick", seed=0))
    assert out.control.rejected  # the initialised model is far from BMA
    assert out.verdict in ("pass", "fail")
