# The two commands: `make serve` and `make test`. Both install whatever is missing first.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin

.PHONY: serve test setup setup-test lint typecheck deploy-check pytest bench clean

serve: setup
	$(BIN)/codepool serve

test: setup-test lint typecheck deploy-check pytest

setup:
	@scripts/setup.sh serve

setup-test:
	@scripts/setup.sh test

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck:
	$(BIN)/mypy

deploy-check:
	$(BIN)/python -m deploy.check

pytest:
	$(BIN)/pytest -q

bench: setup
	$(BIN)/codepool bench sandbox

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
