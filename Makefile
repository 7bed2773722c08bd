# Two commands on a fresh machine with nothing but Python: `make demo` and `make test`.
PYTHON ?= python3
# the torch to install first (CI's: a CPU build; elsewhere e.g. TORCH="torch --index-url
# https://download.pytorch.org/whl/cpu"); everything installed after it must not replace it
TORCH ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint install-check bench-cpu clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

demo: $(BIN)/.installed
	$(BIN)/python -m linattn.demo

test: $(BIN)/.installed
	$(BIN)/ruff check linattn tests
	$(BIN)/python -m pytest -n auto

lint: $(BIN)/.installed
	$(BIN)/ruff check linattn tests
	$(BIN)/ruff format --check linattn tests

# the README's install routes, each in a fresh venv (pip install -e . ; pip install "linattn[hf] @ git+…")
install-check:
	PYTHON=$(PYTHON) TORCH="$(TORCH)" bash scripts/check_install.sh

bench-cpu: $(BIN)/.installed
	$(BIN)/python -m linattn.bench cpu

clean:
	rm -rf $(VENV) demo_out
