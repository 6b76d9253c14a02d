"""Django's PostgreSQL backend, pointed at the embedded server (started on first connect)."""

from __future__ import annotations

from django.conf import settings

from v10r import embedded_postgresql
from v10r.postgresql import base


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self):
        if not self.settings_dict.get("HOST"):
            socket_dir = embedded_postgresql.ensure_running(settings.EMBEDDED_PGDATA)
            self.settings_dict["HOST"] = str(socket_dir)
        return super().get_connection_params()
