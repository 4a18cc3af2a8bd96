# laplace-bench: `make test` and `make reproduce-table-2` set everything up from nothing.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
SCALE ?= cpu
RESULTS ?= results
export BENCH_RESULTS_DIR ?= $(RESULTS)

SSLA_ARTIFACTS := figure-1 figure-2 figure-3 table-1 table-2 table-3 table-4 table-5 table-6 table-7 table-8
SUBNET_ARTIFACTS := figure-1 figure-2
IMPLEMENTED := $(addprefix ssla/,$(SSLA_ARTIFACTS) blr) $(addprefix subnet/,$(SUBNET_ARTIFACTS))

.PHONY: help install lock test test-all lint reproduce-all reports report-index clean-venv \
	$(addprefix reproduce-,$(SSLA_ARTIFACTS)) $(addprefix reproduce-ssla-,$(SSLA_ARTIFACTS) blr)

# reproduce-<paper>-<artifact>: run the experiment's jobs at SCALE, then render its report.
define reproduce_rule
reproduce-$(subst /,-,$(1)): $$(VENV)/.installed
	$$(PY) -m bench.reproduce $(1) --scale $$(SCALE)
endef
$(foreach a,$(IMPLEMENTED),$(eval $(call reproduce_rule,$(a))))
# SSLA short forms: reproduce-table-N / reproduce-figure-N.
$(foreach a,$(SSLA_ARTIFACTS),$(eval reproduce-$(a): reproduce-ssla-$(a)))

help:  ## List the make targets
	@grep -E '^[a-zA-Z0-9_%.-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | sort

# The whole resolved environment comes from requirements.lock (exact versions, so numbers do
# not move between machines); the project itself is then added without touching them.
$(VENV)/.installed: requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -r requirements.lock
	$(BIN)/pip install --no-deps -e .
	touch $@

install: $(VENV)/.installed  ## Create .venv from requirements.lock and install the project

# uv 0.13.9 wrote requirements.lock; the same release re-resolves it the same way.
UV_VERSION := 0.13.9
# e.g. LOCK_FLAGS="--upgrade-package optuna"; by default every pin already in the lock is kept.
LOCK_FLAGS ?=
$(BIN)/uv:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install uv==$(UV_VERSION)

lock: $(BIN)/uv  ## Re-resolve requirements.lock from pyproject.toml (Python 3.11, test extra)
	$(BIN)/uv pip compile --quiet pyproject.toml --extra test --python-version 3.11 $(LOCK_FLAGS) \
		-o requirements.lock


test: $(VENV)/.installed  ## Fast test suite (excludes tests marked slow)
	$(BIN)/pytest -m "not slow" -q

test-all: $(VENV)/.installed  ## Every test, slow ones included
	$(BIN)/pytest -q

lint: $(VENV)/.installed  ## ruff
	$(BIN)/ruff check bench tests

list-reproduce:  ## List the reproduce-<paper>-<artifact> targets (SCALE=smoke|cpu|paper)
	@for a in $(IMPLEMENTED); do echo "reproduce-$$(echo $$a | tr / -)"; done
	@for a in $(SSLA_ARTIFACTS); do echo "reproduce-$$a"; done

reproduce-all: $(VENV)/.installed  ## Every implemented artifact at SCALE
	set -e; for a in $(IMPLEMENTED); do $(PY) -m bench.reproduce $$a --scale $(SCALE); done
	$(PY) -m bench.report --index

reports: $(VENV)/.installed  ## Re-render every report from existing records
	$(PY) -m bench.report --all
	$(PY) -m bench.report --index

report-index: $(VENV)/.installed  ## Rewrite reports/README.md
	$(PY) -m bench.report --index

clean-venv:  ## Remove .venv
	rm -rf $(VENV)

# Re-tune the Table 2 / Figure 2 methods with the paper's trial counts into conf/tuned/retuned/
# (paper scale reads them). Studies persist in results/tuning/, so a rerun only adds missing trials.
HETERO_SPACES := mlp mfvi bnn_vi hmc
.PHONY: tune-heteroscedastic
tune-heteroscedastic: $(VENV)/.installed  ## Optuna re-tuning for Table 2 / Figure 2 (paper trial counts)
	set -e; for s in $(HETERO_SPACES); do \
		$(PY) -m bench.tune space=$$s export=conf/tuned/retuned/heteroscedastic/$$s.yaml overwrite=true; \
	done
reproduce-ssla-table-2 reproduce-ssla-figure-2: $(if $(filter paper,$(SCALE)),tune-heteroscedastic)

.PHONY: bench-perf
bench-perf: $(VENV)/.installed  ## Speed benchmark (side-by-side ratios) -> reports/perf.md
	$(PY) -m bench.perf --out reports/perf.md

.PHONY: bench-perf-subnet
bench-perf-subnet: $(VENV)/.installed  ## Greedy-Laplace timing vs the naive O(p^3)-per-step greedy -> reports/subnet/perf.md
	$(PY) -m bench.benchmarks.subset_selection --p 125 250 500 1000 2000 --naive-budget-s 8 --out reports/subnet/perf.md
