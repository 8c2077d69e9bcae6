# The README's two commands: `make run` and `make test`. Both install what is missing first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export DOCSHIFT_PORT ?= 8000
export DOCSHIFT_DATA_DIR ?= var
SYSTEM_PACKAGES := python3-uno libreoffice-core libreoffice-writer libreoffice-calc libreoffice-impress \
	fonts-liberation2 fonts-crosextra-carlito fonts-crosextra-caladea fonts-dejavu-core
# the registration page is tested in a real browser
TEST_PACKAGES := chromium

.PHONY: run test install system test-system apt

run: install
	@$(BIN)/flask --app app init-db
	@rm -rf "$(DOCSHIFT_DATA_DIR)/metrics"  # per-process metric files of an earlier run
	@echo
	@echo "docshift API:      http://127.0.0.1:$(DOCSHIFT_PORT)/v1/   (health: /healthz)"
	@echo "get an API key:    $(BIN)/flask --app app marketplace issue-token --customer me --plan starter"
	@echo "                   then open the printed link (or curl it with -H 'Accept: application/json')"
	@echo "stop:              Ctrl-C"
	@echo
	@# Ctrl-C (or SIGTERM to the group) stops all three; honcho's exit status then is not an error
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/honcho start --no-prefix -f Procfile 2>&1 || true

test: install test-system
	$(BIN)/ruff check .
	$(BIN)/pytest

install: system $(VENV)/.installed

# Debian packages, only what is missing (apt needs root)
system:
	@$(MAKE) --no-print-directory apt PACKAGES="$(SYSTEM_PACKAGES)"
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || $(MAKE) --no-print-directory apt PACKAGES=python3-venv

test-system:
	@$(MAKE) --no-print-directory apt PACKAGES="$(TEST_PACKAGES)"

apt:
	@missing=$$(for p in $(PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" != 0 ]; then echo "as root, run: apt-get install $$missing"; exit 1; fi; \
		echo "installing $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@
