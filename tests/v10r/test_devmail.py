"""`make run`'s mail sink prints an email decoded, its links whole."""

from __future__ import annotations

import smtplib
import socket
import subprocess
from email.message import EmailMessage

from tests.helpers import BASE_DIR, poll
from v10r import devmail

LINK = "http://127.0.0.1:8000/ru/account/password-reset/MQ/cw1234-0123456789abcdef0123456789abcdef/"


def letter() -> EmailMessage:
    message = EmailMessage()
    message["From"] = "v10r <noreply@v10r.example>"
    message["To"] = "ada@example.com"
    message["Subject"] = "Сброс пароля"
    message["List-Unsubscribe"] = "<https://v10r.example/unsubscribe/1.account.email.x/>"
    # Cyrillic makes the body quoted-printable, which cuts the long link into pieces.
    message.set_content(
        f"Чтобы выбрать новый пароль, откройте ссылку:\n\n{LINK}\n", cte="quoted-printable"
    )
    return message


def test_the_link_of_a_quoted_printable_body_is_printed_whole():
    raw = letter().as_bytes()
    assert LINK.encode() not in raw  # as sent, it is cut
    shown = devmail.readable(raw)
    assert LINK in shown.splitlines()
    assert "Subject: Сброс пароля" in shown
    assert "List-Unsubscribe: <https://v10r.example/unsubscribe/1.account.email.x/>" in shown


def test_the_sink_prints_what_it_receives():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sink = subprocess.Popen(
        devmail.sink_command(host="127.0.0.1", port=port),
        cwd=BASE_DIR,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:

        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                return False
            return True

        assert poll(listening, seconds=20, every=0.1)
        with smtplib.SMTP("127.0.0.1", port, timeout=10) as smtp:
            smtp.send_message(letter())
    finally:
        sink.terminate()
        output, _ = sink.communicate(timeout=20)
    assert LINK in output.splitlines(), output
