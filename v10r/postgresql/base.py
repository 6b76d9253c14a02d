"""Django's PostgreSQL backend, made aware of the project's own schemas.

The outbox's tables live in schema `notifications` (db_table = 'notifications"."x'), but
Django's introspection lists only the tables on the search_path, so `flush` (which every
transactional test runs) would skip them and then fail to truncate auth_user, which they
reference. Listing them under the same quoted names as their models fixes that at the root.
"""

from __future__ import annotations

from django.db.backends.postgresql import base, introspection

PROJECT_SCHEMAS = ("notifications",)


class DatabaseIntrospection(introspection.DatabaseIntrospection):
    def get_table_list(self, cursor):
        tables = super().get_table_list(cursor)
        cursor.execute(
            """
            SELECT n.nspname, c.relname,
                   CASE WHEN c.relkind IN ('v', 'm') THEN 'v' ELSE 't' END,
                   obj_description(c.oid, 'pg_class')
            FROM pg_catalog.pg_class c
            JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = ANY(%s) AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
            """,
            [list(PROJECT_SCHEMAS)],
        )
        return tables + [
            introspection.TableInfo(f'{schema}"."{name}', kind, comment)
            for schema, name, kind, comment in cursor.fetchall()
        ]


class DatabaseWrapper(base.DatabaseWrapper):
    introspection_class = DatabaseIntrospection
