# The two commands: `make serve` and `make test`. Both install whatever is missing first.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin

.PHONY: serve test test-verl setup setup-test lint typecheck deploy-check pytest bench clean

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

# The verl adapter's tests (trainer/verl) in their own .venv-verl: verl 0.9 pins transformers
# below 5.11, which must not change what `make test` runs with. CI runs both.
test-verl:
	@scripts/setup.sh verl
	.venv-verl/bin/pytest -q tests/trainer/verl

bench: setup
	$(BIN)/codepool bench sandbox

clean:
	rm -rf $(VENV) .venv-verl .mypy_cache .ruff_cache .pytest_cache
