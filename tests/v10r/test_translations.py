"""The compiled catalogues are committed, so a fresh clone needs no GNU gettext; these tests
fail when a .po file and its .mo disagree, or when a catalogue has a gap."""

from __future__ import annotations

import re
from pathlib import Path

import polib
import pytest
from django.conf import settings

CATALOGUES = sorted(Path(settings.BASE_DIR, "locale").glob("*/LC_MESSAGES/django.po"))


def test_there_is_a_catalogue_for_every_language_but_english():
    languages = {path.parts[-3] for path in CATALOGUES}
    assert languages == {code for code, _ in settings.LANGUAGES} - {"en"}


@pytest.mark.parametrize("po_path", CATALOGUES, ids=lambda p: p.parts[-3])
def test_the_compiled_catalogue_matches_its_source(po_path):
    po = polib.pofile(str(po_path))
    mo = polib.mofile(str(po_path.with_suffix(".mo")))
    source = {(e.msgctxt, e.msgid): e.msgstr for e in po.translated_entries()}
    compiled = {(e.msgctxt, e.msgid): e.msgstr for e in mo if e.msgid}
    assert compiled == source, "run `make messages` (or compilemessages) and commit the .mo"


@pytest.mark.parametrize("po_path", CATALOGUES, ids=lambda p: p.parts[-3])
def test_every_message_is_translated_and_none_is_fuzzy(po_path):
    po = polib.pofile(str(po_path))
    gaps = [e.msgid for e in po if not e.obsolete and (not e.translated() or "fuzzy" in e.flags)]
    assert gaps == []


# The drain loop has one name in each language: German had four (Drain-Loop, Versandschleife,
# Drain-Schleife and a bare Schleife), which read as four different things. The name as a
# pattern, for Russian's cases ("цикла обработки").
LOOP_NAMES = {
    "de": (r"versandschleife", ("drain-loop", "drain-schleife", "drain loop", "schleife")),
    "ru": (r"цикл\w* обработки", ("drain-loop", "drain-schleife", "versandschleife", "schleife")),
}


@pytest.mark.parametrize("language", sorted(LOOP_NAMES))
def test_the_drain_loop_has_one_name_in_every_message(language):
    chosen, others = LOOP_NAMES[language]
    po = polib.pofile(str(Path(settings.BASE_DIR, "locale", language, "LC_MESSAGES/django.po")))
    unnamed, misnamed = [], []
    for entry in po:
        if entry.obsolete:
            continue
        # A plural entry keeps its words in its forms; its msgstr stays empty.
        texts = entry.msgstr_plural.values() if entry.msgid_plural else [entry.msgstr]
        for text in texts:
            # Every other name is gone once the chosen one is taken out of the text.
            rest = re.sub(chosen, "", text.lower())
            if any(other in rest for other in others):
                misnamed.append(text)
            # Every message about a (drain) loop uses the chosen name.
            about_loop = re.search(r"\bloop\b", entry.msgid, re.IGNORECASE)
            if about_loop and not re.search(chosen, text.lower()):
                unnamed.append((entry.msgid, text))
    assert misnamed == []
    assert unnamed == []


@pytest.mark.parametrize("po_path", CATALOGUES, ids=lambda p: p.parts[-3])
def test_every_plural_has_as_many_forms_as_its_language_declares(po_path):
    # msgfmt -c refuses a catalogue otherwise; Russian declares a fourth form, for fractions.
    po = polib.pofile(str(po_path))
    declared = int(po.metadata["Plural-Forms"].split("nplurals=")[1].split(";")[0])
    short = [e.msgid for e in po if e.msgid_plural and len(e.msgstr_plural) != declared]
    assert short == []


def translation_of(language: str, msgid: str, *, context: str | None = None) -> list[str]:
    po = polib.pofile(str(Path(settings.BASE_DIR, "locale", language, "LC_MESSAGES/django.po")))
    [entry] = [e for e in po if e.msgid == msgid and e.msgctxt == context and not e.obsolete]
    return list(entry.msgstr_plural.values()) if entry.msgid_plural else [entry.msgstr]


# What a walk through the site in Russian and German found, each as the catalogue had it and
# as a native writes it.
WALK = [
    # "Look into your emails" is no German; one checks one's email.
    ("de", "Check your email", None, "Sehen Sie in Ihre E-Mails", "Prüfen Sie Ihre E-Mails"),
    # The link is sent to the reader, at the address; not "to her".
    (
        "de",
        "Enter your account’s email address, and we will send it a link to choose a new password.",
        None,
        "wir schicken ihr",
        "wir schicken Ihnen an diese Adresse einen Link",
    ),
    # No comma after "wie gewünscht", and the refused thing named, not a bare "sie" after a
    # colon that reads as the reader's "Sie".
    (
        "de",
        "as you asked, the demo channel refused it",
        None,
        "wie gewünscht,",
        "Der Demo-Kanal hat die Benachrichtigung wie gewünscht abgelehnt",
    ),
    # A screen reader's "1 непрочитанных" did not agree with its number.
    ("ru", "unread", "after the inbox's unread count", "непрочитанных", "непрочитанное"),
    # "В 17 минут" read as "in 17 minutes"; "Bei Minute 17" is no German sentence.
    (
        "ru",
        "At %(minute)d minute past the hour",
        None,
        "В %(minute)d",
        "Каждый час в %(minute)d минуту",
    ),
    (
        "de",
        "At %(minute)d minute past the hour",
        None,
        "Bei Minute",
        "Stündlich, %(minute)d Minute nach der vollen Stunde",
    ),
]


@pytest.mark.parametrize(("language", "msgid", "context", "was", "native"), WALK)
def test_the_walks_findings_read_as_a_native_writes(language, msgid, context, was, native):
    texts = translation_of(language, msgid, context=context)
    # The first form is the one for 1 (or the only one).
    assert native in texts[0]
    assert was not in texts[0]
