#!/bin/sh
# The jobdash image's entrypoint: one image, one process per container.
#
#   web       gunicorn jobdash.wsgi: UI, API, admin and /healthz; over TLS when
#             JOBDASH_TLS_CERT is set (a self-signed certificate is generated here at start
#             when JOBDASH_TLS_SELF_SIGNED=true, as docker compose does)
#   webhook   gunicorn webhooks.wsgi: the admission webhook alone, on its own port
#             (WEBHOOK_PORT, 9443), TLS only, and only for callers whose client certificate
#             JOBDASH_WEBHOOK_CLIENT_CA issued (the API server's): no certificate, no review
#   certs     generate the webhook's certificates into a directory (docker compose; in
#             Kubernetes cert-manager issues them)
#   self-signed CERT KEY   a self-signed certificate for JOBDASH_TLS_SANS, kept if present
#             (the embedded stack's simulated API server)
#   migrate   apply database migrations, then exit (Kubernetes: the Job jobdash-migrate;
#             compose: the one-shot service `migrate`)
#   wait-for-migrations   wait until every migration of this image is applied (migrate
#             --check every 5 s), then exit: the Deployments' init container
#   worker    celery worker: admission cycles and the cluster tracker
#   beat      celery beat: the elected leader emits cycles; every tick touches
#             /tmp/jobdash-beat-heartbeat (its liveness probe reads the age)
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

# prometheus_client's multiprocess mode (gunicorn's workers export together): its
# directory must exist and hold nothing of a previous run.
metrics_dir() {
    dir=${PROMETHEUS_MULTIPROC_DIR:-}
    if [ -n "$dir" ]; then
        mkdir -p "$dir"
        find "$dir" -mindepth 1 -delete
    fi
}

web() {
    metrics_dir
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

webhook() {
    cert=${JOBDASH_WEBHOOK_TLS_CERT:-} key=${JOBDASH_WEBHOOK_TLS_KEY:-} ca=${JOBDASH_WEBHOOK_CLIENT_CA:-}
    if [ -z "$cert" ] || [ -z "$key" ] || [ -z "$ca" ]; then
        echo "entrypoint: the webhook listener needs JOBDASH_WEBHOOK_TLS_CERT, JOBDASH_WEBHOOK_TLS_KEY and" \
            "JOBDASH_WEBHOOK_CLIENT_CA (the CA of the API server's client certificate): it answers only the API server" >&2
        exit 2
    fi
    for file in "$cert" "$key" "$ca"; do
        if [ ! -s "$file" ]; then
            echo "entrypoint: $file is missing or empty" >&2
            exit 2
        fi
    done
    metrics_dir
    # --cert-reqs 2 is ssl.CERT_REQUIRED: the handshake fails without a certificate from $ca.
    exec gunicorn --config "$(dirname "$0")/gunicorn.conf.py" --bind "0.0.0.0:${WEBHOOK_PORT:-9443}" \
        --workers "${WEBHOOK_CONCURRENCY:-2}" --threads "${GUNICORN_THREADS:-8}" --worker-class gthread \
        --timeout "${GUNICORN_TIMEOUT:-30}" --keep-alive "${GUNICORN_KEEPALIVE:-75}" \
        --worker-tmp-dir "${GUNICORN_TMP_DIR:-/tmp}" --error-logfile - \
        --certfile "$cert" --keyfile "$key" --ca-certs "$ca" --cert-reqs 2 \
        webhooks.wsgi:application
}

# The webhook's certificates where no cert-manager runs (docker compose), kept if present:
#   webhook.crt/.key      serving certificate for JOBDASH_WEBHOOK_TLS_SANS, self-signed: it
#                         is its own CA, the webhook configuration's caBundle
#   client-ca.crt/.key    the CA the webhook trusts for its callers
#   apiserver.crt/.key    the API server's client certificate from it (kubesim presents it:
#                         deploy/compose/admission.yaml)
certs() {
    dir=${1:-/tls}
    mkdir -p "$dir"
    if [ ! -s "$dir/webhook.crt" ]; then
        JOBDASH_TLS_SANS=${JOBDASH_WEBHOOK_TLS_SANS:-DNS:jobdash-webhook.jobdash.svc,DNS:localhost,IP:127.0.0.1} \
            self_signed "$dir/webhook.crt" "$dir/webhook.key"
    fi
    if [ ! -s "$dir/apiserver.crt" ]; then
        (
            umask 077
            openssl req -x509 -newkey rsa:2048 -sha256 -nodes -days "${JOBDASH_TLS_DAYS:-365}" \
                -subj "/CN=jobdash webhook client CA" -addext "basicConstraints=critical,CA:TRUE" \
                -addext "keyUsage=critical,keyCertSign,cRLSign" \
                -keyout "$dir/client-ca.key" -out "$dir/client-ca.crt" 2>/dev/null
            openssl req -new -newkey rsa:2048 -sha256 -nodes -subj "/CN=kube-apiserver" \
                -keyout "$dir/apiserver.key" -out "$dir/apiserver.csr" 2>/dev/null
            printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' \
                >"$dir/client.ext"
            openssl x509 -req -sha256 -days "${JOBDASH_TLS_DAYS:-365}" -in "$dir/apiserver.csr" \
                -CA "$dir/client-ca.crt" -CAkey "$dir/client-ca.key" -CAcreateserial \
                -extfile "$dir/client.ext" -out "$dir/apiserver.crt" 2>/dev/null
            rm -f "$dir/apiserver.csr" "$dir/client.ext" "$dir/client-ca.srl"
        )
        chmod 0644 "$dir/client-ca.crt" "$dir/apiserver.crt"
        echo "entrypoint: generated the webhook's client CA and the API server's client certificate in $dir" >&2
    fi
}

# Exits once the database has every migration this image knows (the migrate Job has run).
# It never migrates itself: two web replicas must not migrate at once.
wait_for_migrations() {
    until python manage.py migrate --check --noinput >/dev/null; do
        echo "entrypoint: waiting for the migrations (the jobdash-migrate Job) or the database" >&2
        sleep 5
    done
}

command=${1:-web}
[ "$#" -gt 0 ] && shift
case "$command" in
    web) web ;;
    webhook) webhook ;;
    certs) certs "$@" ;;
    self-signed) [ -s "$1" ] || self_signed "$1" "$2" ;;
    migrate) exec python manage.py migrate --noinput "$@" ;;
    wait-for-migrations) wait_for_migrations ;;
    worker) exec celery -A jobdash worker -Q celery --concurrency 1 --loglevel "${LOG_LEVEL:-INFO}" "$@" ;;
    # HeartbeatScheduler: LeaderGatedScheduler (settings) plus the file its probes read
    beat) exec celery -A jobdash beat -S jobdash.dispatch.management.commands.beat_heartbeat:HeartbeatScheduler \
        --loglevel "${LOG_LEVEL:-INFO}" "$@" ;;
    kubesim)
        exec python -m kubesim serve --host 0.0.0.0 --port "${KUBESIM_PORT:-6443}" \
            --config "${KUBESIM_CONFIG:-deploy/compose/kubesim.yaml}" \
            --kubeconfig-out "${KUBESIM_KUBECONFIG_OUT:-/tmp/kubesim/kubeconfig}" "$@" ;;
    *) exec "$command" "$@" ;;
esac
