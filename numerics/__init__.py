"""Exact and Monte Carlo computation for the discrete task of SPEC.md (NumPy/SciPy; imports neither theory nor model)."""
from numerics.bma import (bma_loss, causal_log_softmax, bma_parent_loss, bma_predictive, oracle_loss, parent_accuracy, parent_loss,
                          parent_posterior, query_loss, selector_attention, selector_scores)
from numerics.contraction import chi2_contraction, doeblin_bound, kl_contraction
from numerics.gradient import approximate_init_gradient, chi2_gain, init_gradient
from numerics.information import (chi2_mutual_information, depths, dobrushin_coefficient, entropy,
                                  lowest_common_ancestor, marginal, mutual_information, pairwise_joint)
from numerics.task import (TaskBatch, random_kernel, random_parents, sample_chains, sample_task,
                           stationary_distribution)

__all__ = [
    "TaskBatch", "causal_log_softmax", "approximate_init_gradient", "chi2_contraction", "chi2_gain", "doeblin_bound", "init_gradient",
    "kl_contraction", "bma_loss", "bma_parent_loss", "bma_predictive", "chi2_mutual_information", "depths",
    "dobrushin_coefficient", "entropy", "lowest_common_ancestor", "marginal", "mutual_information",
    "oracle_loss", "pairwise_joint", "parent_accuracy", "parent_loss", "parent_posterior", "query_loss",
    "random_kernel", "random_parents", "sample_chains", "sample_task", "selector_attention", "selector_scores",
    "stationary_distribution",
]
