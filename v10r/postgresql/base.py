"""Django's PostgreSQL backend, made aware of the project's own schemas.

The outbox's tables live in schema `notifications` (db_table = 'notifications"."x'), but
Django's introspection lists only the tables on the search_path, so `flush` (which every
transactional test runs) would skip them and then fail to truncate auth_user, which they
reference. Listing them under the same quoted names as their models fixes that at the root,
for every schema a model names (the queue's, the jobs'), so a new app's is not forgotten.
"""

from __future__ import annotations

from django.apps import apps
from django.db.backends.postgresql import base, introspection, schema


def project_schemas() -> list[str]:
    """Every schema an installed model's db_table names ('notifications"."x')."""
    return sorted(
        {
            found
            for model in apps.get_models(include_auto_created=True)
            if (found := _schema_of(model._meta.db_table))
        }
    )


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
            [project_schemas()],
        )
        return tables + [
            introspection.TableInfo(f'{schema}"."{name}', kind, comment)
            for schema, name, kind, comment in cursor.fetchall()
        ]


def _schema_of(db_table: str) -> str | None:
    """'notifications"."x' → 'notifications'; a plain table name → None."""
    return db_table.split('"."', 1)[0] if '"."' in db_table else None


class DatabaseSchemaEditor(schema.DatabaseSchemaEditor):
    """Index statements that name the index alone must name its schema too.

    An index lives in its table's schema, but DROP INDEX and ALTER INDEX … RENAME look it
    up on the search_path: without this, a migration that removes or renames an index on a
    notifications table would silently drop nothing (IF EXISTS) and then fail to recreate it.
    """

    def _qualified(self, model, name_sql: str) -> str:
        table_schema = _schema_of(model._meta.db_table)
        return f"{self.quote_name(table_schema)}.{name_sql}" if table_schema else name_sql

    def _delete_index_sql(self, model, name, sql=None, concurrently=False):
        statement = super()._delete_index_sql(model, name, sql, concurrently=concurrently)
        statement.parts["name"] = self._qualified(model, statement.parts["name"])
        return statement

    def _rename_index_sql(self, model, old_name, new_name):
        statement = super()._rename_index_sql(model, old_name, new_name)
        statement.parts["old_name"] = self._qualified(model, statement.parts["old_name"])
        return statement


class DatabaseWrapper(base.DatabaseWrapper):
    introspection_class = DatabaseIntrospection
    SchemaEditorClass = DatabaseSchemaEditor
