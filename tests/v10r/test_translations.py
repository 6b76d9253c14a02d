"""The compiled catalogues are committed, so a fresh clone needs no GNU gettext; these tests
fail when a .po file and its .mo disagree, or when a catalogue has a gap."""

from __future__ import annotations

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
