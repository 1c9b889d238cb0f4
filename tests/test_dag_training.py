"""Training on the k-parent DAG task (model/dag_training.py); the check of claim ext-dag-training is tested in
tests/claims/test_ext_dag_training.py.

Compared against: the model at its initialisation (a short training must lower the held-out query-loss gap to
BMA); the exact laws (the heads model's outputs are probability laws); scipy's rel_entr on the exact set posteriors
(BMA reading fewer examples).
"""
import numpy as np
import pytest
import torch

from scipy.special import rel_entr

from bma_verify.model.dag_training import (DagTrainConfig, build_dag_model, eval_task, run_kernels, train_dag,
                                           truncated_bma_evaluation)
from bma_verify.numerics.dag import dag_parent_posterior, sample_dag_task


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



def test_a_run_records_its_held_out_curve_and_plateau_test():
    run = train_dag(DagTrainConfig(steps=60, eval_contexts=50, K=6, eval_every=20))
    assert [step for step, _ in run["curve"]] == [0, 20, 40, 60]
    assert run["curve"][-1][1] == run["final"]["query_gap"] and "plateaued" in run["plateau"]


def test_bma_reading_fewer_examples_is_its_kl_to_the_full_posterior():
    config = DagTrainConfig(eval_contexts=40)
    kernels = run_kernels(config)
    batch = eval_task(config, kernels)
    full = dag_parent_posterior(kernels, batch.context)[:, config.k:]
    last3 = dag_parent_posterior(kernels, batch.context[:, -3:])[:, config.k:]
    expected = rel_entr(full, last3).sum(-1).mean()  # mean over contexts and rows h >= k
    assert truncated_bma_evaluation(kernels, batch, config.k, 3)["lpa_gap"] == pytest.approx(expected, rel=1e-12)
    at_L = truncated_bma_evaluation(kernels, batch, config.k, config.L)
    assert at_L["lpa_gap"] == pytest.approx(0.0, abs=1e-12) and at_L["query_gap"] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="examples must be an integer in 1..5"):
        truncated_bma_evaluation(kernels, batch, config.k, 0)
