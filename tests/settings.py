"""The site's settings, plus the tests' own app (tests/notes), for the suite and for every
process it starts (they inherit DJANGO_SETTINGS_MODULE): a drain started by a test renders the
tests' note like any message."""

from v10r.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "tests.notes"]  # noqa: F405
