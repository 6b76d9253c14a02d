from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from recipients.models import Recipient

PASSWORD = "v10r-dev-user"
# One reader per language, so a reset email in each can be tried: (username, name, language).
USERS = (
    ("ada", "Ada", "en"),
    ("vera", "Вера", "ru"),
    ("greta", "Greta", "de"),
)


class Command(BaseCommand):
    help = (
        "Create the demo users (not staff) when missing (DEBUG only), each with an email "
        "address and a language, and print how they sign in."
    )

    def handle(self, *args, **options):
        if not settings.DEBUG:
            raise CommandError(
                "Refusing to create demo users with DEBUG off; production has real users."
            )
        users = get_user_model().objects
        ready, theirs = [], []
        for username, name, language in USERS:
            user = users.filter(username=username).first()
            if user is None:
                user = users.create_user(
                    username, email=f"{username}@localhost", password=PASSWORD, first_name=name
                )
                Recipient.objects.get_or_create(user=user, defaults={"language": language})
            (ready if user.check_password(PASSWORD) else theirs).append(username)
        if ready:
            self.stdout.write(
                f"Demo users (sign in at /account/sign-in/): {', '.join(ready)} / {PASSWORD}"
            )
            self.stdout.write("Their email addresses are <name>@localhost, such as ada@localhost.")
        if theirs:
            self.stdout.write(
                "Demo users with passwords of their own (reset at /account/password-reset/): "
                + ", ".join(theirs)
            )
