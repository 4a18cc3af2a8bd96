# laplace-bench: `make test` and `make reproduce-table-2` set everything up from nothing.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
SCALE ?= cpu
# Per-seed multiruns run at once by bench.reproduce (empty: one per core available).
WORKERS ?=
WORKERS_FLAG := $(if $(WORKERS), --workers $(WORKERS))
RESULTS ?= results
export BENCH_RESULTS_DIR ?= $(RESULTS)
# `make <target> PY=/path/to/python` runs in an environment you made yourself: no install step.
INSTALLED := $(if $(filter command line,$(origin PY)),,$(VENV)/.installed)

.PHONY: help install lock test test-integration test-all lint list-reproduce reproduce-all reports \
	report-index clean-venv

# reproduce-<paper>-<artifact>: run the artifact's jobs at SCALE, then render its report(s).
# Every artifact with an experiment config and a report spec has one (`make list-reproduce`);
# the SSLA paper's tables and figures also answer to the short forms reproduce-table-N and
# reproduce-figure-N. <paper> never contains '-', so the first '-' of the stem separates it.
paper_of = $(word 1,$(subst -, ,$(1)))
artifact_key = $(if $(filter table-% figure-%,$(1)),ssla/$(1),$(call paper_of,$(1))/$(patsubst $(call paper_of,$(1))-%,%,$(1)))
# LAUNCHER=slurm_gpu (or slurm) submits the jobs through that Hydra launcher.
# The README's main job computes in the pinned arithmetic (bench/harness/arithmetic.py: one
# thread a job, kernels every x86-64 CPU rounds alike), so its committed report is what any
# x86-64 machine gets back; every other target keeps the native, faster kernels.
PINNED_TARGETS := reproduce-table-2
reproduce-%: $(INSTALLED)  ## Run one artifact's jobs and render its report (SCALE=smoke|cpu|paper)
	$(PY) -m bench.reproduce $(call artifact_key,$*) --scale $(SCALE)$(WORKERS_FLAG)$(if $(LAUNCHER), --launcher $(LAUNCHER))$(if $(filter $@,$(PINNED_TARGETS)), --pinned-arithmetic)

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

# Test workers: one per core (pytest-xdist); TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= auto
# Two tiers: `make test` is the fast one (unit tests and every golden); the tests marked
# second_tier (command lines in subprocesses, kill and resume, tuning through its CLI, whole
# artifacts end to end) are `make test-integration`. CI runs both; neither runs the slow ones.
# Every tier runs in the pinned arithmetic from pytest's start (bench/harness/arithmetic.py;
# tests/conftest.py sets it too, for a pytest started otherwise): the goldens were captured in
# it and mean the same on every x86-64 machine.
PINNED_PYTEST = env $$($(PY) -m bench.harness.arithmetic) $(PY) -m pytest
test: $(INSTALLED)  ## Fast tier: unit tests under a second and one smoke golden job per experiment (not slow, not second_tier)
	$(PINNED_PYTEST) -m "not slow and not second_tier" -q -n $(TEST_WORKERS)

test-integration: $(INSTALLED)  ## Second tier: the slower tests and the other smoke golden jobs (second_tier, not slow)
	$(PINNED_PYTEST) -m "second_tier and not slow" -q -n $(TEST_WORKERS)

test-all: $(INSTALLED)  ## Every test, slow ones included
	$(PINNED_PYTEST) -q -n $(TEST_WORKERS)

# The cluster tier: a one-node Slurm on this machine (tools/local_slurm.sh, as root; it installs
# the Debian packages it lacks), the tests marked `cluster` in tests/cluster/ through
# hydra/launcher=slurm, then that Slurm stopped (one already running is used and left running).
# Not root: the tests are skipped with the reason. LOCAL_SLURM_CPUS / LOCAL_SLURM_NICE size the
# node for a shared machine (see the script).
LOCAL_SLURM := tools/local_slurm.sh
CLUSTER_PYTEST := $(PINNED_PYTEST) -m cluster tests/cluster -q -n 0 -rA --durations=0
.PHONY: test-cluster
test-cluster: $(INSTALLED)  ## Cluster tier on a local one-node Slurm it starts and stops (root)
	@if [ "$$(id -u)" != 0 ]; then $(CLUSTER_PYTEST); exit $$?; fi; \
	export SLURM_CONF=$$($(LOCAL_SLURM) conf); \
	if $(LOCAL_SLURM) running; then $(CLUSTER_PYTEST); exit $$?; fi; \
	trap '$(LOCAL_SLURM) stop' EXIT INT TERM; \
	$(LOCAL_SLURM) start || { $(LOCAL_SLURM) logs; exit 1; }; \
	$(CLUSTER_PYTEST) || { status=$$?; $(LOCAL_SLURM) logs; exit $$status; }

# The GPU tier: every implemented artifact (and side run) at smoke scale with device=cuda, its
# records compared with a CPU run's (tests/gpu/); stops with one line on a machine without CUDA.
.PHONY: test-gpu
test-gpu: $(INSTALLED)  ## GPU tier: smoke runs on device=cuda compared with the CPU's (needs CUDA)
	@$(PY) -c "import sys, torch; torch.cuda.is_available() or sys.exit('make test-gpu needs a CUDA device: torch.cuda.is_available() is False here')"
	$(PY) -m pytest tests/gpu -m gpu -q -n $(TEST_WORKERS)

lint: $(INSTALLED)  ## ruff
	$(PY) -m ruff check bench tests

list-reproduce: $(INSTALLED)  ## List the reproduce targets, one per implemented artifact
	@$(PY) -m bench.cli.artifacts --targets

# One worker queue for every artifact (bench.reproduce --all): a core that finishes an
# artifact's last job takes the next artifact's, and each artifact's reports are rendered when
# its own jobs end. An artifact whose data are missing is skipped with one line (its report
# says "needs data"), a failing one does not stop the rest: the failures are listed at the end
# (status 1), and the same command again runs only what is not finished.
reproduce-all: $(INSTALLED) $(if $(filter paper,$(SCALE)),tune-heteroscedastic)  ## Every implemented artifact at SCALE
	@start=$$(date +%s); \
	$(PY) -m bench.reproduce --all --scale $(SCALE) --skip-missing-data$(WORKERS_FLAG); status=$$?; \
	echo "reproduce-all SCALE=$(SCALE): $$(( ($$(date +%s) - start) / 60 )) min of wall time"; \
	exit $$status

# One method of your own on every experiment it fits (docs/adding-a-method.md): its jobs at
# SCALE (finished ones skipped), then REPORTS/leaderboard.md with it in place.
METHOD ?=
REPORTS ?= reports
.PHONY: benchmark leaderboard
benchmark: $(INSTALLED)  ## Run METHOD=<name> on every experiment it fits, then the leaderboard
	@test -n "$(METHOD)" || { echo "error: give METHOD=<a conf/method option>, e.g. make benchmark METHOD=mc_dropout" >&2; exit 2; }
	$(PY) -m bench.benchmark_method $(METHOD) --scale $(SCALE) --out $(REPORTS)$(WORKERS_FLAG)

leaderboard: $(INSTALLED)  ## Re-render REPORTS/leaderboard.md from the records at SCALE
	$(PY) -m bench.report --leaderboard --scale $(SCALE) --out $(REPORTS)

reports: $(INSTALLED)  ## Re-render every report from existing records
	$(PY) -m bench.report --all
	$(PY) -m bench.report --index

report-index: $(INSTALLED)  ## Rewrite reports/README.md
	$(PY) -m bench.report --index

clean-venv:  ## Remove .venv
	rm -rf $(VENV)

# Re-tune the Table 2 / Figure 2 methods with the paper's trial counts into conf/tuned/retuned/
# (paper scale reads them). Studies persist in results/tuning/, so a rerun only adds missing trials.
HETERO_SPACES := mlp mfvi bnn_vi hmc
.PHONY: tune-heteroscedastic
tune-heteroscedastic: $(INSTALLED)  ## Optuna re-tuning for Table 2 / Figure 2 (paper trial counts)
	set -e; for s in $(HETERO_SPACES); do \
		$(PY) -m bench.tune space=$$s export=conf/tuned/retuned/heteroscedastic/$$s.yaml overwrite=true; \
	done
reproduce-ssla-table-2 reproduce-ssla-figure-2 reproduce-table-2 reproduce-figure-2: \
	$(if $(filter paper,$(SCALE)),tune-heteroscedastic)

.PHONY: bench-perf
bench-perf: $(INSTALLED)  ## Speed benchmarks (side-by-side ratios) -> reports/perf.md, reports/generalized_laplace/perf.md, reports/ggn_thesis/perf.md, reports/ggn_thesis/ngvi-perf.md, reports/ssla/perf_training.md, reports/ssla/refit-perf.md, reports/ssla/hmc-perf.md, reports/laplace_redux/la-prediction-perf.md, reports/laplace_redux/ensemble-perf.md, reports/laplace_redux/glm-jacobians-perf.md, reports/laplace_redux/subnormal-perf.md, reports/start-up.md
	$(PY) -m bench.perf --out reports/perf.md
	$(PY) -m bench.benchmarks.tempered_laplace --out reports/generalized_laplace/perf.md
	$(PY) -m bench.benchmarks.network_grid_speed --out reports/ggn_thesis/perf.md
	$(PY) -m bench.benchmarks.natural_gradient --out reports/ggn_thesis/ngvi-perf.md
	$(PY) -m bench.benchmarks.paper_training --out reports/ssla/perf_training.md
	$(PY) -m bench.benchmarks.ssla_refit --out reports/ssla/refit-perf.md
	$(PY) -m bench.benchmarks.hmc_sampler_speed --out reports/ssla/hmc-perf.md
	$(PY) -m bench.benchmarks.la_prediction --out reports/laplace_redux/la-prediction-perf.md
	$(PY) -m bench.benchmarks.ensemble_training_speed --out reports/laplace_redux/ensemble-perf.md
	$(PY) -m bench.benchmarks.glm_jacobian_speed --out reports/laplace_redux/glm-jacobians-perf.md
	$(PY) -m bench.benchmarks.subnormal_training --out reports/laplace_redux/subnormal-perf.md
	$(PY) -m bench.benchmarks.start_up --out reports/start-up.md

.PHONY: diagnose-nesterov-lenet
diagnose-nesterov-lenet: $(INSTALLED)  ## Why Nesterov SGD lr 0.1 does not train the Redux LeNet (map-recipe study) -> reports/laplace_redux/nesterov-lenet.md
	$(PY) -m bench.benchmarks.nesterov_lenet --out reports/laplace_redux/nesterov-lenet.md

.PHONY: diagnose-lgva-single-sample
diagnose-lgva-single-sample: $(INSTALLED)  ## What LGVA with one Monte Carlo sample does from OGGN's settled state (GGN Figure 5.4) -> reports/ggn_thesis/lgva-single-sample.md
	$(PY) -m bench.benchmarks.lgva_single_sample --out reports/ggn_thesis/lgva-single-sample.md

.PHONY: bench-perf-subnet
bench-perf-subnet: $(INSTALLED)  ## Greedy-Laplace timing vs the naive O(p^3)-per-step greedy -> reports/subnet/perf.md
	$(PY) -m bench.benchmarks.subset_selection_speed --p 125 250 500 1000 2000 --naive-budget-s 8 --out reports/subnet/perf.md
