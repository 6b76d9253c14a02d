"""Building an index with CREATE INDEX CONCURRENTLY so that migrate can simply be run again,
shared by the migrations that do (0005, 0007, 0008, 0010).

An interrupted CREATE INDEX CONCURRENTLY leaves an invalid index behind under its name, which
would make the next attempt fail: each build drops such a leftover first. Django's migration
loader skips modules whose names start with an underscore, so this is no migration itself.
"""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations


def drop_leftover(name: str):
    return migrations.RunSQL(
        f'DROP INDEX CONCURRENTLY IF EXISTS notifications."{name}"',
        reverse_sql=migrations.RunSQL.noop,
    )


def build_index(model_name: str, index) -> list:
    """The index added concurrently, after any leftover of an interrupted build is dropped."""
    return [drop_leftover(index.name), AddIndexConcurrently(model_name, index)]
