"""Claim ``ext-dag-lemma4-sets``: k-sets: the log-likelihood gap is an expected KL, ≥ 0. Its statement, readings,
checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "ext-dag-lemma4-sets", "section": "beyond", "kinds": ("symbolic", "exact", "monte-carlo"),
                 "short": "k-sets: the log-likelihood gap is an expected KL, ≥ 0"}
