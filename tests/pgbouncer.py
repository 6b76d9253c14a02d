"""PgBouncer in transaction-pooling mode, in front of the test database's server."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from tests.smtp import free_port


class PgBouncer:
    def __init__(self, *, host: str, port: int | None, pool_size: int = 2) -> None:
        executable = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        self.port = free_port()
        # PgBouncer refuses to run as root: it runs as whoever can reach the server — the
        # owner of the socket folder for a Unix socket, else nobody.
        user = pwd.getpwuid(os.stat(host).st_uid).pw_name if host.startswith("/") else "nobody"
        self.folder = Path(tempfile.mkdtemp(prefix="v10r-pgbouncer-"))
        self.folder.chmod(0o777)
        (self.folder / "users.txt").write_text('"postgres" ""\n')
        server = f"host={host}" + (f" port={port}" if port else "")
        config = self.folder / "pgbouncer.ini"
        config.write_text(
            "[databases]\n"
            f"* = {server}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {self.folder / 'users.txt'}\n"
            "pool_mode = transaction\n"
            f"default_pool_size = {pool_size}\n"
            "max_client_conn = 200\n"
            f"logfile = {self.folder / 'pgbouncer.log'}\n"
            "ignore_startup_parameters = extra_float_digits,options\n"
        )
        for path in self.folder.iterdir():
            path.chmod(0o666)
        self.process = subprocess.Popen(
            [executable, "-u", user, str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 15
        while True:
            try:
                with psycopg.connect(
                    host="127.0.0.1",
                    port=self.port,
                    user="postgres",
                    dbname="postgres",
                    connect_timeout=2,
                ):
                    break
            except psycopg.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    log = self.folder / "pgbouncer.log"
                    raise RuntimeError(
                        "PgBouncer did not start: "
                        + (log.read_text() if log.exists() else self.process.stdout.read().decode())
                    ) from None
                time.sleep(0.1)

    def url(self, dbname: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{dbname}"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)
        shutil.rmtree(self.folder, ignore_errors=True)
