"""Claim ``thm3-init-gradient``: at initialisation the largest expected gradient is on pa(h). Its statement, readings,
checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "thm3-init-gradient", "section": "paper", "kinds": ("symbolic", "exact", "monte-carlo", "model"),
                 "short": "at initialisation the largest expected gradient is on pa(h)"}
