# The operator's two commands: `make run` serves the API, `make test` runs the whole suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
FLASK  := $(BIN)/flask --app wsgi

.PHONY: run start stop test install install-test browser unpackers nginx migrate lint format bench mutate screenshots clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "Python 3.11 or newer is required (found: $$($(PYTHON) --version))"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	@touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $@ $(VENV)/.installed

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test browser unpackers nginx tests/js/node_modules

# tus-js-client (the client Uppy uses) tests resumable uploads under Node.
tests/js/node_modules: tests/js/package.json tests/js/package-lock.json
	cd tests/js && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# Folder archives are checked with Debian's unzip and 7z as well as Python's zipfile.
unpackers:
	@command -v unzip >/dev/null 2>&1 && command -v 7z >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing unzip and p7zip-full for the archive tests"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq unzip p7zip-full >/dev/null; \
		else echo "unzip or 7z is not installed: the archive tests will fail"; fi; }

# The docs page is tested in a real headless browser: Debian's Chromium, installed when
# missing and we may (root, apt); otherwise the test says what is missing.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing chromium for the browser test"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else echo "chromium is not installed: the docs page browser test will be skipped"; fi; }

# docs/nginx.conf is tested by running it: Debian's nginx, installed the same way.
nginx:
	@command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing nginx for the reverse proxy test"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; \
		else echo "nginx is not installed: the reverse proxy test will be skipped"; fi; }

migrate: install
	$(FLASK) db upgrade

# With ADMIN_EMAIL and ADMIN_PASSWORD it provisions that administrator first; half of the two
# stops it with one line (provision-admin). Serving prints the front and docs pages' addresses
# and, while there is no administrator, how to make one; it serves from SERVER_PROCESSES
# processes, one per core unless set.
PROVISION = if [ -n "$$ADMIN_EMAIL$$ADMIN_PASSWORD" ]; then $(FLASK) provision-admin; fi

run: migrate
	@$(PROVISION)
	$(FLASK) serve

# `make run` in the background, for the README's quick start and the chapters' examples (a
# second start restarts): back once this checkout's own server serves, which it prints, or with
# the log's last lines when it stopped instead (a port taken, a wrong setting), whatever else
# answers on PORT. Its output goes to RUN_LOG, its process id to RUN_PID; `make stop` ends it.
RUN_LOG := instance/run.log
RUN_PID := instance/run.pid

start: stop install
	@{ $(FLASK) db upgrade && $(PROVISION) && exec $(FLASK) serve; } >$(RUN_LOG) 2>&1 & \
		echo $$! >$(RUN_PID)
	@until grep -qs '^Serving on' $(RUN_LOG); do \
		kill -0 $$(cat $(RUN_PID)) 2>/dev/null || { \
			rm -f $(RUN_PID); grep -s '^Error' $(RUN_LOG) >&2 || tail -n 5 $(RUN_LOG) >&2; exit 1; }; \
		sleep 0.2; done
	@grep '^Serving on' $(RUN_LOG); echo "Its log: $(RUN_LOG); make stop ends it."

# Only a process of ours: a pid file left from before a reboot may name another program.
stop:
	@pid=$$(cat $(RUN_PID) 2>/dev/null) || exit 0; rm -f $(RUN_PID); \
	case "$$(ps -o args= -p $$pid 2>/dev/null)" in *" serve"*) kill $$pid; \
		while kill -0 $$pid 2>/dev/null; do sleep 0.2; done;; esac

# The suite in TEST_WORKERS processes (pytest-xdist; each starts its own SeaweedFS and
# PostgreSQL databases); TEST_WORKERS=0 runs it in this one. TESTS names files or folders to
# run instead of the whole suite: `make test TESTS=tests/files/test_upload.py`.
TEST_WORKERS ?= 2
TESTS ?=

test: install-test
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/pytest -n $(TEST_WORKERS) $(TESTS)

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

format: install-test
	$(BIN)/ruff format .

# Throughput, memory, request rate, list and search latency against baselines measured in the
# same run (about 20 minutes on a quiet 2-core machine); prints a PASS/FAIL line per target and
# saves bench/results/*.json, from which BENCHMARKS.md is edited by hand.
bench: install-test
	@command -v wrk >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && apt-get install -y -qq wrk >/dev/null; }
	status=0; $(BIN)/python -m bench.transfer || status=1; \
	$(BIN)/python -m bench.load --postgres --s3 --records 10000,1000000 || status=1; exit $$status

# Mutation testing of the functions of tests/mutation_scope.toml with the tests that cover
# them (docs/mutation.md); not part of `make test`. Prints the score and the survivors; fails
# when a survivor is not accepted there. A part of the scope, by prefixes of the functions'
# dotted names: `make mutate MUTANTS="app.links. app.stats."`.
mutate: install-test
	$(BIN)/pip install --quiet -e '.[test,mutate]'
	$(BIN)/python -m tests.support.mutation $(MUTANTS)

# The four pictures of docs/pages.md, fresh from the browser test's screenshots.
screenshots: install-test
	REQUIRE_BROWSER=1 $(BIN)/pytest -q tests/pages/test_pages_in_browser.py
	$(BIN)/python -m tests.support.screenshots

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache mutants
