"""The bad channel addresses and the words each is refused in: one table for the staff
console and the preference centre, which check an address with the same rules."""

from __future__ import annotations

# (language prefix of the URL, channel, the address given, part of the refusal shown)
REFUSED_ADDRESSES = [
    ("", "telegram", "not a chat", "A Telegram chat id is a number"),
    ("", "discord", "12ab", "A Discord user id is a number"),
    ("", "webhook", "ftp://hooks.example/", "Only http and https URLs"),
    ("", "webhook", "https://user:pw@hooks.example/", "user name or password"),
    ("", "webhook", "http://169.254.169.254/latest/", "169.254.169.254"),
    ("/ru", "webhook", "http://10.0.0.5/", "Отправлять на 10.0.0.5 нельзя: это частная сеть."),
    (
        "/de",
        "webhook",
        "http://10.0.0.5/",
        "10.0.0.5 darf nicht erreicht werden: ein privates Netz.",
    ),
    ("/ru", "webhook", "ftp://hooks.example/", "Разрешены только адреса http и https, а не 'ftp'."),
    (
        "/de",
        "webhook",
        "ftp://hooks.example/",
        "Nur http- und https-URLs sind erlaubt, nicht 'ftp'.",
    ),
    ("", "webhook", "https://no-such-host.invalid/", "does not resolve"),
    ("", "webhook", "https://hooks.example/" + "a" * 500, "at most 500 characters"),
    ("", "telegram", "10\x0001", "Null characters are not allowed."),
]
