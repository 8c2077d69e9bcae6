# The README's two commands: `make run` and `make test`. Both install what is missing first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export DOCSHIFT_PORT ?= 8000
export DOCSHIFT_DATA_DIR ?= var
# what `make run`'s key command needs to carry when they are not the defaults: the link's port, and the data dir
# whose secret signs it
KEY_SETTINGS := $(if $(filter-out 8000,$(DOCSHIFT_PORT)),DOCSHIFT_PORT=$(DOCSHIFT_PORT) )$(if $(filter-out \
	var,$(DOCSHIFT_DATA_DIR)),DOCSHIFT_DATA_DIR='$(DOCSHIFT_DATA_DIR)' )
# LibreOffice 25.2 from Debian's bookworm-backports by default (faster, and it fixes 7.4's broken
# .xlsx of some files: see the README); LIBREOFFICE=stable keeps Debian 12's own 7.4.
LIBREOFFICE ?= backports
OFFICE_PACKAGES := python3-uno libreoffice-core libreoffice-writer libreoffice-calc libreoffice-impress
# GStreamer's base plugins: without playbin, LibreOffice's media player waits 10 s per sound or video of a
# presentation for a preroll that never comes (see docs/how-it-runs.md)
SYSTEM_PACKAGES := fonts-liberation2 fonts-crosextra-carlito fonts-crosextra-caladea fonts-dejavu-core bubblewrap \
	gstreamer1.0-plugins-base mount
# the registration page is tested in a real browser; conversion nodes are tested on a real Redis
TEST_PACKAGES := chromium redis-server

.PHONY: run node test test-fast install system office test-system apt pages image base-image image-run image-test container-system

# The container image (see the README's "Containers"), built, run and tested with podman
IMAGE ?= docshift:latest
DOCSHIFT_S3_PORT ?= 8333
CONTAINER_PACKAGES := podman runc netavark aardvark-dns iptables uidmap slirp4netns mmdebstrap
# podman reads only this file, which `make` writes: runc and cgroupfs run on cgroups v1 and v2, and
# without podman's default ulimits, which a host without CAP_SYS_RESOURCE refuses to raise
PODMAN_CONF := .podman/containers.conf
PODMAN := CONTAINERS_CONF=$(CURDIR)/$(PODMAN_CONF) podman
# what LibreOffice's sandbox needs in a podman container (compose.yaml has Docker's and podman's)
SANDBOX_OPTIONS := --security-opt seccomp=deploy/container/seccomp.json --security-opt 'unmask=/proc/*' \
	--security-opt apparmor=unconfined --security-opt no-new-privileges --cap-drop ALL

run: install pages
	@$(BIN)/flask --app app init-db
	@rm -rf "$(DOCSHIFT_DATA_DIR)/metrics"  # per-process metric files of an earlier run
	@echo
	@echo "docshift API:      http://127.0.0.1:$(DOCSHIFT_PORT)   (DOCSHIFT_URL for the client; health: /healthz)"
	@echo "its reference:     http://127.0.0.1:$(DOCSHIFT_PORT)/docs"
	@echo "get an API key:    $(KEY_SETTINGS)$(BIN)/flask --app app marketplace issue-token --customer me --plan starter"
	@echo "                   then open the printed link and press its button (curl: see the README)"
	@echo "stop:              Ctrl-C"
	@echo
	@# the Procfile's three processes side by side, as the container runs them (docshift.allinone): each writes
	@# to this terminal itself, and Ctrl-C (or a SIGTERM to make, which make passes on to it: hence the exec)
	@# drains them in order, the object store last. A process that stops by itself (the worker's 78: no sandbox
	@# here) ends make run with its status. The --bind keeps the API on loopback whatever PORT the shell has.
	PATH="$(CURDIR)/$(BIN):$$PATH" GUNICORN_CMD_ARGS="--bind 127.0.0.1:$(DOCSHIFT_PORT)" \
		exec $(BIN)/python -m docshift.allinone web worker objects

# a conversion node: DOCSHIFT_QUEUE_URL (the coordinator's Redis, with a password unless on loopback) and
# DOCSHIFT_QUEUE_KEY (the coordinator's) must be set; worker.py refuses a Redis open to anyone
node: install pages
	@[ -n "$$DOCSHIFT_QUEUE_URL" ] || { echo "set DOCSHIFT_QUEUE_URL=redis://:password@host:port/db (the coordinator's queue)"; exit 1; }
	$(BIN)/python worker.py node

# The suite in TEST_WORKERS pytest processes (pytest-xdist), a test file each at a time, each with its own store
# and LibreOffice: much of the suite waits (outages, deadlines, restarts), so two share two cores well (724 s in one
# process, 410 s in two, on the same machine in one hour). TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 2
test: install test-system
	$(BIN)/ruff check .
	$(BIN)/python tests/typecheck.py
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

# the tests that start no service, SeaweedFS, Redis, podman or chromium (tests/conftest.py marks the others
# slow); some make their files with a short soffice run or try the sandbox, so LibreOffice and bubblewrap too
test-fast: install
	$(BIN)/ruff check .
	$(BIN)/python tests/typecheck.py
	$(BIN)/pytest -m "not slow"

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
			new=$$(mktemp); rm -f /etc/apt/sources.list.d/docshift-backports.*; \
			if [ -f /etc/apt/sources.list.d/debian.sources ]; then kind=sources; \
				awk -v RS= -v ORS='\n\n' -v c="$$VERSION_CODENAME" '$$0 ~ "Suites: "c"( |\n|$$)"' /etc/apt/sources.list.d/debian.sources \
					| grep -v '^#' | sed "s/^Suites:.*/Suites: $$suite/" > $$new; \
			else kind=list; \
				awk -v c="$$VERSION_CODENAME" '$$1 == "deb" { for (i = 2; i <= NF; i++) if ($$i == c) { $$i = c "-backports"; print; next } }' \
					/etc/apt/sources.list > $$new; \
			fi; \
			if [ ! -s $$new ]; then rm -f $$new; \
				echo "no $$VERSION_CODENAME source in apt's sources to add $$suite beside: add it, or use LIBREOFFICE=stable"; exit 1; fi; \
			chmod 644 $$new; mv $$new /etc/apt/sources.list.d/docshift-backports.$$kind; \
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

# the kernel's 64 KB folios for the mappings that ask for them: LibreOffice's children ask for their heaps,
# and spend about 10 ms less CPU a file (docs/how-it-runs.md); as root, on a kernel that has them (6.8 or later),
# where they are off. It is the running kernel's setting: deploy/systemd/docshift-pages.conf keeps it at boot.
THP_64K := /sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled
pages:
	@if [ -w $(THP_64K) ] && grep -q '\[never\]' $(THP_64K) && (echo madvise > $(THP_64K)) 2>/dev/null; then \
		echo "kernel: 64 KB folios for the processes that ask for them (madvise)"; fi

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# docshift:latest from the Dockerfile, with nothing pulled from a registry: without a
# debian:bookworm-slim image, `base-image` makes one first. pip reaches its index as the host's pip does
# (the index and CA bundle of its configuration; the bundle is mounted for the build, not copied).
image: container-system $(PODMAN_CONF)
	@$(PODMAN) image exists debian:bookworm-slim || $(MAKE) --no-print-directory base-image
	@set --; index=$${PIP_INDEX_URL:-$$($(PYTHON) -m pip config get global.index-url 2>/dev/null)}; \
	case "$$index" in http://*|https://*) set -- --build-arg "PIP_INDEX_URL=$$index";; esac; \
	cert=$${PIP_CERT:-$$($(PYTHON) -m pip config get global.cert 2>/dev/null)}; \
	[ -f "$$cert" ] && set -- "$$@" --volume "$$cert:/run/pip-cert.pem:ro" --build-arg PIP_CERT=/run/pip-cert.pem; \
	echo "building $(IMAGE)"; \
	$(PODMAN) build --pull=never --format docker "$$@" -t $(IMAGE) .
	@$(PODMAN) image prune -f >/dev/null  # the build it replaced

# debian:bookworm-slim made by mmdebstrap from the host's own Debian sources (the Dockerfile's
# backports come from them too), with the slim image's dpkg excludes
base-image: container-system $(PODMAN_CONF)
	@echo "making debian:bookworm-slim with mmdebstrap from this machine's apt sources"
	@sources=/etc/apt/sources.list.d/debian.sources; [ -f "$$sources" ] || sources=/etc/apt/sources.list; \
	mmdebstrap --quiet --variant=minbase --format=tar \
		--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
		--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/groff/*' \
		--dpkgopt='path-exclude=/usr/share/lintian/*' \
		--customize-hook='cd "$$1/etc/apt/sources.list.d" && for f in 0000*; do [ -e "$$f" ] && mv "$$f" "$${f#0000}"; done; true' \
		bookworm .podman/base.tar "$$sources" \
		&& $(PODMAN) import --change 'CMD ["bash"]' .podman/base.tar debian:bookworm-slim; \
	status=$$?; rm -f .podman/base.tar; exit $$status

# the all-in-one container, as the README runs it, in the foreground until Ctrl-C (which drains)
image-run: image
	$(PODMAN) run --rm --pull never --name docshift -p $(DOCSHIFT_PORT):8000 -p $(DOCSHIFT_S3_PORT):8333 -v docshift:/data \
		-e DOCSHIFT_S3_PUBLIC_URL=http://127.0.0.1:$(DOCSHIFT_S3_PORT) \
		-e DOCSHIFT_BASE_URL=http://127.0.0.1:$(DOCSHIFT_PORT) \
		--stop-timeout 150 $(SANDBOX_OPTIONS) $(IMAGE)

# the image's roles started as compose.yaml starts them, used from the host; leaves nothing behind
image-test: install image
	PODMAN_CONF="$(CURDIR)/$(PODMAN_CONF)" IMAGE=$(IMAGE) SANDBOX_OPTIONS="$(SANDBOX_OPTIONS)" \
		$(BIN)/python tests/image/run.py

container-system:
	@$(MAKE) --no-print-directory apt PACKAGES="$(CONTAINER_PACKAGES)"

$(PODMAN_CONF): Makefile
	@mkdir -p $(@D)
	@printf '%s\n' '# written by make (see the Makefile): what podman needs on any host this builds on' \
		'[containers]' 'default_ulimits = []' '[engine]' 'runtime = "runc"' 'cgroup_manager = "cgroupfs"' > $@
