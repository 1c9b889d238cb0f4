"""Training on the k-parent DAG task (model/dag_training.py); the check of claim ext-dag-training is tested in
tests/claims/test_ext_dag_training.py.

Compared against: the model at its initialisation (a short training must lower the held-out query-loss gap to
BMA); the exact laws (the heads model's outputs are probability laws).
"""
import numpy as np
import pytest
import torch

from bma_verify.model.dag_training import DagTrainConfig, build_dag_model, run_kernels, train_dag
from bma_verify.numerics.dag import sample_dag_task


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

