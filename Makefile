# Two commands do everything on a fresh machine: `make report` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: report reference test test-fast bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

report: $(STAMP)
	$(VENV)/bin/bma-verify report --tier quick --jobs 2 --out reports/latest --force $(if $(CI),--quiet,)

# The committed reference report (quick tier, seed 0 by default, one torch thread, two workers) with the same
# command line that made it (results.json records it), then docs/claims.md, which is generated from it.
reference: $(STAMP)
	$(VENV)/bin/bma-verify report --tier quick --jobs 2 --out reports/reference --force --quiet
	$(PY) -m bma_verify.reports.docs

test: $(STAMP)
	OMP_NUM_THREADS=1 HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-bma-ci} $(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder

test-fast: $(STAMP)
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-bma-dev} $(PY) -m pytest -q -m "not slow"

bench: $(STAMP)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
