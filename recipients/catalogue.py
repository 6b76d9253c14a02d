"""The catalogue of messages notifications can carry, by key, and the categories recipients
choose them by.

A notification stores only a key and its parameters; the words are chosen when a delivery is
sent, in the recipient's language, so a message queued in English reaches a Russian reader in
Russian.

The catalogue starts empty: every app registers the categories and messages it owns, from a
module named notifications.py, the way it registers admin models from admin.py
(docs/messages.md). RecipientsConfig.ready() imports each installed app's notifications.py in
INSTALLED_APPS order, so the catalogue's order, which is the preference centre's, is the same
on every start, and an app left out of INSTALLED_APPS brings none of its entries.
"""

from __future__ import annotations

import inspect
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.utils import translation
from django.utils.functional import Promise


@dataclass(frozen=True)
class Category:
    """What recipients choose by: a kind of notification, and whether it reaches each channel
    when they have said nothing (defaults; a channel not named there is on)."""

    label: Promise
    description: Promise
    defaults: Mapping[str, bool] = field(default_factory=dict)
    # Required: no preference mutes it, quiet hours do not hold it, its email has no unsubscribe
    # link, and at least one channel stays on (the preference centre refuses to turn off the
    # last one, and enqueue keeps the first reachable one if the stored choices do).
    required: bool = False
    # Listed on the preference centre: False for rows only the site itself is sent (a
    # showcase's own rows), which are not a person's choice.
    choosable: bool = True

    def default_for(self, channel: str) -> bool:
        return self.defaults.get(channel, True)


@dataclass(frozen=True)
class Message:
    subject: Promise
    body: Promise
    # A registered category's name: what the recipient's preferences are read by.
    category: str
    # The parameters its words use, which every sender must pass (send_notification refuses a
    # notification without one). Every placeholder of the subject and the body, in every
    # language, must be one of them (`manage.py check`, recipients/checks.py): a translation
    # cannot ask for a value no sender gives.
    params: frozenset[str] = frozenset()
    # Parameters that grant something to whoever reads them (a password-reset link): the
    # recipient gets them in the message, staff never see them (shown_params).
    secret: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Rendered:
    subject: str
    body: str
    language: str


@dataclass(frozen=True)
class Duplicate:
    """A second registration of a name already taken, refused: the first one stands."""

    kind: str  # "category" or "message"
    name: str
    app: str  # the app whose registration was refused
    first_app: str  # the app that registered the name first


# Every notification's category, by name, and every message, by key, in registration order.
CATEGORIES: dict[str, Category] = {}
MESSAGES: dict[str, Message] = {}
# Which app registered each one, for the checks to name (an app's label; a module's name when
# the registering code is in no installed app).
CATEGORY_APPS: dict[str, str] = {}
MESSAGE_APPS: dict[str, str] = {}
# Registrations refused because the name was taken: `manage.py check` reports each.
DUPLICATES: list[Duplicate] = []

# The module each installed app registers its entries from.
MODULE = "notifications"


def _caller_app() -> str:
    """The label of the app whose code called register_*(), found from the calling module as
    Django finds a model's app; the module's own name when no installed app contains it."""
    frame = inspect.currentframe()
    module = frame.f_back.f_back.f_globals.get("__name__", "") if frame else ""
    config = apps.get_containing_app_config(module)
    return config.label if config is not None else module


def _register(kind, entries, owners, name, entry, app) -> None:
    if name in entries:
        if owners[name] == app and entries[name] == entry:
            return  # the same entry again, from the same app: nothing changes
        DUPLICATES.append(Duplicate(kind=kind, name=name, app=app, first_app=owners[name]))
        return
    entries[name] = entry
    owners[name] = app


def register_category(name: str, category: Category, *, app: str | None = None) -> Category:
    """Add category under name, as registered by app (by default, the calling module's app).

    A name registered already keeps its first category; the second registration is recorded
    for `manage.py check` to report (recipients.E004) rather than raised, so the site still
    starts and the check names both apps."""
    _register("category", CATEGORIES, CATEGORY_APPS, name, category, app or _caller_app())
    return category


def register_message(key: str, message: Message, *, app: str | None = None) -> Message:
    """Add message under key, as registered by app (by default, the calling module's app).

    Its category may be registered later, by the same app or another: `manage.py check` holds
    every message to a registered category once all are in (recipients.E001)."""
    _register("message", MESSAGES, MESSAGE_APPS, key, message, app or _caller_app())
    return message


def unregister_category(name: str) -> None:
    """Remove the category registered under name (KeyError when there is none)."""
    del CATEGORIES[name]
    del CATEGORY_APPS[name]


def unregister_message(key: str) -> None:
    """Remove the message registered under key (KeyError when there is none)."""
    del MESSAGES[key]
    del MESSAGE_APPS[key]


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def fields(message: Message) -> set[str]:
    """The placeholders of message's subject and body, in the active language."""
    return _fields(str(message.subject)) | _fields(str(message.body))


# key → (the message registered, the parameters it needs): formatting its English templates
# under translation.override cost more than the rest of an enqueue's Python. Kept with the
# message it was read from, so a key registered again is read again.
_NEEDED: dict[str, tuple[Message, frozenset[str]]] = {}


def validate(*, key: str, params: Mapping[str, Any]) -> None:
    """Raise ValueError unless key is a known message and params fill all its blanks."""
    try:
        message = MESSAGES[key]
    except KeyError:
        known = ", ".join(sorted(MESSAGES))
        raise ValueError(f"Unknown message key {key!r}; known keys: {known}.") from None
    cached = _NEEDED.get(key)
    if cached is not None and cached[0] is message:
        needed = cached[1]
    else:
        with translation.override("en"):
            needed = frozenset(message.params | fields(message))
        _NEEDED[key] = (message, needed)
    missing = sorted(needed - set(params))
    if missing:
        raise ValueError(f"Message {key!r} needs the parameter(s): {', '.join(missing)}.")


def render(*, key: str, params: Mapping[str, Any], language: str) -> Rendered:
    """Return the message's subject and body in language."""
    message = MESSAGES[key]
    with translation.override(language):
        return Rendered(
            subject=str(message.subject).format(**params),
            body=str(message.body).format(**params),
            language=language,
        )


# What staff see in place of a secret parameter.
HIDDEN = "•••"


def shown_params(*, key: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """params as staff may see them: each of the message's secret parameters hidden (all of
    them, for a key the catalogue no longer has: nothing says which were secret)."""
    message = MESSAGES.get(key)
    if message is None:
        return dict.fromkeys(params, HIDDEN)
    return {name: HIDDEN if name in message.secret else value for name, value in params.items()}


# What render() raises on a stored notification it cannot render: a key removed since it was
# queued, a parameter its message no longer has, a template a translation broke.
RENDER_ERRORS = (KeyError, IndexError, ValueError)


def render_or_key(*, key: str, params: Mapping[str, Any], language: str) -> Rendered:
    """render(), or the key itself as subject and body when the message cannot be rendered:
    for pages that show stored notifications and must not fail on an old one."""
    try:
        return render(key=key, params=params, language=language)
    except RENDER_ERRORS:
        return Rendered(subject=key, body=key, language=language)
