"""`python -m v10r.embedded_postgresql start|stop|status` — used by `make db-stop`."""

from __future__ import annotations

import sys

from v10r import embedded_postgresql

USAGE = "usage: python -m v10r.embedded_postgresql start|stop|status"


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in {"start", "stop", "status"}:
        print(USAGE, file=sys.stderr)
        return 2
    pgdata = embedded_postgresql.pgdata_from_environment()
    command = argv[0]
    if command == "start":
        socket_dir = embedded_postgresql.ensure_running(pgdata)
        print(f"embedded PostgreSQL running in {pgdata} (socket in {socket_dir})")
    elif command == "stop":
        stopped = embedded_postgresql.stop(pgdata)
        print(f"embedded PostgreSQL {'stopped' if stopped else 'was not running'} ({pgdata})")
    else:
        running = embedded_postgresql.running_socket_dir(pgdata) is not None
        print(f"embedded PostgreSQL {'running' if running else 'stopped'} ({pgdata})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
