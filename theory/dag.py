"""Lemma 4, Theorem 3 and the 2-simplicial construction for parent *sets* on the k-parent DAG task (our extension).

The derivations live in :mod:`theory.dag_lemma4` (``ext-dag-lemma4-sets``), :mod:`theory.dag_thm3`
(``ext-dag-thm3-sets``) and :mod:`theory.dag_construction` (``ext-dag-construction``), on the symbolic laws and
tables of :mod:`theory.dag_tables`; this module gathers their public names so that ``theory.dag`` imports keep
working.
"""
from bma_verify.theory.dag_construction import (CLAIM_CONSTRUCTION, CONSTRUCTION_CONTEXT, construction_expressions,
                                                derive_dag_construction, log_table, transposed_log_table)
from bma_verify.theory.dag_lemma4 import (CLAIM_LEMMA4, derive_dag_lemma4, dropped_kl_term, lemma4_expressions,
                                          lemma4_residuals, perturb_dag_lemma4, verify_dag_lemma4)
from bma_verify.theory.dag_tables import joint_table_symbols, stochastic_table
from bma_verify.theory.dag_thm3 import (CLAIM_THM3, chi2_identity_residual, derive_dag_thm3, dropped_minus_one,
                                        likelihood_symbols, mixture_gradient, perturb_dag_thm3, thm3_j_expressions,
                                        verify_dag_thm3)

__all__ = [
    "joint_table_symbols", "stochastic_table",
    "CLAIM_LEMMA4", "derive_dag_lemma4", "dropped_kl_term", "lemma4_expressions", "lemma4_residuals",
    "perturb_dag_lemma4", "verify_dag_lemma4",
    "CLAIM_THM3", "chi2_identity_residual", "derive_dag_thm3", "dropped_minus_one", "likelihood_symbols",
    "mixture_gradient", "perturb_dag_thm3", "thm3_j_expressions", "verify_dag_thm3",
    "CLAIM_CONSTRUCTION", "CONSTRUCTION_CONTEXT", "construction_expressions", "derive_dag_construction", "log_table",
    "transposed_log_table",
]
