from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

USERNAME = "admin"
PASSWORD = "v10r-dev-admin"


class Command(BaseCommand):
    help = "Create a development superuser when none exists (DEBUG only), and print how to log in."

    def handle(self, *args, **options):
        if not settings.DEBUG:
            raise CommandError(
                "Refusing to create a development superuser with DEBUG off; "
                "use `manage.py createsuperuser` in production."
            )
        users = get_user_model().objects
        if not users.filter(is_superuser=True).exists():
            users.create_superuser(USERNAME, email="admin@localhost", password=PASSWORD)
            self.stdout.write(f"Created a development superuser: {USERNAME} / {PASSWORD}")
            return
        ours = users.filter(username=USERNAME, is_superuser=True).first()
        if ours is not None and ours.check_password(PASSWORD):
            self.stdout.write(f"Development superuser: {USERNAME} / {PASSWORD}")
        else:
            self.stdout.write("A superuser exists already; log in with its own credentials.")
