# servewatch: `make generate` and `make test` are all a fresh Debian machine with Python 3.11 needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# pytest workers (pytest-xdist): one per core; a module's tests and its servers stay on one worker
TEST_WORKERS ?= auto

.PHONY: setup tools generate check test test-fast lint bench bench-fleet bench-native fuzz mutate clean

# Python dependencies in a local virtualenv (Debian needs python3-venv for that; installed if missing).
$(STAMP): pyproject.toml
	@$(PYTHON) -m venv $(VENV) 2>/dev/null || { \
	  echo "python3-venv missing: installing it with apt-get"; \
	  apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null && $(PYTHON) -m venv $(VENV); }
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	@touch $@

setup: $(STAMP)

# Every real binary the tests use (promtool and prometheus 3.5, Alertmanager, VictoriaMetrics, kustomize)
# into .cache/tools, from Debian's archive (see generator/servewatch/tools/): once, before the test
# workers start, so no two of them fetch the same tool.
tools: $(STAMP)
	$(BIN)/servewatch tools install
	$(BIN)/servewatch tools where

# The main job: every output from the default specs.
generate: $(STAMP)
	$(BIN)/servewatch generate

# Drift check: fails when committed outputs differ from what the specs generate.
check: $(STAMP)
	$(BIN)/servewatch generate --check

# Style and bug checks on the Python code ([tool.ruff] in pyproject.toml), then the PromQL checks on rules/.
lint: $(STAMP)
	$(BIN)/ruff check generator tests bench
	$(BIN)/ruff format --check generator tests bench
	$(BIN)/servewatch lint rules dashboards

# lint runs first (it is listed before tools). Every test runs: a missing binary is installed, never skipped.
# The workers take modules in conftest.py's order (those with servers, binaries or minutes of CPU
# first), not xdist's (fewest tests last), so the last modules handed out are short.
test: lint tools
	$(BIN)/servewatch generate --check
	$(BIN)/servewatch test
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --install-tools --durations=25

# In-process only, for a quick answer while editing: no servers, no downloads, no real binaries
# (promtool, prometheus), none of the minutes-long SLO designs and fuzzing. `make test` runs them all.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not integration and not tools and not slow" --durations=15

# Generation time of all artefacts, default specs and 100 deployments' worth (bench/README.md).
bench: $(STAMP)
	$(BIN)/python -m bench.generation_cost

# Rules and dashboards on a synthetic fleet in a real Prometheus 3.5, 512 to 4,096 GPUs (about 30 min
# on 2 cores; bench/README.md). Not part of `make test`. A quick run:
#   make bench-fleet BENCH_ARGS="--gpus 512 --repeats 1 --label quick"
# With the hour scraped into Prometheus' head, as a running one holds it (bench/loading.py):
#   make bench-fleet BENCH_ARGS="--gpus 4096 --rules-only --load scrape --before main"
BENCH_ARGS ?=
$(VENV)/.bench-installed: $(STAMP)
	$(BIN)/pip install -q -e '.[test,bench]'
	@touch $@

bench-fleet: tools $(VENV)/.bench-installed
	$(BIN)/python -m bench.fleet $(BENCH_ARGS)

# The same fleet's rules and dashboards generated with `histograms: classic` and `native`, measured
# on one Prometheus that scrapes the fleet's hour replayed (classic series and NHCB side by side;
# about 15 min at 1,024 GPUs; bench/README.md). A quick run:
#   make bench-native BENCH_ARGS="--gpus 128 --minutes 10 --live-minutes 1 --repeats 1 --label quick"
bench-native: tools $(VENV)/.bench-installed
	$(BIN)/python -m bench.native $(BENCH_ARGS)

# 10,000 hostile mutations of specs/ through the whole pipeline, split over FUZZ_JOBS processes, each
# on its own seed (`make test` runs 120, derandomized). Each shard's log and summary go to
# .cache/fuzz-<n>.log and .cache/fuzz-progress-<n>.txt (updated every 250 cases).
# FUZZ_CASES=n for another count; the summary it prints is kept in docs/fuzzing.md.
FUZZ_CASES ?= 10000
FUZZ_JOBS ?= 2
fuzz: tools
	@mkdir -p .cache; pids=; \
	for n in $$(seq 1 $(FUZZ_JOBS)); do \
	  SERVEWATCH_FUZZ_SHARD=$$n SERVEWATCH_FUZZ_PROGRESS=.cache/fuzz-progress-$$n.txt \
	  SERVEWATCH_FUZZ_CASES=$$(( ($(FUZZ_CASES) + $(FUZZ_JOBS) - n) / $(FUZZ_JOBS) )) \
	    $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/test_fuzz_specs.py >.cache/fuzz-$$n.log 2>&1 & \
	  pids="$$pids $$!"; \
	done; \
	rc=0; for p in $$pids; do wait $$p || rc=1; done; \
	for n in $$(seq 1 $(FUZZ_JOBS)); do echo "== shard $$n of $(FUZZ_JOBS)"; tail -n 25 .cache/fuzz-$$n.log; done; \
	test $$rc = 0
	SERVEWATCH_FUZZ_MATCHER_BATCHES=$$(( $(FUZZ_CASES) / 400 + 3 )) \
	  $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/test_fuzz_matchers.py

# Mutation testing (not in `make test`): break each generated rule one way at a time and check that the
# promtool tests, then the incident tests on a real Prometheus, notice. Writes bench/mutation/REPORT.md.
# MUTATE_ARGS passes options through, e.g. MUTATE_ARGS="--only VLLMKVCacheUsageHigh --out /tmp/m".
mutate: tools
	$(BIN)/servewatch generate --check
	PYTHONPATH=generator $(BIN)/python -m servewatch_testkit.mutate --with-incidents $(MUTATE_ARGS)

clean:
	rm -rf $(VENV) .cache .pytest_cache
