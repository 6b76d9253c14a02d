from django.apps import AppConfig


class NotesConfig(AppConfig):
    name = "tests.notes"
    label = "test_notes"
