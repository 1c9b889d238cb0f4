"""One module per claim: its ``CLAIM`` (statement, readings, checks) and the check functions that decide it."""
