"""A subject is shown as it was written, whatever it looks like."""

from __future__ import annotations

import email
import email.policy

from transports import email as channel


def subject_read_back(subject: str) -> str:
    letter = channel._compose(
        subject=subject, body="b", to="ada@example.com", message_id="<m@v10r>", language="en"
    )
    raw = letter.content
    return str(email.message_from_bytes(raw, policy=email.policy.default)["Subject"])


def test_text_that_looks_like_an_encoded_word_is_shown_as_typed():
    name = "Welcome to v10r, =?utf-8?q?=0D=0ABcc:_x@y?="
    assert subject_read_back(name) == name


def test_a_plain_subject_is_shown_as_it_is():
    assert subject_read_back("Welcome to v10r, Ada") == "Welcome to v10r, Ada"
