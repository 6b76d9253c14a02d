"""Render deploy/nginx.conf: fill its placeholders (upper-case names between at signs).

    python deploy/nginx.py > /etc/nginx/nginx.conf
    python deploy/nginx.py --set LISTEN=8080 --set UPSTREAM=unix:/run/v10r/gunicorn.sock

The defaults are for a Debian host where nginx runs as the packaged service; the tests render
the same file with loopback ports, a temporary folder and short timeouts. SERVER_NAME, the
names the site answers to, defaults to DJANGO_ALLOWED_HOSTS from the environment, as the app
reads it: render where the app's environment is set, or pass it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

TEMPLATE = Path(__file__).with_name("nginx.conf")

# Upper-case only, so nginx's own $variables and {blocks} can never look like one.
PLACEHOLDER = re.compile(r"@([A-Z_]+)@")

# v10r/settings.py's ALLOWED_HOSTS when DJANGO_ALLOWED_HOSTS is unset or empty.
APP_ALLOWED_HOSTS = "localhost,127.0.0.1,[::1]"

# What ALLOWED_HOSTS may hold that nginx reads the same way: a name, a name with a leading dot
# (itself and every subdomain, in both), an IPv4 address, a bracketed IPv6 one, or "*".
ALLOWED_HOST = re.compile(r"\*|\.?[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.?|\[[0-9A-Fa-f:.]+\]")


def server_names(allowed_hosts: str) -> str:
    """Return nginx's server_name for DJANGO_ALLOWED_HOSTS (comma-separated, as the app reads
    it): the same names, or, for "*", a pattern that matches any Host.

    Anything else is a ValueError: pasted into nginx.conf, a stray ";" or "{" would be read
    as a directive of its own."""
    names = [name.strip() for name in allowed_hosts.split(",") if name.strip()]
    if not names:
        names = APP_ALLOWED_HOSTS.split(",")
    for name in names:
        if not ALLOWED_HOST.fullmatch(name):
            raise ValueError(f"DJANGO_ALLOWED_HOSTS: {name!r} is not a host name or address")
    if "*" in names:
        return '"~."'
    return " ".join(dict.fromkeys(name.lower() for name in names))


DEFAULTS = {
    "LISTEN": "80",
    # Replaced by DJANGO_ALLOWED_HOSTS from the environment when that is set (render()).
    "SERVER_NAME": server_names(APP_ALLOWED_HOSTS),
    # deploy/gunicorn.conf.py's default bind.
    "UPSTREAM": "127.0.0.1:8000",
    # Debian's user for web servers; the workers drop to it when the master runs as root.
    "USER": "www-data",
    "WORKER_PROCESSES": "auto",
    "PID": "/run/nginx.pid",
    "ERROR_LOG": "/var/log/nginx/error.log",
    "ACCESS_LOG": "/var/log/nginx/access.log",
    "TEMP_DIR": "/var/lib/nginx",
    # Generous for a phone on a bad line (the body one is a pause, not a total), short
    # against a client that has simply stopped.
    "HEADER_TIMEOUT": "10s",
    "BODY_TIMEOUT": "10s",
    "SEND_TIMEOUT": "10s",
    "CONNECTIONS_PER_CLIENT": "32",
    # Pages and API calls; static files are not counted. Ten a second with a burst of 40
    # is far above what a person clicking (and the page's polling) needs.
    "REQUEST_RATE": "10r/s",
    "REQUEST_BURST": "40",
    # Inbox state polls inside gunicorn at once, all clients together: half the threads of
    # one process of deploy/gunicorn.conf.py (four), the fewest it runs.
    "INBOX_STATE_CONNECTIONS": "2",
    # Inbox state polls a second per session (an open page asks every 1.5 s).
    "INBOX_STATE_SESSION_RATE": "4r/s",
}


def render(**values: str) -> str:
    """Return the template with every placeholder filled: DEFAULTS, overridden by values.

    A value for a placeholder the template does not have, or a placeholder without a value,
    is an error: a typo must not fall back to a default silently. So is a DJANGO_ALLOWED_HOSTS
    that is not a list of names (ValueError)."""
    unknown = set(values) - set(DEFAULTS)
    if unknown:
        raise KeyError(f"nginx.conf has no placeholder {', '.join(sorted(unknown))}")
    filled = DEFAULTS | {name: str(value) for name, value in values.items()}
    if "SERVER_NAME" not in values:
        filled["SERVER_NAME"] = server_names(os.environ.get("DJANGO_ALLOWED_HOSTS", ""))
    text = TEMPLATE.read_text()
    missing = set(PLACEHOLDER.findall(text)) - set(filled)
    if missing:
        raise KeyError(f"no value for placeholder {', '.join(sorted(missing))}")
    return PLACEHOLDER.sub(lambda match: filled[match.group(1)], text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="placeholders and their defaults:\n"
        + "\n".join(f"  {name}={value}" for name, value in DEFAULTS.items())
        + "\n(SERVER_NAME: DJANGO_ALLOWED_HOSTS's names when that is set)\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="fill a placeholder (repeatable)",
    )
    args = parser.parse_args(argv)
    values = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set {item!r}: expected NAME=VALUE")
        values[name] = value
    try:
        sys.stdout.write(render(**values))
    except (KeyError, ValueError) as error:
        parser.error(error.args[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
