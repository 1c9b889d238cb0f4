"""One folder per claim: ``<claim_id>/__init__.py`` (its catalog entry) and ``<claim_id>/claim.py`` (its ``CLAIM``:
statement, readings, checks, thresholds, controls)."""
