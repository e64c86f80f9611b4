#!/bin/sh
# The jobdash image's entrypoint: one image, one process per container.
#
#   web       gunicorn jobdash.wsgi: UI, API, admin, /healthz and the admission webhook;
#             over TLS when JOBDASH_TLS_CERT is set (cert-manager's secret in Kubernetes,
#             or a self-signed certificate generated here at start when
#             JOBDASH_TLS_SELF_SIGNED=true, as docker compose does)
#   migrate   apply database migrations, then exit (before web starts)
#   worker    celery worker: admission cycles and the cluster tracker
#   beat      celery beat: the elected leader emits cycles
#   kubesim   the simulated cluster (docker compose's stand-in for Kubernetes)
#   *         anything else is run as given
# Configuration comes only from the environment: docs/operations.md.
set -eu

self_signed() {
    cert=$1 key=$2
    days=${JOBDASH_TLS_DAYS:-365}
    sans=${JOBDASH_TLS_SANS:-DNS:localhost,IP:127.0.0.1}
    cn=$(printf '%s' "$sans" | sed 's/^[A-Z]*://; s/,.*//')
    mkdir -p "$(dirname "$cert")" "$(dirname "$key")"
    umask 077
    openssl req -x509 -newkey rsa:2048 -sha256 -nodes -days "$days" \
        -subj "/CN=$cn" -addext "subjectAltName=$sans" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -keyout "$key.tmp" -out "$cert.tmp" 2>/dev/null
    chmod 0644 "$cert.tmp"
    mv "$key.tmp" "$key"
    mv "$cert.tmp" "$cert"
    echo "entrypoint: generated a self-signed certificate for $sans in $cert" >&2
}

web() {
    set -- --config "$(dirname "$0")/gunicorn.conf.py" --bind "0.0.0.0:${PORT:-8000}" \
        --workers "${WEB_CONCURRENCY:-2}" --threads "${GUNICORN_THREADS:-8}" --worker-class gthread \
        --timeout "${GUNICORN_TIMEOUT:-30}" --keep-alive "${GUNICORN_KEEPALIVE:-75}" \
        --worker-tmp-dir "${GUNICORN_TMP_DIR:-/tmp}" --error-logfile -
    access_log=${GUNICORN_ACCESS_LOG--}
    if [ -n "$access_log" ]; then
        set -- "$@" --access-logfile "$access_log"
    fi
    cert=${JOBDASH_TLS_CERT:-}
    key=${JOBDASH_TLS_KEY:-}
    if [ -n "$cert" ]; then
        if [ -z "$key" ]; then
            echo "entrypoint: JOBDASH_TLS_CERT is set but JOBDASH_TLS_KEY is not" >&2
            exit 2
        fi
        if [ ! -s "$cert" ] || [ ! -s "$key" ]; then
            if [ "${JOBDASH_TLS_SELF_SIGNED:-false}" = "true" ]; then
                self_signed "$cert" "$key"
            else
                echo "entrypoint: $cert or $key is missing (set JOBDASH_TLS_SELF_SIGNED=true to generate one)" >&2
                exit 2
            fi
        fi
        set -- "$@" --certfile "$cert" --keyfile "$key"
    fi
    exec gunicorn "$@" jobdash.wsgi:application
}

command=${1:-web}
[ "$#" -gt 0 ] && shift
case "$command" in
    web) web ;;
    migrate) exec python manage.py migrate --noinput "$@" ;;
    worker) exec celery -A jobdash worker -Q celery --concurrency 1 --loglevel "${LOG_LEVEL:-INFO}" "$@" ;;
    beat) exec celery -A jobdash beat --loglevel "${LOG_LEVEL:-INFO}" "$@" ;;
    kubesim)
        exec python -m kubesim serve --host 0.0.0.0 --port "${KUBESIM_PORT:-6443}" \
            --config "${KUBESIM_CONFIG:-deploy/compose/kubesim.yaml}" \
            --kubeconfig-out "${KUBESIM_KUBECONFIG_OUT:-/tmp/kubesim/kubeconfig}" "$@" ;;
    *) exec "$command" "$@" ;;
esac
