"""Exact and Monte Carlo computation for the discrete task (docs/claims.md): NumPy and SciPy only; imports
neither theory nor model.

Every public name below is imported on first use (a module ``__getattr__``, PEP 562), not with the package: a
command that only reads and refuses a file (``check --kernel bad.npy``) then imports no SciPy (half a second), and
``from bma_verify.numerics import X``, ``numerics.X`` and ``from bma_verify.numerics import *`` work as before.
"""
from __future__ import annotations

import importlib

#: {submodule: its public names}, in the order of docs/claims.md: the tree task, then the k-parent DAG task (our
#: extension; ``ext-dag-*`` claims; k = 1 is the tree task, bit for bit), then the kernel claims at any size d
#: (``check --kernel``: exact per depth pattern, Monte Carlo beyond enumeration).
_EXPORTS = {
    "bma": ("bma_loss", "bma_parent_loss", "bma_predictive", "causal_log_softmax", "oracle_loss", "parent_accuracy",
            "parent_loss", "parent_loss_by_context", "parent_posterior", "query_loss", "selector_attention",
            "selector_scores"),
    "contraction": ("chi2_contraction", "doeblin_bound", "kl_contraction"),
    "gradient": ("approximate_init_gradient", "chi2_gain", "init_gradient"),
    "information": ("chi2_mutual_information", "depths", "dobrushin_coefficient", "entropy", "lowest_common_ancestor",
                    "marginal", "mutual_information", "pairwise_joint"),
    "task": ("TaskBatch", "random_kernel", "random_parents", "sample_chains", "sample_task",
             "stationary_distribution"),
    "dag": ("DagTaskBatch", "check_dag_kernels", "check_parent_sets", "dag_bma_loss", "dag_bma_predictive",
            "dag_candidate_counts", "dag_candidate_sets", "dag_log_posterior", "dag_oracle_loss",
            "dag_parent_posterior", "dag_set_scores", "encode_parent_values", "parent_set_index",
            "parent_sets_from_choices", "random_dag_kernels", "random_parent_sets", "sample_dag_chains",
            "sample_dag_task"),
    "dag_enumeration": ("all_dags", "brute_force_dag_joint", "brute_force_dag_posterior", "brute_force_dag_predictive",
                        "count_dags", "dag_sequence_distribution", "dag_sequence_log_likelihood"),
    "dag_gradient": ("dag_approximate_init_gradient", "dag_chi2_gain", "dag_init_gradient", "dag_thm3_check_position",
                     "dag_thm3_sweep"),
    "dag_law": ("DagLaw", "dag_joint_tensor", "dag_set_joint", "overlap_ratio_one_instance"),
    "dag_lemma3": ("dag_lemma3_monte_carlo", "dag_lemma3_sets", "dag_lemma3_sweep", "kernel_constants"),
    "dag_lemma4": ("dag_lemma4_monte_carlo", "dag_lemma4_terms"),
    "large_kernels": ("check_cost", "dobrushin_coefficient_blocked", "exact_form_gradients", "j_form_gradients",
                      "kernel_powers", "tree_pair_table"),
}

#: {public name: the submodule that defines it}.
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_HOME)


def __getattr__(name: str):
    """A public name, imported from its submodule on first use (and cached here); then any submodule by name."""
    if name in _HOME:
        value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
        globals()[name] = value
        return value
    if name.startswith("__"):  # a probe for a dunder (copy, pickle, inspect) is not a submodule
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))
