"""Claim ``footnote1-selective-induction``: footnote 1: selective induction maps onto the tree task. Its statement,
readings, checks, thresholds and controls: ``claim.py``."""

#: What ``bma-verify check --list`` shows before the claim is imported (standard library only).
CATALOG_ENTRY = {"id": "footnote1-selective-induction", "section": "beyond", "kinds": ("exact", "model"),
                 "short": "footnote 1: selective induction maps onto the tree task"}
