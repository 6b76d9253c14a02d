"""Settings for v10r: one file, every environment variable read at the top.

Local development needs nothing but `DJANGO_DEBUG=1` (which `make run` sets); production
sets `DJANGO_SECRET_KEY`, `DJANGO_ALLOWED_HOSTS` and usually `DATABASE_URL`.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.utils.csp import CSP
from django.utils.translation import gettext_lazy as _

# The retry arithmetic is pure (no Django): its defaults are the settings' defaults.
from core import logs, platform, vapid
from v10r import embedded_postgresql, environment
from v10r.environment import SettingError

BASE_DIR = Path(__file__).resolve().parent.parent


# --- Environment ------------------------------------------------------------------------------
# Every variable goes through v10r/environment.py: parsed, held to its bounds, and refused
# with one line (SettingError) that manage.py and gunicorn print alone.
DEBUG = environment.boolean("DJANGO_DEBUG", default=False)

SECRET_KEY = environment.text("DJANGO_SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise SettingError(
            "DJANGO_SECRET_KEY is required when DJANGO_DEBUG is not 1. "
            'Generate one with: python -c "import secrets; print(secrets.token_urlsafe(50))"'
        )
    # Only ever used with DEBUG on, on a developer's machine.
    SECRET_KEY = "django-insecure-v10r-development-only"

ALLOWED_HOSTS = environment.names(
    "DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"]
)
CSRF_TRUSTED_ORIGINS = environment.names("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])
# The site's own origin (https://v10r.example), for the links its emails carry. Unset, a link
# takes the scheme and host of the request that caused it: ALLOWED_HOSTS checks the host, but
# not the port, which the client chooses.
SITE_ORIGIN = environment.origin("SITE_ORIGIN")

DATABASE_URL = environment.text("DATABASE_URL")
# Where the embedded PostgreSQL keeps its data when DATABASE_URL is unset (V10R_PGDATA,
# default `.pgdata`, git-ignored).
EMBEDDED_PGDATA = embedded_postgresql.pgdata_from_environment()

STATIC_ROOT = Path(environment.text("DJANGO_STATIC_ROOT") or BASE_DIR / "staticfiles")

# HTTPS (docs/deploy.md): behind a TLS-terminating proxy, set DJANGO_SECURE_PROXY_SSL_HEADER=1;
# a plain-HTTP trial sets DJANGO_SECURE_SSL_REDIRECT=0, DJANGO_SECURE_COOKIES=0 and
# DJANGO_HSTS_SECONDS=0.
SECURE_SSL_REDIRECT = environment.boolean("DJANGO_SECURE_SSL_REDIRECT", default=not DEBUG)
# Secure cookies travel over HTTPS only; over plain HTTP a browser keeps neither the session nor
# the CSRF cookie, and no form (the admin's login) can be posted.
_SECURE_COOKIES = environment.boolean("DJANGO_SECURE_COOKIES", default=not DEBUG)
_PROXY_SSL = environment.boolean("DJANGO_SECURE_PROXY_SSL_HEADER", default=False)
SECURE_HSTS_SECONDS = environment.whole_number(
    "DJANGO_HSTS_SECONDS",
    default=0 if DEBUG else 31_536_000,
    minimum=0,
    maximum=63_072_000,
    why="two years",
)

# Email, through Django's MAILERS. The variables keep the familiar EMAIL_* names; EMAIL_TIMEOUT
# bounds every socket operation and, in the email channel, the whole send.
_EMAIL_USE_TLS = environment.boolean("EMAIL_USE_TLS", default=False)
_EMAIL_USE_SSL = environment.boolean("EMAIL_USE_SSL", default=False)
if _EMAIL_USE_TLS and _EMAIL_USE_SSL:
    raise SettingError("EMAIL_USE_TLS and EMAIL_USE_SSL are exclusive; set only one.")
MAILERS = {
    "default": {
        "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "OPTIONS": {
            "host": environment.text("EMAIL_HOST", default="localhost"),
            "port": environment.whole_number(
                "EMAIL_PORT", default=25, minimum=1, maximum=65_535, why="the largest TCP port"
            ),
            "username": os.environ.get("EMAIL_HOST_USER", ""),
            "password": os.environ.get("EMAIL_HOST_PASSWORD", ""),
            "use_tls": _EMAIL_USE_TLS,
            "use_ssl": _EMAIL_USE_SSL,
            "timeout": environment.number(
                "EMAIL_TIMEOUT", default=10.0, minimum=0.1, maximum=300, why="five minutes"
            ),
        },
    },
}
DEFAULT_FROM_EMAIL = environment.text(
    "DEFAULT_FROM_EMAIL", default="v10r <notifications@localhost>"
)

# A static audience's CSV import (recipients/audiences.py, import_csv): a file past either
# bound is refused before a member is added. The import streams in batches, so the bounds keep
# one staff request's time within reason, not its memory.
AUDIENCE_CSV_MAX_BYTES = environment.whole_number(
    "AUDIENCE_CSV_MAX_BYTES",
    default=50 * 1024 * 1024,
    minimum=1024,
    maximum=1024 * 1024 * 1024,
    why="a gigabyte",
)
AUDIENCE_CSV_MAX_LINES = environment.whole_number(
    "AUDIENCE_CSV_MAX_LINES",
    default=1_000_000,
    minimum=1,
    maximum=10_000_000,
    why="ten million",
)

# The outbox's queue worker (notifications/drain.py); the system checks in
# notifications/checks.py refuse a lease that a full batch could outlive. The bounds are
# drain_outbox's own for the same options, so a setting the command would refuse never starts.
DELIVERY_BATCH_SIZE = environment.whole_number(
    "DELIVERY_BATCH_SIZE", default=25, minimum=1, maximum=10_000, why="drain_outbox's limit"
)
DELIVERY_CONCURRENCY = environment.whole_number(
    "DELIVERY_CONCURRENCY", default=16, minimum=1, maximum=64, why="drain_outbox's limit"
)
# How many recipients of a broadcast one drain expands in one transaction
# (notifications/broadcasts.py): big enough that a chunk's few statements cost little a
# recipient, small enough that a chunk takes a fraction of a second, so a drain expanding one
# holds up a password reset no longer than that, and a killed drain redoes no more than that.
BROADCAST_CHUNK_SIZE = environment.whole_number(
    "BROADCAST_CHUNK_SIZE", default=1000, minimum=1, maximum=100_000, why="a chunk's transaction"
)
DELIVERY_LEASE_SECONDS = environment.number(
    "DELIVERY_LEASE_SECONDS", default=300.0, minimum=1, maximum=86_400, why="a day"
)
DELIVERY_INTERVAL_SECONDS = environment.number(
    "DELIVERY_INTERVAL_SECONDS", default=2.0, minimum=0.1, maximum=86_400, why="a day"
)
# Where the drain loop LISTENs for the wake-up that follows an enqueue's commit
# (notifications/wakeup.py): unset, the default database's own settings; a postgres:// URL
# straight to the server when DATABASE_URL goes through PgBouncer in transaction pooling
# (where LISTEN hears nothing); off to poll only. It must name the same database.
DELIVERY_LISTEN_URL = environment.text("DELIVERY_LISTEN_URL")


def _is_listen_url(value: str) -> bool:
    from psycopg.conninfo import conninfo_to_dict

    if not value.startswith(("postgres://", "postgresql://")):
        return False
    try:
        conninfo_to_dict(value)
    except Exception:
        return False
    return True


if DELIVERY_LISTEN_URL.lower() == "off":
    DELIVERY_LISTEN_URL = "off"
elif DELIVERY_LISTEN_URL and not _is_listen_url(DELIVERY_LISTEN_URL):
    # Not the value itself: it may hold a password.
    raise SettingError(
        "DELIVERY_LISTEN_URL is not a postgres:// URL; use postgres://USER:PASSWORD@HOST:PORT/"
        "NAME straight to the server (not through PgBouncer), off to poll only, or unset it "
        "to listen on the database of DATABASE_URL."
    )
# Past 20 sends a delivery has been retried for almost 16 hours: it is a human's to look at.
DELIVERY_MAX_ATTEMPTS = environment.whole_number(
    "DELIVERY_MAX_ATTEMPTS",
    default=5,  # backoff.MAX_ATTEMPTS; the settings import no app (tests/test_layers.py)
    minimum=1,
    maximum=20,
    why="20 sends already span almost 16 hours of retries",
)
# A provider's 429 (Too Many Requests) hands the row back for later without spending a send;
# past this many of them the delivery goes dead (THROTTLED), for a human to look at.
DELIVERY_MAX_THROTTLES = environment.whole_number(
    "DELIVERY_MAX_THROTTLES",
    default=20,
    minimum=1,
    maximum=1000,
    why="a thousand 429s in a row is a provider that will not take it",
)
# Throttles (notifications/digests.py): past this many notifications of one category to one
# recipient in a window of this many seconds, the rest fold into one digest sent when the window
# ends. Required categories (security) are never throttled; a limit of 0 turns throttling off.
NOTIFICATION_THROTTLE_LIMIT = environment.whole_number(
    "NOTIFICATION_THROTTLE_LIMIT",
    default=10,
    minimum=0,
    maximum=10_000,
    why="ten thousand a window is no throttle; 0 turns it off",
)
NOTIFICATION_THROTTLE_SECONDS = environment.whole_number(
    "NOTIFICATION_THROTTLE_SECONDS",
    default=3600,
    minimum=60,
    maximum=86_400,
    why="a minute to a day",
)
# Per category, (limit, seconds) in place of the two above, set in a settings module that
# imports this one: {"account": (3, 600)}. `manage.py check` says what is wrong with it.
NOTIFICATION_THROTTLES: dict[str, tuple[int, int]] = {}
# The showcase (/showcases/: the workers and jobs pages, and their "Try it"), installed unless
# V10R_SHOWCASES=0. It brings a channel and a lane of its own, configured here only with it;
# without it, the site is the queue and the accounts alone, and nothing else names either.
_showcases = environment.boolean("V10R_SHOWCASES", default=True)
# Channel name -> class path. Code that enqueues may only name these.
_CHANNEL_CLASSES = {
    "email": "transports.email.EmailChannel",
    "telegram": "transports.telegram.TelegramChannel",
    "discord": "transports.discord.DiscordChannel",
    "webhook": "transports.webhook.WebhookChannel",
    "webpush": "transports.webpush.WebPushChannel",
    "inapp": "notifications.inapp.InAppChannel",
}
if _showcases:
    # The visitors' channel of the workers page's Try it; the showcase's system check
    # (showcases.E001) says so when V10R_CHANNELS leaves it out.
    _CHANNEL_CLASSES["demo"] = "showcases.channel.DemoChannel"
# V10R_CHANNELS picks which of them this site runs (comma-separated; default all): a site with
# no Telegram bot leaves telegram out instead of carrying a channel that can only fail.
_chosen = environment.choices("V10R_CHANNELS", known=_CHANNEL_CLASSES)
DELIVERY_CHANNELS = {
    name: path for name, path in _CHANNEL_CLASSES.items() if not _chosen or name in _chosen
}
# The HTTP channels (transports/http.py): a connection must open within the first,
# and a whole send (name lookup, TLS, request, reply) finish within the second.
DELIVERY_HTTP_CONNECT_TIMEOUT = environment.number(
    "DELIVERY_HTTP_CONNECT_TIMEOUT", default=5.0, minimum=0.1, maximum=60, why="a minute"
)
DELIVERY_HTTP_TOTAL_TIMEOUT = environment.number(
    "DELIVERY_HTTP_TOTAL_TIMEOUT", default=10.0, minimum=0.1, maximum=300, why="five minutes"
)
if DELIVERY_HTTP_CONNECT_TIMEOUT > DELIVERY_HTTP_TOTAL_TIMEOUT:
    raise SettingError(
        f"DELIVERY_HTTP_CONNECT_TIMEOUT ({DELIVERY_HTTP_CONNECT_TIMEOUT:g} s) is longer than "
        f"DELIVERY_HTTP_TOTAL_TIMEOUT ({DELIVERY_HTTP_TOTAL_TIMEOUT:g} s), which bounds the "
        "whole send, connecting included; lower the first or raise the second."
    )
# Bot tokens; unset, that channel fails its rows permanently (TELEGRAM_NO_TOKEN,
# DISCORD_NO_TOKEN) and `manage.py check` warns. The base URLs point tests at loopback.
TELEGRAM_BOT_TOKEN = environment.text("TELEGRAM_BOT_TOKEN")
TELEGRAM_API_BASE_URL = environment.url("TELEGRAM_API_BASE_URL", default="https://api.telegram.org")
DISCORD_BOT_TOKEN = environment.text("DISCORD_BOT_TOKEN")
DISCORD_API_BASE_URL = environment.url(
    "DISCORD_API_BASE_URL", default="https://discord.com/api/v10"
)
# Web push's VAPID key pair (RFC 8292), base64url as `manage.py vapid_keys` prints them: the
# public key is what a browser subscribes with, the private key signs each push. Unset, the
# webpush channel is off and `manage.py check` warns. The subject is how a push service
# reaches the site's operator (mailto: or https:).
WEBPUSH_VAPID_PUBLIC_KEY = environment.text("WEBPUSH_VAPID_PUBLIC_KEY")
WEBPUSH_VAPID_PRIVATE_KEY = environment.text("WEBPUSH_VAPID_PRIVATE_KEY")
WEBPUSH_VAPID_SUBJECT = environment.text("WEBPUSH_VAPID_SUBJECT")
if _vapid_problem := vapid.problem(
    public=WEBPUSH_VAPID_PUBLIC_KEY,
    private=WEBPUSH_VAPID_PRIVATE_KEY,
    subject=WEBPUSH_VAPID_SUBJECT,
):
    raise SettingError(_vapid_problem)
# A push endpoint is a browser's word, so sends reach public HTTPS addresses only; 1 lets them
# reach loopback too (still over HTTPS), for tests and local development only. The CA file
# (PEM) is trusted instead of the system's certificates: a test's own, or a private relay's.
WEBPUSH_ALLOW_LOOPBACK = environment.boolean("WEBPUSH_ALLOW_LOOPBACK", default=False)
# The ports a push endpoint may name (recipients/subscriptions.py, and again at send): the
# browsers' push services all listen on 443. A browser's page chooses the endpoint, so any
# other port is a way to make the drain knock on a service that is not a push service.
WEBPUSH_ENDPOINT_PORTS = environment.ports("WEBPUSH_ENDPOINT_PORTS", default=(443,))
WEBPUSH_CA_FILE = environment.text("WEBPUSH_CA_FILE")
if WEBPUSH_CA_FILE and not Path(WEBPUSH_CA_FILE).is_file():
    raise SettingError(
        f"WEBPUSH_CA_FILE={WEBPUSH_CA_FILE!r} is not a file; unset it or fix the path."
    )
# Webhooks refuse every private, loopback and link-local address (SSRF); 1 lets them reach
# loopback, for tests and local development only.
DELIVERY_WEBHOOK_ALLOW_LOOPBACK = environment.boolean(
    "DELIVERY_WEBHOOK_ALLOW_LOOPBACK", default=False
)
# Provider rate limits (notifications/pacing.py): sends a second per account (per bot), kept
# by every drain on every host together; 0 sends unpaced. The defaults are the providers'
# published limits: Telegram's 30 messages a second per bot for bulk sends, and Discord's 50
# requests a second per bot, which is 25 sends (a send opens the DM channel, then posts).
# Email and webhooks have no one provider to pace for.
DELIVERY_PROVIDER_RATES = {
    name: environment.number(
        f"DELIVERY_RATE_{name.upper()}",
        default=default,
        minimum=0,
        maximum=10_000,
        why="far past any provider's published limit",
    )
    for name, default in {"telegram": 30.0, "discord": 25.0, "email": 0.0, "webhook": 0.0}.items()
}
for _name, _rate in DELIVERY_PROVIDER_RATES.items():
    # One send in 1000 s (about 17 minutes) at the slowest: a slower rate books its slots
    # years ahead, and one far slower is past what a timestamp holds.
    if 0 < _rate < 0.001:
        raise SettingError(
            f"DELIVERY_RATE_{_name.upper()}={_rate:g} is slower than one send in 1000 s; "
            "use 0 for unpaced, or at least 0.001."
        )
# Retention (notifications/retention.py, manage.py prune_outbox, and the drain loop's idle
# ticks): finished deliveries are deleted once queued this many days ago.
# At most a century: a longer keep is "forever", and would overflow the date arithmetic.
OUTBOX_KEEP_SENT_DAYS = environment.whole_number(
    "OUTBOX_KEEP_SENT_DAYS", default=30, minimum=1, maximum=36_500, why="a century"
)
OUTBOX_KEEP_FINISHED_DAYS = environment.whole_number(
    "OUTBOX_KEEP_FINISHED_DAYS", default=90, minimum=1, maximum=36_500, why="a century"
)
if OUTBOX_KEEP_FINISHED_DAYS < OUTBOX_KEEP_SENT_DAYS:
    raise SettingError(
        f"OUTBOX_KEEP_FINISHED_DAYS={OUTBOX_KEEP_FINISHED_DAYS} is shorter than "
        f"OUTBOX_KEEP_SENT_DAYS={OUTBOX_KEEP_SENT_DAYS}; failed and dead deliveries are kept "
        "at least as long as sent ones, so raise the first or lower the second."
    )
OUTBOX_PRUNE_BATCH = environment.whole_number(
    "OUTBOX_PRUNE_BATCH", default=1000, minimum=1, maximum=100_000, why="prune_outbox's limit"
)

# /metrics (notifications/metrics.py): open to a bearer token, or to clients in the listed
# networks (comma-separated, e.g. 10.0.0.0/8,127.0.0.1/32; the client address as
# V10R_TRUSTED_PROXIES defines it). Neither set: the endpoint does not exist (404).
METRICS_TOKEN = environment.secret("METRICS_TOKEN", min_length=32)
METRICS_ALLOWED_NETWORKS = environment.networks("METRICS_ALLOWED_NETWORKS")

# The service worker (pwa/). 0 serves a worker that removes itself and the site's caches from
# every browser that installed the real one: the way back if a deploy's worker misbehaves.
SERVICE_WORKER_ENABLED = environment.boolean("SERVICE_WORKER_ENABLED", default=True)

# Bearer secret for /cron/drain; unset, the endpoint does not exist (404). A guessable
# secret would let anyone drive the drain, so a short one stops start-up.
CRON_SECRET = environment.secret("CRON_SECRET", min_length=32)


def _cron_seconds(name: str, path: str) -> float:
    """How long one request to path may work: below the proxy's read timeout (nginx's
    proxy_read_timeout, 60 s in deploy/nginx.conf; a serverless host has its own), so the
    request answers instead of being cut off. At most 50 s leaves 10 s of nginx's 60 for the
    request's own writes."""
    why = f"a {path} request must answer within nginx's 60 s proxy_read_timeout"
    return environment.number(name, default=20.0, minimum=1, maximum=50, why=why)


# How long one /cron/drain request may spend draining.
CRON_DRAIN_SECONDS = _cron_seconds("CRON_DRAIN_SECONDS", "/cron/drain")

# Scheduled work (jobs/, docs/jobs.md). How long one /cron/jobs/… request may run jobs.
JOBS_CRON_SECONDS = _cron_seconds("JOBS_CRON_SECONDS", "/cron/jobs")
# A running job's lease, renewed three times a lease: a run whose process died is found
# this long after its last renewal, and its slug runs again.
JOBS_LEASE_SECONDS = environment.number(
    "JOBS_LEASE_SECONDS",
    default=30.0,
    minimum=1,
    maximum=600,
    why="a dead run must be found within minutes",
)
# How long the execution log keeps a run (the prune-outbox job deletes older ones).
JOBS_KEEP_RUNS_DAYS = environment.whole_number(
    "JOBS_KEEP_RUNS_DAYS", default=30, minimum=1, maximum=3650, why="ten years"
)
# Cadences other than the jobs' own, "slug=cron expression" separated by ";" (for example
# "prune-outbox=0 3 * * *"); `manage.py check` refuses an unknown slug or a bad expression.
JOBS_CADENCES = {
    slug.strip(): expression.strip()
    for slug, _, expression in (
        entry.partition("=") for entry in environment.text("JOBS_CADENCES").split(";")
    )
    if slug.strip()
}

# How many reverse proxies of ours stand in front of the app. 0 (the default): the peer
# address is the client. N: the client is the N-th address from the right of
# X-Forwarded-For (core/clients.py). Never more than the proxies really there, or any client
# could choose its own address by sending the header.
V10R_TRUSTED_PROXIES = environment.whole_number(
    "V10R_TRUSTED_PROXIES", default=0, minimum=0, maximum=10, why="ten proxies in a row"
)

# The inbox's state (accounts/inbox_views.py), polled every 1.5 s by each open page of a
# signed-in user (40 a minute): polls per account per minute, whatever the client, so that
# many addresses polling one account cannot turn its polls into load on everyone.
INBOX_STATE_POLLS_PER_MINUTE = environment.whole_number(
    "INBOX_STATE_POLLS_PER_MINUTE",
    default=200,
    minimum=40,
    maximum=10_000,
    why="at least one open page's 40 a minute",
)

# Where this deployment runs; overrides the detection in core/platform.py.
V10R_PLATFORM = environment.choice("V10R_PLATFORM", known=platform.PLATFORMS)

# --- Applications -----------------------------------------------------------------------------
INSTALLED_APPS = [
    "v10r.apps.AdminConfig",  # django.contrib.admin, with the Needs Attention count
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.humanize",
    # ArrayField (a broadcast chunk's recipients) and PostgreSQL's lookups.
    "django.contrib.postgres",
    # Before staticfiles, so runserver serves files the way WhiteNoise does in production.
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "core",
    "v10r",
    # The notification system's three rooms, channels first: each imports only the ones
    # above it here (docs/architecture.md).
    "transports",
    "recipients",
    "notifications",
    *(["showcases"] if _showcases else []),
    "pwa",
    "jobs",
    "accounts",
]

# The claim's lanes (notifications/lanes.py), in claim order by rank: send_notification's
# priority names one, "normal" when it names none. "cap" bounds a lane's rows per batch (None:
# what the higher lanes left). `manage.py check` holds it to its rules (notifications.E010-E015).
DELIVERY_LANES = {
    "high": {"rank": 0, "cap": None},
    "normal": {"rank": 1, "cap": None},
    "low": {"rank": 2, "cap": None},
}
if _showcases:
    # The visitors' demo rows, behind every real delivery (showcases.E002 says when it is
    # missing). A demo send takes most of a second
    # on purpose (showcases/channel.py), so a batch takes at most one round of them
    # (16, the default DELIVERY_CONCURRENCY): the next batch, and any real row in it, is never
    # held up by more than one round of demo sends.
    DELIVERY_LANES["demo"] = {"rank": 3, "cap": 16}

MIDDLEWARE = [
    # Probes answer first: before the host check and the HTTPS redirect (v10r/health.py).
    "v10r.health.ProbeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    # Before anything that reads the body (the CSRF check reads POST).
    "core.middleware.RequestBodyLimitMiddleware",
    # Outside everything that sets a cookie (sessions, CSRF, messages, views), to see them all.
    "core.middleware.PrivateCookieResponsesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Django's LocaleMiddleware, and on arrival the visitor's choice or browser's language.
    "v10r.language.LanguageMiddleware",
    "django.middleware.common.CommonMiddleware",
    # After the locale, so the 400 page is in the visitor's language.
    "core.middleware.NulInQueryMiddleware",
    # Its process_view runs before the CSRF check's, which reads the body (core/middleware.py).
    "core.middleware.RateLimitMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # After the user is known: times in the signed-in reader's saved zone.
    "accounts.time_zone.TimeZoneMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]
# Messages are kept in the session (in the database), not in a cookie: a message may carry a
# secret shown once (a new webhook signing secret), and a cookie is signed, not encrypted.
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"

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
                "accounts.context_processors.inbox_badge",
            ],
        },
    },
]

# --- Database ---------------------------------------------------------------------------------
if DATABASE_URL:
    try:
        _db = dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
    except ValueError:
        # Not the parser's message: the URL holds the password, and the parser may quote it.
        raise SettingError(
            "DATABASE_URL is not a database URL; use "
            "postgres://USER:PASSWORD@HOST:PORT/NAME, or unset it for the embedded PostgreSQL."
        ) from None
    if _db["ENGINE"] != "django.db.backends.postgresql":
        # The claim needs real row locks (FOR UPDATE SKIP LOCKED): PostgreSQL only.
        raise SettingError(
            f"DATABASE_URL must point at PostgreSQL (postgres://…), not {_db['ENGINE']}; the "
            "queue's claim needs its row locks."
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
# Prepared statements: with server-side binding, psycopg prepares a statement the fifth time a
# connection runs it, and the server plans it once per connection instead of on every run. The
# drain runs its claim and its write thousands of times: prepared, its database CPU per delivery
# is the plain psycopg loop's (docs/performance.md). Off by default, as Django has it: a prepared
# statement lives on one server connection, which PgBouncer in transaction pooling does not keep
# (before 1.21, or without its max_prepared_statements). Turn it on only for a DATABASE_URL
# straight to PostgreSQL (the embedded server is one).
DATABASE_PREPARED_STATEMENTS = environment.boolean(
    "DATABASE_PREPARED_STATEMENTS", default=not DATABASE_URL
)
if DATABASE_PREPARED_STATEMENTS:
    _db["OPTIONS"].update(server_side_binding=True, prepare_threshold=5)
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
# The visitor's choice of language, kept for a year (v10r/language.py).
LANGUAGE_COOKIE_AGE = 365 * 24 * 3600
LANGUAGE_COOKIE_HTTPONLY = True
LANGUAGE_COOKIE_SAMESITE = "Lax"
LANGUAGE_COOKIE_SECURE = _SECURE_COOKIES
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
SESSION_COOKIE_SECURE = _SECURE_COOKIES
CSRF_COOKIE_SECURE = _SECURE_COOKIES
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
# The site's own sign-in (accounts/); the admin keeps its login page. After signing in, a
# user lands on the page they came from (?next=) or the home page, in their language.
LOGIN_URL = "accounts:sign_in"
LOGIN_REDIRECT_URL = "home"
# How long a password-reset link works (Django's token; the link waits in the outbox's
# parameters until pruning, docs/accounts.md). An hour: long enough to find the email.
PASSWORD_RESET_TIMEOUT = 3600

# Django's own upload limits stay at their defaults. Request bodies are refused by size
# before anything reads them (core/middleware.py): DATA_UPLOAD_MAX_MEMORY_SIZE for every view,
# except the few that declare a larger limit of their own, such as the palette's server lane.

LOGGING = logs.logging_config(
    json=environment.boolean("V10R_LOG_JSON", default=False),
    level=environment.text("V10R_LOG_LEVEL", default="INFO"),
)
