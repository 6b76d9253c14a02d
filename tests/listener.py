"""A TCP listener on loopback that hands each connection it accepts to take(): the base of
the peers that never answer as a server should (tests/smtp.py, tests/httppeers.py)."""

from __future__ import annotations

import socket
import threading


class Listener:
    """Listens on a free loopback port (self.port) and accepts on a thread of its own until
    stopped. Subclasses set their own state before calling __init__, which starts accepting."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.take(conn)

    def take(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self.listener.close()
