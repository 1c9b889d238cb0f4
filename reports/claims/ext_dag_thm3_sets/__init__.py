"""Claim ``ext-dag-thm3-sets``: k-sets: the largest initial gradient is on the true set. Its statement, readings,
checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "ext-dag-thm3-sets", "section": "beyond", "kinds": ("exact",),
                 "short": "k-sets: the largest initial gradient is on the true set"}
