# The README's two commands: `make run` and `make test`. Both install what is missing first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export DOCSHIFT_PORT ?= 8000
export DOCSHIFT_DATA_DIR ?= var
# LibreOffice 25.2 from Debian's bookworm-backports by default (faster, and it fixes 7.4's broken
# .xlsx of some files: see the README); LIBREOFFICE=stable keeps Debian 12's own 7.4.
LIBREOFFICE ?= backports
OFFICE_PACKAGES := python3-uno libreoffice-core libreoffice-writer libreoffice-calc libreoffice-impress
SYSTEM_PACKAGES := fonts-liberation2 fonts-crosextra-carlito fonts-crosextra-caladea fonts-dejavu-core bubblewrap
# the registration page is tested in a real browser; conversion nodes are tested on a real Redis
TEST_PACKAGES := chromium redis-server

.PHONY: run node test install system office test-system apt

run: install
	@$(BIN)/flask --app app init-db
	@rm -rf "$(DOCSHIFT_DATA_DIR)/metrics"  # per-process metric files of an earlier run
	@echo
	@echo "docshift API:      http://127.0.0.1:$(DOCSHIFT_PORT)/v1/   (health: /healthz)"
	@echo "get an API key:    $(BIN)/flask --app app marketplace issue-token --customer me --plan starter"
	@echo "                   then open the printed link and press its button (curl: see the README)"
	@echo "stop:              Ctrl-C"
	@echo
	@# Ctrl-C (or SIGTERM to the group) stops all three; honcho's exit status then is not an error.
	@# honcho sets PORT for every process, as a PaaS does: the --bind keeps the API on loopback
	PATH="$(CURDIR)/$(BIN):$$PATH" GUNICORN_CMD_ARGS="--bind 127.0.0.1:$(DOCSHIFT_PORT)" \
		$(BIN)/honcho start --no-prefix -f Procfile web worker objects 2>&1 || true

# a conversion node: DOCSHIFT_QUEUE_URL (the coordinator's Redis, with a password unless on loopback) and
# DOCSHIFT_QUEUE_KEY (the coordinator's) must be set; worker.py refuses a Redis open to anyone
node: install
	@[ -n "$$DOCSHIFT_QUEUE_URL" ] || { echo "set DOCSHIFT_QUEUE_URL=redis://:password@host:port/db (the coordinator's queue)"; exit 1; }
	$(BIN)/python worker.py node

test: install test-system
	$(BIN)/ruff check .
	$(BIN)/pytest

install: system $(VENV)/.installed

# Debian packages, only what is missing (apt needs root)
system: office
	@$(MAKE) --no-print-directory apt PACKAGES="$(SYSTEM_PACKAGES)"
	@$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || $(MAKE) --no-print-directory apt PACKAGES=python3-venv

test-system:
	@$(MAKE) --no-print-directory apt PACKAGES="$(TEST_PACKAGES)"

# LibreOffice: with LIBREOFFICE=backports, the backports suite is added to apt's sources (the same
# mirror as the system's own Debian sources) and LibreOffice comes from it; nothing else is upgraded.
office:
	@if [ "$(LIBREOFFICE)" = backports ] && ! dpkg-query -W -f='$${Version}' libreoffice-core 2>/dev/null | grep -q bpo; then \
		if [ "$$(id -u)" != 0 ]; then echo "as root, add bookworm-backports and run: apt-get install -t bookworm-backports $(OFFICE_PACKAGES)"; exit 1; fi; \
		. /etc/os-release; suite="$$VERSION_CODENAME-backports"; \
		if ! grep -rqs "$$suite" /etc/apt/sources.list /etc/apt/sources.list.d/; then \
			echo "adding $$suite to apt's sources"; \
			awk -v RS= -v ORS='\n\n' -v c="$$VERSION_CODENAME" '$$0 ~ "Suites: "c"( |\n|$$)"' /etc/apt/sources.list.d/debian.sources \
				| grep -v '^#' | sed "s/^Suites:.*/Suites: $$suite/" > /etc/apt/sources.list.d/docshift-backports.sources; \
		fi; \
		echo "installing LibreOffice from $$suite"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends -t "$$suite" $(OFFICE_PACKAGES); \
	else \
		$(MAKE) --no-print-directory apt PACKAGES="$(OFFICE_PACKAGES)"; \
	fi

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
