"""System checks that hold every registration in the catalogue to what the engine relies on.

Each error names the app that registered the entry (recipients/catalogue.py records it), so a
site that installs someone else's app knows whose registration to fix.
"""

from __future__ import annotations

import importlib
import pkgutil

from django.conf import settings
from django.core.checks import Error, register
from django.utils import translation

from recipients import catalogue
from transports.base import Channel


def _shipped_channel_names() -> set[str]:
    """The names of the channels this project ships (transports/), run here or not: a
    category's default may name a channel a site leaves out of V10R_CHANNELS."""
    import transports as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    names, kinds = set(), list(Channel.__subclasses__())
    while kinds:
        kind = kinds.pop()
        kinds += kind.__subclasses__()
        if isinstance(getattr(kind, "name", None), str):
            names.add(kind.name)
    return names


def _languages() -> list[str]:
    return [code for code, _name in settings.LANGUAGES]


@register()
def check_catalogue(app_configs=None, **kwargs):
    """Every message names a registered category and declares the parameters its words use in
    every language; every category's defaults name channels; no name is registered twice. A
    typo in any of them would let a notification through that its recipient turned off, or
    fail it in one language only."""
    errors = [
        Error(
            f"The message {key!r} (registered by {catalogue.MESSAGE_APPS[key]}) names the "
            f"category {message.category!r}, which no app registers.",
            hint=f"Use one of: {', '.join(catalogue.CATEGORIES)}, or register the category "
            "with catalogue.register_category() (docs/messages.md).",
            obj=key,
            id="recipients.E001",
        )
        for key, message in catalogue.MESSAGES.items()
        if message.category not in catalogue.CATEGORIES
    ]
    for key, message in catalogue.MESSAGES.items():
        app = catalogue.MESSAGE_APPS[key]
        for language in _languages():
            with translation.override(language):
                undeclared = sorted(catalogue.fields(message) - message.params)
            if undeclared:
                errors.append(
                    Error(
                        f"The message {key!r} (registered by {app}) uses the parameter(s) "
                        f"{', '.join(undeclared)} in {language!r}, which its params do not "
                        "declare.",
                        hint="Add them to the Message's params, or fix the placeholders of "
                        "its translation.",
                        obj=key,
                        id="recipients.E002",
                    )
                )
        if stray := sorted(message.secret - message.params):
            errors.append(
                Error(
                    f"The message {key!r} (registered by {app}) has the secret parameter(s) "
                    f"{', '.join(stray)}, which its params do not declare.",
                    hint="A secret parameter is one of the message's params.",
                    obj=key,
                    id="recipients.E005",
                )
            )
    known = set(settings.DELIVERY_CHANNELS) | _shipped_channel_names()
    errors += [
        Error(
            f"The category {name!r} (registered by {catalogue.CATEGORY_APPS[name]}) has a "
            f"default for the channel {channel!r}, which is no channel this project has.",
            hint=f"Use one of: {', '.join(sorted(known))}.",
            obj=name,
            id="recipients.E003",
        )
        for name, category in catalogue.CATEGORIES.items()
        for channel in category.defaults
        if channel not in known
    ]
    errors += [
        Error(
            f"The {duplicate.kind} {duplicate.name!r} is registered by {duplicate.app}, but "
            f"{duplicate.first_app} registered it first; the first registration stands.",
            hint=f"Give the {duplicate.kind} of {duplicate.app} a name of its own.",
            obj=duplicate.name,
            id="recipients.E004",
        )
        for duplicate in catalogue.DUPLICATES
    ]
    return errors
