"""Settings for v10r: one file, every environment variable read at the top.

Local development needs nothing but `DJANGO_DEBUG=1` (which `make run` sets); production
sets `DJANGO_SECRET_KEY`, `DJANGO_ALLOWED_HOSTS` and usually `DATABASE_URL`.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP
from django.utils.translation import gettext_lazy as _

# The retry arithmetic is pure (no Django): its defaults are the settings' defaults.
from notifications import backoff
from v10r import embedded_postgresql, logs, platform

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_bool(name: str, *, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use 1 or 0.")


def _env_int(name: str, *, default: int, minimum: int = 0, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number.") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r} must be at least {minimum}.")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name}={raw!r} must be at most {maximum}.")
    return value


def _env_float(name: str, *, default: float, minimum: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number.") from None
    if not value >= minimum:  # also rejects NaN
        raise ImproperlyConfigured(f"{name}={raw!r} must be at least {minimum:g}.")
    return value


def _env_list(name: str, *, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


# --- Environment ------------------------------------------------------------------------------
DEBUG = _env_bool("DJANGO_DEBUG", default=False)

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is required when DJANGO_DEBUG is not 1. "
            'Generate one with: python -c "import secrets; print(secrets.token_urlsafe(50))"'
        )
    # Only ever used with DEBUG on, on a developer's machine.
    SECRET_KEY = "django-insecure-v10r-development-only"

ALLOWED_HOSTS = _env_list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = _env_list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

DATABASE_URL = os.environ.get("DATABASE_URL", "").strip()
# Where the embedded PostgreSQL keeps its data when DATABASE_URL is unset (V10R_PGDATA,
# default `.pgdata`, git-ignored).
EMBEDDED_PGDATA = embedded_postgresql.pgdata_from_environment()

STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT", BASE_DIR / "staticfiles"))

# Behind a TLS-terminating proxy, set DJANGO_SECURE_PROXY_SSL_HEADER=1.
SECURE_SSL_REDIRECT = _env_bool("DJANGO_SECURE_SSL_REDIRECT", default=not DEBUG)
_PROXY_SSL = _env_bool("DJANGO_SECURE_PROXY_SSL_HEADER", default=False)
SECURE_HSTS_SECONDS = _env_int("DJANGO_HSTS_SECONDS", default=0 if DEBUG else 31_536_000)

# Email, through Django's MAILERS. The variables keep the familiar EMAIL_* names; EMAIL_TIMEOUT
# bounds every socket operation and, in the email channel, the whole send.
_EMAIL_USE_TLS = _env_bool("EMAIL_USE_TLS", default=False)
_EMAIL_USE_SSL = _env_bool("EMAIL_USE_SSL", default=False)
if _EMAIL_USE_TLS and _EMAIL_USE_SSL:
    raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL are exclusive; set only one.")
MAILERS = {
    "default": {
        "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "OPTIONS": {
            "host": os.environ.get("EMAIL_HOST", "localhost"),
            "port": _env_int("EMAIL_PORT", default=25, minimum=1),
            "username": os.environ.get("EMAIL_HOST_USER", ""),
            "password": os.environ.get("EMAIL_HOST_PASSWORD", ""),
            "use_tls": _EMAIL_USE_TLS,
            "use_ssl": _EMAIL_USE_SSL,
            "timeout": _env_float("EMAIL_TIMEOUT", default=10.0, minimum=0.1),
        },
    },
}
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "v10r <notifications@localhost>")

# The outbox's queue worker (notifications/drain.py); the system checks in
# notifications/checks.py refuse a lease that a full batch could outlive.
DELIVERY_BATCH_SIZE = _env_int("DELIVERY_BATCH_SIZE", default=25, minimum=1)
DELIVERY_CONCURRENCY = _env_int("DELIVERY_CONCURRENCY", default=16, minimum=1)
DELIVERY_LEASE_SECONDS = _env_float("DELIVERY_LEASE_SECONDS", default=300.0, minimum=1.0)
DELIVERY_INTERVAL_SECONDS = _env_float("DELIVERY_INTERVAL_SECONDS", default=15.0, minimum=0.1)
DELIVERY_MAX_ATTEMPTS = _env_int("DELIVERY_MAX_ATTEMPTS", default=backoff.MAX_ATTEMPTS, minimum=1)
# Channel name -> class path. Code that enqueues may only name these.
_CHANNEL_CLASSES = {
    "email": "notifications.channels.email.EmailChannel",
    "telegram": "notifications.channels.telegram.TelegramChannel",
    "discord": "notifications.channels.discord.DiscordChannel",
    "webhook": "notifications.channels.webhook.WebhookChannel",
    "demo": "notifications.channels.demo.DemoChannel",
}
# V10R_CHANNELS picks which of them this site runs (comma-separated; default all): a site with
# no Telegram bot leaves telegram out instead of carrying a channel that can only fail.
_chosen = [n.strip() for n in os.environ.get("V10R_CHANNELS", "").split(",") if n.strip()]
_unknown = sorted(set(_chosen) - set(_CHANNEL_CLASSES))
if _unknown:
    raise ImproperlyConfigured(
        f"V10R_CHANNELS names unknown channels {', '.join(_unknown)}; "
        f"known: {', '.join(_CHANNEL_CLASSES)}."
    )
if _chosen and "demo" not in _chosen:
    raise ImproperlyConfigured(
        "V10R_CHANNELS must include demo: the workers page's Try it uses it."
    )
DELIVERY_CHANNELS = {
    name: path for name, path in _CHANNEL_CLASSES.items() if not _chosen or name in _chosen
}
# The HTTP channels (notifications/channels/http.py): a connection must open within the first,
# and a whole send (name lookup, TLS, request, reply) finish within the second.
DELIVERY_HTTP_CONNECT_TIMEOUT = _env_float(
    "DELIVERY_HTTP_CONNECT_TIMEOUT", default=5.0, minimum=0.1
)
DELIVERY_HTTP_TOTAL_TIMEOUT = _env_float("DELIVERY_HTTP_TOTAL_TIMEOUT", default=10.0, minimum=0.1)
if DELIVERY_HTTP_CONNECT_TIMEOUT > DELIVERY_HTTP_TOTAL_TIMEOUT:
    raise ImproperlyConfigured(
        "DELIVERY_HTTP_CONNECT_TIMEOUT is longer than DELIVERY_HTTP_TOTAL_TIMEOUT, which bounds "
        "the whole send, connecting included."
    )
# Bot tokens; unset, that channel fails its rows permanently (TELEGRAM_NO_TOKEN,
# DISCORD_NO_TOKEN) and `manage.py check` warns. The base URLs point tests at loopback.
TELEGRAM_BOT_TOKEN = os.environ.get("TELEGRAM_BOT_TOKEN", "").strip()
TELEGRAM_API_BASE_URL = os.environ.get("TELEGRAM_API_BASE_URL", "https://api.telegram.org")
DISCORD_BOT_TOKEN = os.environ.get("DISCORD_BOT_TOKEN", "").strip()
DISCORD_API_BASE_URL = os.environ.get("DISCORD_API_BASE_URL", "https://discord.com/api/v10")
# Webhooks refuse every private, loopback and link-local address (SSRF); 1 lets them reach
# loopback, for tests and local development only.
DELIVERY_WEBHOOK_ALLOW_LOOPBACK = _env_bool("DELIVERY_WEBHOOK_ALLOW_LOOPBACK", default=False)
# Retention (notifications/retention.py, manage.py prune_outbox, and the drain loop's idle
# ticks): finished deliveries are deleted once queued this many days ago.
# At most a century: a longer keep is "forever", and would overflow the date arithmetic.
OUTBOX_KEEP_SENT_DAYS = _env_int("OUTBOX_KEEP_SENT_DAYS", default=30, minimum=1, maximum=36_500)
OUTBOX_KEEP_FINISHED_DAYS = _env_int(
    "OUTBOX_KEEP_FINISHED_DAYS", default=90, minimum=1, maximum=36_500
)
if OUTBOX_KEEP_FINISHED_DAYS < OUTBOX_KEEP_SENT_DAYS:
    raise ImproperlyConfigured(
        f"OUTBOX_KEEP_FINISHED_DAYS={OUTBOX_KEEP_FINISHED_DAYS} is shorter than "
        f"OUTBOX_KEEP_SENT_DAYS={OUTBOX_KEEP_SENT_DAYS}; failed and dead deliveries are kept "
        "at least as long as sent ones."
    )
OUTBOX_PRUNE_BATCH = _env_int("OUTBOX_PRUNE_BATCH", default=1000, minimum=1, maximum=100_000)

# /metrics (notifications/metrics.py): open to a bearer token, or to clients in the listed
# networks (comma-separated, e.g. 10.0.0.0/8,127.0.0.1/32; the client address as
# V10R_TRUSTED_PROXIES defines it). Neither set: the endpoint does not exist (404).
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "").strip()
if METRICS_TOKEN and len(METRICS_TOKEN) < 32:
    raise ImproperlyConfigured("METRICS_TOKEN must be at least 32 characters long.")


def _networks(name: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    networks = []
    for part in os.environ.get(name, "").split(","):
        if not part.strip():
            continue
        try:
            networks.append(ipaddress.ip_network(part.strip()))
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}: {part.strip()!r} is not a network; use CIDR, e.g. 10.0.0.0/8."
            ) from None
    return networks


METRICS_ALLOWED_NETWORKS = _networks("METRICS_ALLOWED_NETWORKS")

# The service worker (pwa/). 0 serves a worker that removes itself and the site's caches from
# every browser that installed the real one: the way back if a deploy's worker misbehaves.
SERVICE_WORKER_ENABLED = _env_bool("SERVICE_WORKER_ENABLED", default=True)

# Bearer secret for /cron/drain; unset, the endpoint does not exist (404). A guessable
# secret would let anyone drive the drain, so a short one stops start-up.
CRON_SECRET = os.environ.get("CRON_SECRET", "").strip()
CRON_SECRET_MIN_LENGTH = 32
if CRON_SECRET and len(CRON_SECRET) < CRON_SECRET_MIN_LENGTH:
    raise ImproperlyConfigured(
        f"CRON_SECRET has {len(CRON_SECRET)} characters; use at least "
        f"{CRON_SECRET_MIN_LENGTH}. Generate one with: "
        'python -c "import secrets; print(secrets.token_urlsafe(32))"'
    )
# How long one /cron/drain request may spend draining: below the proxy's read timeout
# (nginx's proxy_read_timeout, 60 s in deploy/nginx.conf; a serverless host has its own), so
# the request answers instead of being cut off.
CRON_DRAIN_SECONDS = _env_float("CRON_DRAIN_SECONDS", default=20.0, minimum=1.0)

# How many reverse proxies of ours stand in front of the app. 0 (the default): the peer
# address is the client. N: the client is the N-th address from the right of
# X-Forwarded-For (v10r/clients.py). Never more than the proxies really there, or any client
# could choose its own address by sending the header.
V10R_TRUSTED_PROXIES = _env_int("V10R_TRUSTED_PROXIES", default=0, minimum=0)

# Where this deployment runs; overrides the detection in v10r/platform.py.
V10R_PLATFORM = os.environ.get("V10R_PLATFORM", "").strip().lower()
if V10R_PLATFORM and V10R_PLATFORM not in platform.PLATFORMS:
    raise ImproperlyConfigured(
        f"V10R_PLATFORM={V10R_PLATFORM!r} is not one of: {', '.join(platform.PLATFORMS)}."
    )

# --- Applications -----------------------------------------------------------------------------
INSTALLED_APPS = [
    "v10r.apps.AdminConfig",  # django.contrib.admin, with the Needs Attention count
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.humanize",
    # Before staticfiles, so runserver serves files the way WhiteNoise does in production.
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "v10r",
    "notifications",
    "showcases",
    "pwa",
]

MIDDLEWARE = [
    # Probes answer first: before the host check and the HTTPS redirect (v10r/health.py).
    "v10r.health.ProbeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    # Before anything that reads the body (the CSRF check reads POST).
    "v10r.middleware.RequestBodyLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "v10r.urls"
WSGI_APPLICATION = "v10r.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.csp",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "v10r.context_processors.languages",
                "pwa.context_processors.service_worker",
            ],
        },
    },
]

# --- Database ---------------------------------------------------------------------------------
if DATABASE_URL:
    _db = dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
    if _db["ENGINE"] != "django.db.backends.postgresql":
        # The claim needs real row locks (FOR UPDATE SKIP LOCKED): PostgreSQL only.
        raise ImproperlyConfigured(
            f"DATABASE_URL must point at PostgreSQL (postgres://…), not {_db['ENGINE']}."
        )
    # Django's PostgreSQL backend, plus introspection of the project's schemas.
    _db["ENGINE"] = "v10r.postgresql"
else:
    _db = {
        # Starts the private server in EMBEDDED_PGDATA on first connection; see the backend.
        "ENGINE": "v10r.embedded_postgresql",
        "NAME": "v10r",
        "USER": "postgres",
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
    }
# A server that never answers fails a connection attempt in seconds, not psycopg's 130 s
# default; a DATABASE_URL with ?connect_timeout= wins.
_db.setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Internationalisation ---------------------------------------------------------------------
LANGUAGE_CODE = "en"
LANGUAGES = [
    ("en", _("English")),
    ("ru", _("Russian")),
    ("de", _("German")),
]
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_I18N = True
USE_TZ = True
TIME_ZONE = "UTC"

# --- Static files -----------------------------------------------------------------------------
STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Hashed names, gzip/brotli twins, and ES-module imports rewritten to hashed names.
    "staticfiles": {"BACKEND": "v10r.storage.StaticFilesStorage"},
}

# --- Security ---------------------------------------------------------------------------------
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
if _PROXY_SSL:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# Joining the browsers' HSTS preload list is a decision about the whole domain, made by
# whoever owns it, not a default a code base should take for them.
SILENCED_SYSTEM_CHECKS = ["security.W021"]

SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:", "blob:"],
    # The palette demo spawns a module worker from our own origin; blob: keeps the door
    # open for an inline worker without a policy change.
    "worker-src": [CSP.SELF, "blob:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

# --- Auth -------------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "admin:login"

# Django's own upload limits stay at their defaults. Request bodies are refused by size
# before anything reads them (v10r/middleware.py): DATA_UPLOAD_MAX_MEMORY_SIZE for every view,
# except the few that declare a larger limit of their own, such as the palette's server lane.

LOGGING = logs.logging_config(
    json=_env_bool("V10R_LOG_JSON", default=False), level=os.environ.get("V10R_LOG_LEVEL", "INFO")
)
