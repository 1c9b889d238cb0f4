"""Exact and Monte Carlo computation for the discrete task (docs/claims.md): NumPy and SciPy only; imports
neither theory nor model."""
from bma_verify.numerics.bma import (bma_loss, bma_parent_loss, bma_predictive, causal_log_softmax, oracle_loss,
                                     parent_accuracy, parent_loss, parent_loss_by_context, parent_posterior, query_loss,
                                     selector_attention, selector_scores)
from bma_verify.numerics.contraction import chi2_contraction, doeblin_bound, kl_contraction
from bma_verify.numerics.gradient import approximate_init_gradient, chi2_gain, init_gradient
from bma_verify.numerics.information import (chi2_mutual_information, depths, dobrushin_coefficient, entropy,
                                             lowest_common_ancestor, marginal, mutual_information, pairwise_joint)
from bma_verify.numerics.task import (TaskBatch, random_kernel, random_parents, sample_chains, sample_task,
                                      stationary_distribution)

__all__ = [
    "TaskBatch", "causal_log_softmax", "approximate_init_gradient", "chi2_contraction", "chi2_gain", "doeblin_bound",
    "init_gradient",
    "kl_contraction", "bma_loss", "bma_parent_loss", "bma_predictive", "chi2_mutual_information", "depths",
    "dobrushin_coefficient", "entropy", "lowest_common_ancestor", "marginal", "mutual_information",
    "oracle_loss", "pairwise_joint", "parent_accuracy", "parent_loss", "parent_loss_by_context", "parent_posterior",
    "query_loss",
    "random_kernel", "random_parents", "sample_chains", "sample_task", "selector_attention", "selector_scores",
    "stationary_distribution",
]

# The k-parent DAG task (our extension; ``ext-dag-*`` claims): k = 1 is the tree task above, bit for bit.
from bma_verify.numerics.dag import (DagTaskBatch, check_dag_kernels, check_parent_sets, dag_bma_loss,
                                     dag_bma_predictive, dag_candidate_counts, dag_candidate_sets, dag_log_posterior,
                                     dag_oracle_loss, dag_parent_posterior, dag_set_scores, encode_parent_values,
                                     parent_set_index, parent_sets_from_choices, random_dag_kernels, random_parent_sets,
                                     sample_dag_chains, sample_dag_task)
from bma_verify.numerics.dag_enumeration import (all_dags, brute_force_dag_joint, brute_force_dag_posterior,
                                                 brute_force_dag_predictive, count_dags, dag_sequence_distribution,
                                                 dag_sequence_log_likelihood)
from bma_verify.numerics.dag_gradient import (dag_approximate_init_gradient, dag_chi2_gain, dag_init_gradient,
                                              dag_thm3_check_position, dag_thm3_sweep)
from bma_verify.numerics.dag_law import DagLaw, dag_joint_tensor, dag_set_joint, overlap_ratio_one_instance
from bma_verify.numerics.dag_lemma3 import dag_lemma3_monte_carlo, dag_lemma3_sets, dag_lemma3_sweep, kernel_constants
from bma_verify.numerics.dag_lemma4 import dag_lemma4_monte_carlo, dag_lemma4_terms

__all__ += [
    "DagTaskBatch", "check_dag_kernels", "check_parent_sets", "dag_bma_loss", "dag_bma_predictive",
    "dag_candidate_counts", "dag_candidate_sets", "dag_log_posterior", "dag_oracle_loss", "dag_parent_posterior",
    "dag_set_scores", "encode_parent_values", "parent_set_index", "parent_sets_from_choices", "random_dag_kernels",
    "random_parent_sets", "sample_dag_chains", "sample_dag_task",
    "all_dags", "brute_force_dag_joint", "brute_force_dag_posterior", "brute_force_dag_predictive", "count_dags",
    "dag_sequence_distribution", "dag_sequence_log_likelihood",
    "DagLaw", "dag_approximate_init_gradient", "dag_chi2_gain", "dag_init_gradient", "dag_joint_tensor",
    "dag_lemma3_monte_carlo", "dag_lemma3_sets", "dag_lemma3_sweep", "dag_lemma4_monte_carlo", "dag_lemma4_terms",
    "dag_set_joint", "dag_thm3_check_position", "dag_thm3_sweep", "kernel_constants", "overlap_ratio_one_instance",
]

# The kernel claims at any size d (``check --kernel``): exact per depth pattern, Monte Carlo beyond enumeration.
from bma_verify.numerics.large_kernels import (check_cost, dobrushin_coefficient_blocked, exact_form_gradients,
                                               j_form_gradients, kernel_powers, tree_pair_table)

__all__ += ["check_cost", "dobrushin_coefficient_blocked", "exact_form_gradients", "j_form_gradients", "kernel_powers",
            "tree_pair_table"]
