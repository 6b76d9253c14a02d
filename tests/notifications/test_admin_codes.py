"""The error codes the console names as examples are codes the code really writes: a search
for one nobody writes finds nothing, and teaches staff a word the queue never uses."""

from __future__ import annotations

import ast
import html
import re
from pathlib import Path

import pytest
from django.contrib import admin
from django.urls import reverse

import notifications
import recipients
import transports

# A code as the queue writes them: capitals and digits, with at least one underscore.
CODE = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]\b")


def written_codes() -> list[re.Pattern]:
    """Every code passed to a channel error (ChannelError, HttpChannelError) or as code= to
    anything, found in the source of the engine, the recipients' rules and the channels:
    literals, and f-strings read as patterns (HTTP_{status})."""
    found = []
    rooms = (notifications, recipients, transports)
    paths = [p for room in rooms for p in Path(room.__file__).parent.rglob("*.py")]
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", "")
            values = [k.value for k in node.keywords if k.arg == "code"]
            if name.endswith("Error") and node.args:
                values.append(node.args[0])
            for value in values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    found.append(re.compile(re.escape(value.value)))
                elif isinstance(value, ast.JoinedStr):
                    parts = [
                        re.escape(p.value) if isinstance(p, ast.Constant) else "[0-9]+"
                        for p in value.values
                    ]
                    found.append(re.compile("".join(parts)))
    return found


def help_texts() -> list[str]:
    texts = []
    for model_admin in admin.site._registry.values():
        texts.append(str(model_admin.search_help_text or ""))
        texts += [str(getattr(f, "help_text", "")) for f in model_admin.model._meta.get_fields()]
    return texts


def test_the_code_finder_sees_literals_and_patterns():
    codes = written_codes()
    for code in ("WEBHOOK_NO_SECRET", "HTTP_503", "SMTP_550", "BOT_BLOCKED", "WORKER_ERROR"):
        assert any(p.fullmatch(code) for p in codes), code
    assert not any(p.fullmatch("UPSTREAM_503") for p in codes)


def test_every_code_in_the_consoles_help_is_one_the_queue_writes():
    codes = written_codes()
    mentioned = {code for text in help_texts() for code in CODE.findall(text)}
    assert mentioned, "no help text names a code: nothing was checked"
    unwritten = {code for code in mentioned if not any(p.fullmatch(code) for p in codes)}
    assert unwritten == set()


@pytest.mark.parametrize("prefix", ["", "/ru", "/de"])
def test_the_search_help_shown_in_each_language_names_a_written_code(admin_client, prefix):
    codes = written_codes()
    url = prefix + reverse("admin:notifications_notificationdelivery_changelist")
    body = html.unescape(admin_client.get(url).content.decode())
    [help_text] = re.findall(r'id="searchbar_helptext">(.*?)<', body, flags=re.S)
    mentioned = CODE.findall(help_text)
    assert mentioned
    assert all(any(p.fullmatch(code) for p in codes) for code in mentioned), mentioned
