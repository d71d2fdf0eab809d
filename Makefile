# The operator's two commands: `make run` serves the API, `make test` runs the whole suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
FLASK  := $(BIN)/flask --app wsgi

.PHONY: run test install install-test migrate lint format clean

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

install-test: $(VENV)/.installed-test

migrate: install
	$(FLASK) db upgrade

run: migrate
	@if [ -n "$$ADMIN_EMAIL" ] && [ -n "$$ADMIN_PASSWORD" ]; then $(FLASK) provision-admin; fi
	$(FLASK) serve

test: install-test
	$(BIN)/ruff check .
	$(BIN)/pytest

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install-test
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
