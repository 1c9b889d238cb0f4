"""Claim ``ext-dag-posterior``: k-parent DAGs: the set posterior is Bayes over every DAG. Its statement, readings,
checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "ext-dag-posterior", "section": "beyond", "kinds": ("exact",),
                 "short": "k-parent DAGs: the set posterior is Bayes over every DAG"}
