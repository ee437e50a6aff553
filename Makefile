# Every target builds the virtualenv it needs; `make demo` and `make test` work from a fresh clone.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
# uv installs the project into the venv: the same resolution as pip, several times faster.
UV := uv==0.13.9

.PHONY: demo test venv bytecode clean

$(STAMP): pyproject.toml
	rm -f $(VENV)/.installed-*
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check $(UV)
	$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(VENV)/bin/python -e '.[test,ray]'
	touch $(STAMP)

venv: $(STAMP)

# The project's own modules, compiled before every run: with PYTHONDONTWRITEBYTECODE set, each of
# the many processes the tests start would otherwise compile every module it imports again.
bytecode: $(STAMP)
	$(VENV)/bin/python bench/bytecode.py

demo: bytecode
	$(VENV)/bin/python -m examples.demo

test: bytecode
	$(VENV)/bin/ruff check .
	$(VENV)/bin/python -m pytest -n 2 --dist worksteal -q

clean:
	rm -rf $(VENV) demo-out
