# Two commands do all set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
INSTALLED := $(VENV)/.installed

.PHONY: install run test lint bench clean

$(INSTALLED): pyproject.toml client/pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,bench]' -e ./client
	@touch $@

# The OpenID Connect provider of the sign-in tests (panva's oidc-provider; Node >= 20): the
# tests' alone, so `make run` needs no Node.
OIDC_PROVIDER := tests/oidc_provider/node_modules/.installed
$(OIDC_PROVIDER): tests/oidc_provider/package-lock.json
	npm ci --prefix tests/oidc_provider --no-audit --no-fund --silent
	@touch $@

install: $(INSTALLED)

# The embedded stack: SQLite under var/, no external services. jobdash's own reads of the
# cluster (a TrainJob's runtime) go as jobdash; var/kubeconfig is for people.
run: install
	@mkdir -p var
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py embedded_setup
	KUBECONFIG=var/jobdash.kubeconfig JOBDASH_ROLES_FROM=$${JOBDASH_ROLES_FROM:-rbac} $(BIN)/python manage.py run_embedded 127.0.0.1:$(PORT)

# Lint and types first (seconds), then the whole suite against a real PostgreSQL and Redis
# started (and removed) by the harness.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint $(OIDC_PROVIDER)
	$(BIN)/python tests/harness.py -- $(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis tests/oidc_provider/node_modules
