"""Claim ``ext-dag-families``: k = 2: which attention families can fit the set posterior. Its statement, readings,
checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "ext-dag-families", "section": "beyond", "kinds": ("exact",),
                 "short": "k = 2: which attention families can fit the set posterior"}
