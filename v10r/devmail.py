"""`make run`'s mail sink: every email the drain sends, printed as a person reads it.

aiosmtpd's own debugging handler prints the message as it travels, quoted-printable and all,
so a password-reset link arrives cut into `=`-ended pieces that cannot be clicked or copied.
This one decodes the text part and prints the headers a developer looks at.
"""

from __future__ import annotations

import email
import email.policy
import sys

# The headers worth reading, in this order; the rest are the transport's.
SHOWN_HEADERS = ("From", "To", "Subject", "List-Unsubscribe", "List-Unsubscribe-Post")
RULE = "-" * 72


def readable(content: bytes) -> str:
    """One email (its raw bytes) as headers and decoded plain text."""
    message = email.message_from_bytes(content, policy=email.policy.default)
    lines = [RULE]
    lines += [f"{name}: {message[name]}" for name in SHOWN_HEADERS if message[name] is not None]
    part = message.get_body(preferencelist=("plain",))
    lines += ["", part.get_content().rstrip() if part is not None else "(no text part)", RULE]
    return "\n".join(lines)


def sink_command(*, host: str, port: int) -> list[str]:
    """The command that runs the sink on host:port, printing to its standard output."""
    return [
        sys.executable,
        "-m",
        "aiosmtpd",
        "-n",
        "-c",
        f"{__name__}.PrintReadable",
        "-l",
        f"{host}:{port}",
    ]


class PrintReadable:
    """The aiosmtpd handler (`python -m aiosmtpd -c v10r.devmail.PrintReadable`)."""

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
        print(readable(envelope.original_content or envelope.content), flush=True)
        return "250 OK"
