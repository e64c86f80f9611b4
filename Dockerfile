# syntax=docker/dockerfile:1
# jobdash: one image for web (gunicorn), worker, beat, migrate and kubesim.
#   docker build -t jobdash .      (docker compose up builds it for you)
# The dependencies are installed into a virtualenv in a build stage; the final stage
# copies only that virtualenv and the source: no compiler, no pip cache, no build files.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml ./
# Only the dependencies that pyproject.toml lists (the source is copied, not installed,
# so templates/, static/ and examples/ stay beside the code).
RUN python -m venv /opt/venv \
    && python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > requirements.txt \
    && /opt/venv/bin/pip install --no-cache-dir -r requirements.txt

FROM ${PYTHON_IMAGE}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DJANGO_SETTINGS_MODULE=jobdash.settings \
    STATIC_ROOT=/app/staticfiles \
    JOBDASH_VAR_DIR=/tmp/jobdash
# openssl generates the self-signed webhook certificate at start (docker compose).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends openssl \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 jobdash \
    && useradd --system --uid 10001 --gid jobdash --home-dir /app --shell /usr/sbin/nologin jobdash \
    && install -d -o jobdash -g jobdash -m 0750 /tls
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY manage.py pyproject.toml ./
COPY jobdash ./jobdash
COPY queueing ./queueing
COPY kubesim ./kubesim
COPY webhooks ./webhooks
COPY templates ./templates
COPY static ./static
COPY examples ./examples
COPY deploy ./deploy
RUN python manage.py collectstatic --noinput --verbosity 0 \
    && chmod 0755 deploy/docker/entrypoint.sh
USER 10001:10001
EXPOSE 8000 8443 9443 6443
ENTRYPOINT ["/app/deploy/docker/entrypoint.sh"]
CMD ["web"]
