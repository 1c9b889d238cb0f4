"""Claim ``ext-dag-training``: k = 2: copier + pair attention trains to the set posterior. Its statement, readings,
checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "ext-dag-training", "section": "beyond", "kinds": ("model",),
                 "short": "k = 2: copier + pair attention trains to the set posterior"}
