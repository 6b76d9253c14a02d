from django.apps import AppConfig


class NewsletterConfig(AppConfig):
    name = "tests.sites.newsletter"
    label = "newsletter"
