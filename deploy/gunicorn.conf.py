"""gunicorn in production, behind deploy/nginx.conf:

    gunicorn -c deploy/gunicorn.conf.py v10r.wsgi

nginx reads every request whole (headers and body) before it opens a connection here, and
takes every response whole before it trickles it out to the client. So nothing below waits
on a visitor's network: the sizes are for the app's own work (templates, PostgreSQL, the
palette analysis), and the limits only need to agree with nginx's.

The environment variables are the ones an operator changes per machine; everything else is
a decision, explained where it is made.
"""

from __future__ import annotations

import os


def _int(name: str, *, default: int, maximum: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"{name}={raw!r} is not a whole number.") from None
    if value < 1:
        raise SystemExit(f"{name}={raw!r} must be at least 1.")
    if value > maximum:
        raise SystemExit(f"{name}={raw!r} must be at most {maximum}.")
    return value


def _check_settings() -> None:
    """Load the Django settings once, in a throwaway child, before gunicorn starts anything.

    A bad value in the environment then stops gunicorn with the settings' one line (the
    worker would bury it in its traceback, and the master add five lines of its own). A
    child, because the master must not import the app: no preload_app, so a HUP reloads it.
    Any other failure is left to the worker, which reports it in full."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        code = 0
        try:
            os.environ.setdefault("DJANGO_SETTINGS_MODULE", "v10r.settings")
            from django.conf import settings
            from django.core.exceptions import ImproperlyConfigured

            try:
                settings.INSTALLED_APPS  # noqa: B018 - reading it loads the settings
            except ImproperlyConfigured as error:
                os.write(write, str(error).encode())
                code = 1
        except BaseException:
            pass
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read().decode()
    os.waitpid(pid, 0)
    if message:
        raise SystemExit(message)


_check_settings()


def _cpus() -> int:
    # The CPUs this process may run on (a container pinned to two cores sees two), not the
    # machine's count.
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity
        return os.cpu_count() or 1


# Loopback only: nginx on the same host is the one client, and the app must not be
# reachable around it (a direct client would meet gunicorn's threads, not nginx's buffers).
# GUNICORN_BIND takes a comma-separated list, e.g. "unix:/run/v10r/gunicorn.sock".
bind = [
    address.strip()
    for address in os.environ.get("GUNICORN_BIND", "127.0.0.1:8000").split(",")
    if address.strip()
]

# Threads in a few processes. Not `sync`: it closes the connection after every response, so
# nginx's upstream keepalive could not work, and it buys concurrency one whole process (Django,
# NumPy and Numba loaded) per request. Not gevent or an async worker: the views are plain
# synchronous Django and psycopg, and green threads would need monkey-patching for no gain
# once nginx has taken the waiting on clients away.
worker_class = "gthread"

# One process per CPU: Python code holds the GIL, so more processes than cores would only
# queue on them. WEB_CONCURRENCY is the name platforms (Heroku, Render, Fly) already set.
# The maxima here guard against a stray zero (WEB_CONCURRENCY=1000 would start a thousand
# processes, each with Django, NumPy and Numba loaded and its threads' database connections).
workers = _int("WEB_CONCURRENCY", default=_cpus(), maximum=256)

# No preload_app: each worker imports v10r.wsgi after the fork, and that import warms the
# palette's Numba loops (showcases/palette.py) before the worker takes its first request.
# Preloading would warm once, in the master, but a HUP would then restart workers on the
# master's old code instead of reloading it.
preload_app = False

# While one thread waits on PostgreSQL another runs. Four keeps the database's connection
# count at workers × 4 (CONN_MAX_AGE keeps one per thread open) and leaves room for the
# palette analysis, whose Numba loops release the GIL.
threads = _int("GUNICORN_THREADS", default=4, maximum=64)

# For gthread this is the main loop's heartbeat: it kills a process that is wedged, not a
# request that is slow (nginx's proxy_read_timeout, 60 s, bounds those, and the longest
# request the app makes itself, a /cron/drain, stops at CRON_DRAIN_SECONDS, 20 s by default).
# 30 s is gunicorn's default.
timeout = _int("GUNICORN_TIMEOUT", default=30, maximum=3600)

# On SIGTERM or a restart, requests in flight get this long to finish: longer than a cron
# drain (20 s) and its last writes, inside the 30 s Kubernetes waits by default before
# SIGKILL (`docker stop` waits 10 s: pass --time 30).
graceful_timeout = _int("GUNICORN_GRACEFUL_TIMEOUT", default=25, maximum=3600)

# Longer than nginx's upstream keepalive_timeout (60 s), so the side that closes an idle
# connection is always nginx: were it gunicorn, nginx could send a request down a connection
# that is just being closed and answer 502.
keepalive = 75

# nginx already refuses a request line or a header line over its 8 KB buffers
# (large_client_header_buffers); gunicorn's limits are set to the same size, the largest it
# allows, so nothing nginx accepts is refused here with a confusing 400. 100 header fields
# is gunicorn's default: browsers send about 20 and nginx adds 2.
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190

# The proxy's address: only it may say the request came over HTTPS. FORWARDED_ALLOW_IPS is
# gunicorn's own variable name, kept so its documentation still applies. (A Unix-socket bind
# trusts every connection: only processes on this host can reach it.)
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1,::1")

# Only X-Forwarded-Proto, the one header nginx writes (it overwrites a client's with $scheme).
# gunicorn's default also believes X-Forwarded-Ssl and X-Forwarded-Protocol, which a client
# could send through a proxy that does not know to clear them.
secure_scheme_headers = {"X-FORWARDED-PROTO": "https"}

# No header may rewrite SCRIPT_NAME or PATH_INFO: the app is mounted at / and nothing in
# front of it moves it.
forwarder_headers = ""

# nginx logs every request already; GUNICORN_ACCESS_LOG ("-" for stdout, or a file) adds the
# app's own view: the time it spent, and the client address and scheme as the app saw them.
accesslog = os.environ.get("GUNICORN_ACCESS_LOG") or None
access_log_format = (
    '%(h)s xff=%({x-forwarded-for}i)s scheme=%({wsgi.url_scheme}e)s "%(r)s" %(s)s %(b)s %(M)sms'
)
errorlog = "-"
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "info")

# gunicorn 25+ opens a control socket at one per-user path ($XDG_RUNTIME_DIR or
# ~/.gunicorn/gunicorn.ctl); two instances on one host (a blue-green deploy, the test suite
# beside a developer's server) would fight over it, and nothing here uses gunicornc.
control_socket_disable = True

# The workers' heartbeat file is touched every second; /dev/shm keeps that off a disk that
# may stall (gunicorn's own advice for containers, where /tmp is often overlayfs).
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
