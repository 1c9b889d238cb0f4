"""Claim ``ext-dag-construction``: k-sets: a construction whose attention is the set posterior. Its statement, readings,
checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "ext-dag-construction", "section": "beyond", "kinds": ("symbolic", "model"),
                 "short": "k-sets: a construction whose attention is the set posterior"}
