# `make demo` and `make test` set everything up (a .venv with torch 2.13.0 CPU first) and run.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
EXAMPLES := generated_examples

.PHONY: setup demo test test-all lint examples bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[mobius,automodel,dev]"
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps nemo-automodel==0.7.0
	touch $@

demo: setup
	HF_HUB_OFFLINE=1 $(BIN)/onboard new Qwen/Qwen3-0.6B --target mobius --treat-as-new \
		--out onboarded/qwen3/mobius

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/pytest -n 2 -q --durations=25

test-all: lint
	$(BIN)/pytest -n 2 -q -m "slow or not slow"

examples: setup
	$(BIN)/python -m onboard.examples $(EXAMPLES)

bench: setup
	$(BIN)/python benchmarks/bench_new.py

clean:
	rm -rf onboarded .pytest_cache .ruff_cache
