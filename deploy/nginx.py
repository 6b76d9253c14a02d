"""Render deploy/nginx.conf: fill its placeholders (upper-case names between at signs).

    python deploy/nginx.py > /etc/nginx/nginx.conf
    python deploy/nginx.py --set LISTEN=8080 --set UPSTREAM=unix:/run/v10r/gunicorn.sock

The defaults are for a Debian host where nginx runs as the packaged service; the tests render
the same file with loopback ports, a temporary folder and short timeouts.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

TEMPLATE = Path(__file__).with_name("nginx.conf")

# Upper-case only, so nginx's own $variables and {blocks} can never look like one.
PLACEHOLDER = re.compile(r"@([A-Z_]+)@")

DEFAULTS = {
    "LISTEN": "80",
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
}


def render(**values: str) -> str:
    """Return the template with every placeholder filled: DEFAULTS, overridden by values.

    A value for a placeholder the template does not have, or a placeholder without a value,
    is an error: a typo must not fall back to a default silently."""
    unknown = set(values) - set(DEFAULTS)
    if unknown:
        raise KeyError(f"nginx.conf has no placeholder {', '.join(sorted(unknown))}")
    filled = DEFAULTS | {name: str(value) for name, value in values.items()}
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
        + "\n",
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
    except KeyError as error:
        parser.error(error.args[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
