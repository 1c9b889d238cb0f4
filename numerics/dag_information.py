"""Information theory for parent sets on the k-parent DAG task, by topic (our extension, not the paper's).

The code lives in :mod:`numerics.dag_law` (exact joints, random and planted instances), :mod:`numerics.dag_lemma4`,
:mod:`numerics.dag_lemma3` and :mod:`numerics.dag_gradient` (Theorem 3); this module gathers their public names so
that ``numerics.dag_information`` imports keep working.
"""
from bma_verify.numerics.dag_gradient import (TIE_ATOL, dag_approximate_init_gradient, dag_chi2_gain, dag_init_gradient,
                                              dag_init_gradient_samples, dag_thm3_check_position, dag_thm3_sweep)
from bma_verify.numerics.dag_law import (DAG_RANGES, INIT_KINDS, DagLaw, dag_instance_record, dag_joint_tensor,
                                         dag_set_joint, draw_dag_instance, overlap_ratio_one_instance)
from bma_verify.numerics.dag_lemma3 import (LEMMA3_SET_CANDIDATES, MI_FLOOR, RATIO_EDGES, VIOLATION_RTOL,
                                            dag_lemma3_monte_carlo, dag_lemma3_sets, dag_lemma3_sweep, kernel_constants)
from bma_verify.numerics.dag_lemma4 import dag_lemma4_monte_carlo, dag_lemma4_terms

__all__ = [
    "DAG_RANGES", "INIT_KINDS", "DagLaw", "dag_instance_record", "dag_joint_tensor", "dag_set_joint",
    "draw_dag_instance", "overlap_ratio_one_instance",
    "dag_lemma4_monte_carlo", "dag_lemma4_terms",
    "LEMMA3_SET_CANDIDATES", "MI_FLOOR", "RATIO_EDGES", "VIOLATION_RTOL", "dag_lemma3_monte_carlo", "dag_lemma3_sets",
    "dag_lemma3_sweep", "kernel_constants",
    "TIE_ATOL", "dag_approximate_init_gradient", "dag_chi2_gain", "dag_init_gradient", "dag_init_gradient_samples",
    "dag_thm3_check_position", "dag_thm3_sweep",
]
