# docshift in one image, every role: `docker run ... docshift` runs web, worker and objects
# together; `web`, `worker`, `objects`, `node` run one Procfile process; anything else runs as given
# (`flask --app app marketplace issue-token ...`). The sandbox needs runtime options: see the
# README's "Containers" section and compose.yaml.
FROM debian:bookworm-slim

# The system packages come from the Makefile's own `system` target, so the image holds what
# `make run` installs: LibreOffice 25.2 from the backports suite of the image's own apt sources,
# python3-uno, the fonts and bubblewrap. tini reaps and forwards signals; redis-server serves the
# compose file's two-tier profile from this same image.
COPY Makefile /src/Makefile
RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends make \
    && make -C /src --no-print-directory system \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tini redis-server \
    && apt-get purge -y -qq --auto-remove make \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log

# `make image` passes the host's pip index and CA bundle when its pip has them configured
ARG PIP_INDEX_URL=
ARG PIP_CERT=
ENV PATH=/opt/venv/bin:$PATH PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
# the dependencies first, in a layer of their own: a change of the code does not fetch them again
COPY pyproject.toml /src/pyproject.toml
RUN [ -n "${PIP_INDEX_URL:-}" ] || unset PIP_INDEX_URL; [ -n "${PIP_CERT:-}" ] || unset PIP_CERT; \
    python3 -m venv /opt/venv \
    && python3 -c 'import tomllib; print("\n".join(tomllib.load(open("/src/pyproject.toml", "rb"))["project"]["dependencies"]))' \
        > /src/requirements.txt \
    && pip install -q -r /src/requirements.txt
COPY . /src
RUN [ -n "${PIP_INDEX_URL:-}" ] || unset PIP_INDEX_URL; [ -n "${PIP_CERT:-}" ] || unset PIP_CERT; \
    pip install -q --no-deps /src \
    && mkdir /app && cp /src/app.py /src/worker.py /src/Procfile /app/ \
    && install -m 0755 /src/deploy/container/entrypoint /usr/local/bin/docshift-entrypoint \
    && install -m 0755 /src/deploy/container/healthcheck /usr/local/bin/docshift-healthcheck \
    && install -D -m 0644 /src/deploy/container/seccomp.json /usr/local/share/docshift/seccomp.json \
    && rm -rf /src

# not root: LibreOffice's sandbox then maps this uid, never root, to the sandbox's nobody
RUN groupadd --gid 10001 docshift \
    && useradd --no-log-init --uid 10001 --gid 10001 --home-dir /data --no-create-home --shell /usr/sbin/nologin docshift \
    && install -d -m 0700 -o docshift -g docshift /data
USER docshift
WORKDIR /app
ENV DOCSHIFT_DATA_DIR=/data PORT=8000 DOCSHIFT_S3_BIND=0.0.0.0
VOLUME /data
EXPOSE 8000 8333

# /healthz where this container serves the API (web, or all three); LibreOffice's self-test is in it
HEALTHCHECK --interval=30s --timeout=10s --start-period=90s --retries=3 CMD ["docshift-healthcheck"]
ENTRYPOINT ["tini", "--", "docshift-entrypoint"]
CMD ["all"]
