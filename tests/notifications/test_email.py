"""The email channel against real SMTP servers on loopback."""

from __future__ import annotations

import email
import email.policy
import time

import pytest

from notifications import worker
from notifications.enqueue import send_notification
from notifications.models import NotificationDelivery, SkipReason, Status
from tests.smtp import SilentServer
from transports.email import sender_of


def queue_email(django_user_model, address: str, *, name: str = "Ada") -> int:
    recipient = django_user_model.objects.create_user(address.split("@")[0], email=address)
    notification = send_notification(
        user=recipient,
        type="welcome",
        params={"name": name},
        channels=["email"],
    ).notification
    return notification.deliveries.get().pk


@pytest.fixture
def mail_to(settings, smtp_server):
    settings.MAILERS = {"default": smtp_server.mailer(timeout=5)}
    return smtp_server


def test_an_accepted_email_is_sent_with_a_stable_message_id(db, django_user_model, mail_to):
    delivery_id = queue_email(django_user_model, "ada@example.com")
    report = worker.drain_once()
    assert (report.claimed, report.sent) == (1, 1)
    [message] = mail_to.mailbox.messages
    assert message["To"] == "ada@example.com"
    assert message["Subject"] == "Welcome to v10r, Ada"
    stored = NotificationDelivery.objects.get(pk=delivery_id)
    assert stored.status == Status.SENT
    assert stored.provider_message_id == message["Message-ID"]
    assert message["Message-ID"].startswith(f"<delivery-{delivery_id}@")


def test_a_4xx_reply_leaves_the_row_pending_for_a_retry(db, django_user_model, mail_to):
    delivery_id = queue_email(django_user_model, "busy@example.com")
    assert worker.drain_once().retrying == 1
    stored = NotificationDelivery.objects.get(pk=delivery_id)
    assert (stored.status, stored.error_code) == (Status.PENDING, "SMTP_451")
    assert "try again later" in stored.error_message


def test_a_5xx_reply_fails_the_row_for_good(db, django_user_model, mail_to):
    delivery_id = queue_email(django_user_model, "nope@example.com")
    assert worker.drain_once().failed == 1
    stored = NotificationDelivery.objects.get(pk=delivery_id)
    assert (stored.status, stored.error_code) == (Status.FAILED, "SMTP_550")


def test_a_line_break_in_the_subject_fails_for_good_without_touching_the_network(
    db, django_user_model, mail_to
):
    delivery_id = queue_email(
        django_user_model, "eve@example.com", name="Eve\r\nBcc: everyone@example.com"
    )
    assert worker.drain_once().failed == 1
    stored = NotificationDelivery.objects.get(pk=delivery_id)
    assert (stored.status, stored.error_code, stored.attempts) == (Status.FAILED, "BAD_MESSAGE", 1)
    assert "line breaks" in stored.error_message
    assert mail_to.mailbox.messages == []


def test_a_malformed_address_fails_without_touching_the_network(db, django_user_model, mail_to):
    delivery_id = queue_email(django_user_model, "not an address")
    assert worker.drain_once().failed == 1
    assert NotificationDelivery.objects.get(pk=delivery_id).error_code == "BAD_ADDRESS"
    assert mail_to.mailbox.messages == []


def test_a_user_whose_email_went_after_the_enqueue_has_that_row_skipped_only(
    db, django_user_model, mail_to
):
    without = queue_email(django_user_model, "ada@example.com")
    django_user_model.objects.filter(username="ada").update(email="")
    with_address = queue_email(django_user_model, "bob@example.com")
    report = worker.drain_once()
    assert (report.unwanted, report.sent) == (1, 1)
    skipped = NotificationDelivery.objects.get(pk=without)
    assert (skipped.status, skipped.skip_reason) == (Status.SKIPPED, SkipReason.NO_ADDRESS)
    assert NotificationDelivery.objects.get(pk=with_address).status == Status.SENT


def test_a_server_that_never_answers_times_out_within_the_email_timeout(
    db, django_user_model, settings
):
    silent = SilentServer()
    settings.MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": silent.port, "timeout": 1.0},
        }
    }
    delivery_id = queue_email(django_user_model, "ada@example.com")
    started = time.monotonic()
    try:
        report = worker.drain_once()
    finally:
        silent.stop()
    elapsed = time.monotonic() - started
    assert report.retrying == 1
    assert elapsed < 1.0 + 1.0  # EMAIL_TIMEOUT + 1 s
    stored = NotificationDelivery.objects.get(pk=delivery_id)
    assert stored.status == Status.PENDING
    assert stored.error_code in {"TIMEOUT", "SMTP_UNAVAILABLE"}


def test_a_mailer_without_a_timeout_sends_under_the_channels_own(
    db, django_user_model, settings, mail_to
):
    # Django leaves the socket blocking when OPTIONS has no timeout; the channel's deadline
    # (and each socket operation) then takes its default of 10 s.
    mailer = mail_to.mailer(timeout=5)
    del mailer["OPTIONS"]["timeout"]
    settings.MAILERS = {"default": mailer}
    delivery_id = queue_email(django_user_model, "ada@example.com")
    assert worker.drain_once().sent == 1
    assert NotificationDelivery.objects.get(pk=delivery_id).status == Status.SENT
    assert len(mail_to.mailbox.messages) == 1


def test_a_server_that_drips_its_replies_is_cut_off_by_the_total_deadline(
    db, django_user_model, settings, mail_to
):
    # Each reply comes within the per-operation timeout, but the whole send cannot finish.
    mail_to.mailbox.step_delay = 0.6
    settings.MAILERS = {"default": mail_to.mailer(timeout=1.0)}
    delivery_id = queue_email(django_user_model, "ada@example.com")
    started = time.monotonic()
    worker.drain_once()
    assert time.monotonic() - started < 2.0
    stored = NotificationDelivery.objects.get(pk=delivery_id)
    assert (stored.status, stored.error_code) == (Status.PENDING, "TIMEOUT")


def test_a_message_in_any_language_arrives_as_it_was_written(
    db, django_user_model, settings, mail_to
):
    settings.DEFAULT_FROM_EMAIL = "Рассылка v10r <notifications@пример.рф>"
    delivery_id = queue_email(django_user_model, "ada@bücher.example", name="Ада " + "ж" * 200)
    assert worker.drain_once().sent == 1
    [raw] = mail_to.mailbox.raw
    assert b"\r\n" in raw and b"\n" not in raw.replace(b"\r\n", b"")  # CRLF only
    assert all(len(line) <= 998 for line in raw.split(b"\r\n"))  # SMTP's line limit
    assert raw.isascii()  # 7-bit: no server can refuse it for 8-bit content
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert message["Subject"] == "Welcome to v10r, Ада " + "ж" * 200
    assert message["From"].addresses[0].display_name == "Рассылка v10r"
    assert message["From"].addresses[0].addr_spec == "notifications@xn--e1afmkfd.xn--p1ai"
    assert message["To"] == "ada@xn--bcher-kva.example"
    assert (
        message["Message-ID"]
        == NotificationDelivery.objects.get(pk=delivery_id).provider_message_id
    )
    assert message["Content-Language"] == "en"
    assert "Ада " + "ж" * 200 in message.get_content()


def test_a_mailer_that_is_not_smtp_gets_a_django_message(db, django_user_model, settings):
    from django.core import mail

    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
    queue_email(django_user_model, "ada@example.com")
    assert worker.drain_once().sent == 1
    [sent] = mail.outbox
    assert (sent.to, sent.subject) == (["ada@example.com"], "Welcome to v10r, Ada")
    assert sent.extra_headers["Message-ID"].startswith("<delivery-")


@pytest.mark.parametrize(
    "name", ["Eve\x0b\x0bWe suspended you", "Eve\x1cX-Evil: 1", "Eve\x7f", "Eve\u2028Bcc: x"]
)
def test_any_character_that_breaks_a_header_line_fails_for_good(
    db, django_user_model, mail_to, name
):
    delivery_id = queue_email(django_user_model, "eve@example.com", name=name)
    assert worker.drain_once().failed == 1
    stored = NotificationDelivery.objects.get(pk=delivery_id)
    assert (stored.status, stored.error_code) == (Status.FAILED, "BAD_MESSAGE")
    assert mail_to.mailbox.messages == []


def test_long_words_and_long_names_are_folded_under_smtps_line_limit(
    db, django_user_model, settings, mail_to
):
    settings.DEFAULT_FROM_EMAIL = f"{'Рассылка проекта ' * 40}<notifications@example.com>"
    queue_email(django_user_model, "ada@example.com", name="x" * 1000)
    assert worker.drain_once().sent == 1
    [raw] = mail_to.mailbox.raw
    assert max(len(line) for line in raw.split(b"\r\n")) <= 78
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert message["Subject"] == "Welcome to v10r, " + "x" * 1000
    assert message["From"].addresses[0].addr_spec == "notifications@example.com"


@pytest.mark.parametrize(
    ("sender", "says"),
    [
        ("nobody", "is not an email address"),
        ("v10r <>", "is not an email address"),
        ("v10r\n<a@example.com>", "line break"),
    ],
)
def test_a_sender_that_is_not_an_address_stops_start_up(settings, sender, says):
    from django.core import checks

    sender_of.cache_clear()
    settings.DEFAULT_FROM_EMAIL = sender
    [error] = [e for e in checks.run_checks() if e.id == "transports.E010"]
    assert says in error.msg
