"""gunicorn and nginx as operators run them: real processes on free loopback ports.

Shared by the tests in this folder and bench/slow_clients.py.
"""

from __future__ import annotations

import grp
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.deploy import clients
from tests.smtp import free_port

BASE_DIR = Path(__file__).resolve().parents[2]
GUNICORN = BASE_DIR / ".venv" / "bin" / "gunicorn"
CONFIG = BASE_DIR / "deploy" / "gunicorn.conf.py"
# The names the app under test is told it has (DJANGO_ALLOWED_HOSTS), and nginx with it.
ALLOWED_HOSTS = "127.0.0.1,localhost"


def nginx_executable() -> str | None:
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")


class Server:
    """A server subprocess on a free loopback port, with a temporary folder of its own."""

    def __init__(self, prefix: str) -> None:
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix=prefix))
        # nginx's workers drop to an unprivileged user and must reach the temp folders.
        self.folder.chmod(0o755)
        self.output = self.folder / "output.log"
        self.process: subprocess.Popen | None = None

    def start(self, args: list[str], *, env: dict[str, str] | None, seconds: float) -> None:
        with self.output.open("a") as output:  # O_APPEND: nginx writes its error log here too
            self.process = subprocess.Popen(
                args, cwd=BASE_DIR, env=env, stdout=output, stderr=subprocess.STDOUT
            )
        self.wait_until_answering(seconds=seconds)

    def wait_until_answering(self, *, seconds: float) -> None:
        """Poll GET / until it answers 200; fail with the output if the server dies first."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                if clients.get(self.port, "/", timeout=5).status == 200:
                    return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                state = "exited" if self.process.poll() is not None else "never answered 200"
                self.stop()
                raise RuntimeError(f"{self.process.args} {state}:\n{self.log_text()}")
            time.sleep(0.1)

    def log_text(self) -> str:
        return self.output.read_text() if self.output.exists() else ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        shutil.rmtree(self.folder, ignore_errors=True)


class Gunicorn(Server):
    """gunicorn serving v10r.wsgi: with deploy/gunicorn.conf.py, or bare as the README had it."""

    def __init__(self, env: dict[str, str], *, config: bool = True, workers: int = 2) -> None:
        super().__init__("v10r-gunicorn-")
        self.access_log = self.folder / "access.log"
        # Two workers, not one per CPU: a 64-core CI machine would boot 64 and open 256
        # database connections.
        env = env | {"WEB_CONCURRENCY": str(workers)}
        if config:
            args = [str(GUNICORN), "-c", str(CONFIG), "v10r.wsgi"]
            env |= {
                "GUNICORN_BIND": f"127.0.0.1:{self.port}",
                "GUNICORN_ACCESS_LOG": str(self.access_log),
            }
        else:
            # `gunicorn v10r.wsgi` with its defaults (sync workers), on a free port. The
            # control socket is off only because its one per-user path would collide with
            # any other gunicorn on this machine; it plays no part in serving.
            args = [str(GUNICORN), "--bind", f"127.0.0.1:{self.port}", "--no-control-socket"]
            args += ["--access-logfile", str(self.access_log), "v10r.wsgi"]
        self.start(args, env=env, seconds=90)

    def access_lines(self) -> list[str]:
        return self.access_log.read_text().splitlines() if self.access_log.exists() else []


class Nginx(Server):
    """nginx rendered from deploy/nginx.conf (values override its defaults), before upstream."""

    def __init__(self, upstream_port: int, **values: str) -> None:
        from deploy import nginx as template

        super().__init__("v10r-nginx-")
        # Unprivileged workers when we are root, as in production (the user directive is
        # ignored otherwise). Debian's nobody is in group nogroup, not "nobody".
        nobody = pwd.getpwnam("nobody")
        self.config = self.folder / "nginx.conf"
        self.config.write_text(
            template.render(
                LISTEN=f"127.0.0.1:{self.port}",
                UPSTREAM=f"127.0.0.1:{upstream_port}",
                USER=f"nobody {grp.getgrgid(nobody.pw_gid).gr_name}",
                PID=str(self.folder / "nginx.pid"),
                ERROR_LOG=str(self.output),
                ACCESS_LOG=str(self.folder / "access.log"),
                TEMP_DIR=str(self.folder),
                **{"SERVER_NAME": template.server_names(ALLOWED_HOSTS)} | values,
            )
        )
        args = [nginx_executable(), "-p", str(self.folder), "-c", str(self.config)]
        # -e: the log before the configuration is read, so nothing touches /var/log/nginx.
        args += ["-e", str(self.output), "-g", "daemon off;"]
        self.start(args, env=None, seconds=30)
