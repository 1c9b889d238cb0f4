"""Claim ``ext-dag-lemma3-sets``: k-sets: I(x_h; x_S) ≤ I(x_h; x_T), ratio < 1 for disjoint S. Its statement, readings,
checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "ext-dag-lemma3-sets", "section": "beyond", "kinds": ("exact",),
                 "short": "k-sets: I(x_h; x_S) ≤ I(x_h; x_T), ratio < 1 for disjoint S"}
