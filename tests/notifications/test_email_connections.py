"""The email channel keeps one SMTP connection per sender thread: against real servers on
loopback that limit, drop, and encrypt connections."""

from __future__ import annotations

import ssl
import time
from datetime import timedelta

import pytest

import transports as channels
from notifications.enqueue import send_notification
from notifications.models import NotificationDelivery, Status
from notifications.worker import Worker
from tests.smtp import SMTPServer, self_signed_certificate
from transports import email as email_channel


def queue_emails(django_user_model, count: int, *, start: int = 0) -> list[int]:
    ids = []
    for n in range(start, start + count):
        recipient = django_user_model.objects.create_user(f"reader{n}", email=f"r{n}@example.com")
        notification = send_notification(
            user=recipient,
            type="welcome",
            params={"name": f"Reader {n}"},
            channels=["email"],
        ).notification
        ids.append(notification.deliveries.get().pk)
    return ids


@pytest.fixture
def mail_to(settings, smtp_server):
    settings.MAILERS = {"default": smtp_server.mailer(timeout=5)}
    return smtp_server


def sent_once(server: SMTPServer, ids: list[int]) -> None:
    """Every delivery is sent, on its first attempt, and the server got it exactly once."""
    rows = NotificationDelivery.objects.filter(pk__in=ids)
    assert sorted(rows.values_list("status", "attempts").distinct()) == [(Status.SENT, 1)]
    counted = server.mailbox.message_ids()
    assert sorted(counted.values()) == [1] * len(ids)
    assert set(counted) == set(rows.values_list("provider_message_id", flat=True))


def drain_and_check_sent_once(
    worker: Worker, server: SMTPServer, ids: list[int], *, concurrency: int
) -> None:
    """One batch sends every delivery, none left to retry, and each reaches the server once."""
    report = worker.drain_once(concurrency=concurrency)
    assert (report.sent, report.retrying) == (len(ids), 0)
    sent_once(server, ids)


def test_a_sender_keeps_its_connection_across_messages_and_batches(
    db, django_user_model, mail_to, loop_worker
):
    first = queue_emails(django_user_model, 10)
    assert loop_worker.drain_once(concurrency=1).sent == 10
    second = queue_emails(django_user_model, 10, start=10)
    assert loop_worker.drain_once(concurrency=1).sent == 10
    sent_once(mail_to, first + second)
    # Twenty messages in two batches over one connection, still open.
    assert (len(mail_to.mailbox.sessions), mail_to.mailbox.quits) == (1, 0)
    assert channels.get("email").open_connections() == 1
    # Stopping the worker says goodbye on it.
    loop_worker.close()
    assert channels.get("email").open_connections() == 0
    assert mail_to.mailbox.quits == 1


def test_each_sender_thread_keeps_a_connection_of_its_own(
    db, django_user_model, mail_to, loop_worker
):
    ids = queue_emails(django_user_model, 40)
    assert loop_worker.drain_once(concurrency=4, batch_size=20).sent == 20
    assert loop_worker.drain_once(concurrency=4, batch_size=20).sent == 20
    sent_once(mail_to, ids)
    assert 1 <= len(mail_to.mailbox.sessions) <= 4  # at most one per sender, over two batches
    assert mail_to.mailbox.quits == 0
    loop_worker.close()
    assert mail_to.mailbox.quits == len(mail_to.mailbox.sessions)


def test_a_quiet_tick_closes_connections_left_idle(
    db, django_user_model, mail_to, loop_worker, monkeypatch
):
    queue_emails(django_user_model, 6)
    assert loop_worker.drain_once(concurrency=2).sent == 6
    assert channels.get("email").open_connections() >= 1
    monkeypatch.setattr(email_channel.EmailChannel, "idle_seconds", 0.0)
    loop_worker.tick()  # nothing due: the queue rests
    assert channels.get("email").open_connections() == 0
    assert mail_to.mailbox.quits == len(mail_to.mailbox.sessions)


def test_a_worker_without_a_loop_leaves_no_connection_open_after_its_tick(
    db, django_user_model, mail_to, cron_worker
):
    queue_emails(django_user_model, 5)
    assert cron_worker.tick(budget=timedelta(seconds=20)).sent == 5
    assert channels.get("email").open_connections() == 0
    assert mail_to.mailbox.quits == len(mail_to.mailbox.sessions)


def test_a_server_that_closes_after_three_messages_costs_no_attempt(
    db, django_user_model, mail_to, loop_worker
):
    mail_to.mailbox.per_connection = 3
    ids = queue_emails(django_user_model, 20)
    drain_and_check_sent_once(loop_worker, mail_to, ids, concurrency=2)
    # Each connection carried at most three: the rest went again on new ones.
    assert len(mail_to.mailbox.sessions) >= 7


def test_a_server_that_drops_every_connection_mid_batch_costs_no_attempt(
    db, django_user_model, mail_to, loop_worker
):
    mail_to.mailbox.drop_after = 8
    ids = queue_emails(django_user_model, 24)
    drain_and_check_sent_once(loop_worker, mail_to, ids, concurrency=4)
    # Every cut connection was replaced, by the sender that found it cut.
    assert mail_to.mailbox.dropped >= 1
    assert len(mail_to.mailbox.sessions) >= 1 + mail_to.mailbox.dropped


def test_a_connection_cut_during_data_is_a_retry_not_an_instant_resend(
    db, django_user_model, mail_to, loop_worker
):
    # The server may have the message: sending it again at once could deliver it twice, so
    # it waits for its backoff like any other retryable failure.
    [first, second] = queue_emails(django_user_model, 2)
    assert loop_worker.drain_once(concurrency=1, batch_size=1).sent == 1
    mail_to.mailbox.drop_in_data = True
    assert loop_worker.drain_once(concurrency=1, batch_size=1).retrying == 1
    stored = NotificationDelivery.objects.get(pk=second)
    assert (stored.status, stored.attempts, stored.error_code) == (
        Status.PENDING,
        1,
        "SMTP_UNAVAILABLE",
    )
    assert len(mail_to.mailbox.messages) == 2  # one try each, no second copy
    assert NotificationDelivery.objects.get(pk=first).status == Status.SENT


@pytest.mark.parametrize(
    ("timeout", "step_delay", "greeting_delay"),
    [
        # The server now drips its replies: the new connection cannot finish in the time
        # the message had left.
        pytest.param(1.0, 0.6, 0.0, id="replies-drip"),
        # MAIL on the kept connection takes most of the message's 2 s before the server
        # turns out to have gone; its replacement connects at once but greets late. Waiting
        # a whole timeout for the greeting would end at 3.5 s, past the worst case the
        # lease relies on.
        pytest.param(2.0, 1.5, 5.0, id="greeting-late"),
    ],
)
def test_the_deadline_covers_the_reconnection(
    db, django_user_model, settings, mail_to, loop_worker, timeout, step_delay, greeting_delay
):
    settings.MAILERS = {"default": mail_to.mailer(timeout=timeout)}
    [_, second] = queue_emails(django_user_model, 2)
    assert loop_worker.drain_once(concurrency=1, batch_size=1).sent == 1
    # The kept connection is cut, and the server turns slow.
    mail_to.mailbox.drop()
    mail_to.mailbox.step_delay = step_delay
    mail_to.mailbox.greeting_delay = greeting_delay
    connections = mail_to.mailbox.connections
    started = time.monotonic()
    assert loop_worker.drain_once(concurrency=1, batch_size=1).retrying == 1
    assert time.monotonic() - started < timeout + 1  # EMAIL_TIMEOUT + 1 s
    assert (mail_to.mailbox.dropped, mail_to.mailbox.connections - connections) == (1, 1)
    stored = NotificationDelivery.objects.get(pk=second)
    assert (stored.status, stored.error_code) == (Status.PENDING, "TIMEOUT")


def tls_server_for(folder, *, implicit_tls: bool = False) -> SMTPServer:
    certificate, key = self_signed_certificate(folder)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    server = SMTPServer(tls_context=context, implicit_tls=implicit_tls)
    server.certificate = certificate
    return server


@pytest.fixture
def tls_server(tmp_path):
    server = tls_server_for(tmp_path)
    yield server
    server.stop()


@pytest.fixture
def implicit_tls_server(tmp_path):
    server = tls_server_for(tmp_path, implicit_tls=True)
    yield server
    server.stop()


def test_starttls_is_negotiated_once_per_connection_and_kept(
    db, django_user_model, settings, tls_server, loop_worker, monkeypatch
):
    # The client trusts the self-signed certificate as it would a real one: through the
    # default verify paths, which OpenSSL reads from SSL_CERT_FILE.
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_server.certificate))
    settings.MAILERS = {"default": tls_server.mailer(timeout=5, use_tls=True)}
    ids = queue_emails(django_user_model, 12)
    assert loop_worker.drain_once(concurrency=2).sent == 12
    sent_once(tls_server, ids)
    sessions = len(tls_server.mailbox.sessions)
    assert 1 <= sessions <= 2
    assert tls_server.mailbox.tls_sessions == sessions  # the server refuses MAIL before TLS


def test_a_certificate_nobody_trusts_is_a_retryable_tls_failure(
    db, django_user_model, settings, tls_server, loop_worker
):
    settings.MAILERS = {"default": tls_server.mailer(timeout=5, use_tls=True)}
    [delivery_id] = queue_emails(django_user_model, 1)
    assert loop_worker.drain_once().retrying == 1
    stored = NotificationDelivery.objects.get(pk=delivery_id)
    assert (stored.status, stored.error_code) == (Status.PENDING, "SMTP_TLS")
    assert "certificate verify failed" in stored.error_message
    assert tls_server.mailbox.messages == []


def test_implicit_tls_checks_the_certificate_against_the_host_and_keeps_the_connection(
    db, django_user_model, settings, implicit_tls_server, loop_worker, monkeypatch
):
    # The server speaks nothing but TLS. Its certificate names 127.0.0.1, the host the
    # client was given: it is checked against that name, which the client must remember
    # from its constructor (smtplib refuses an empty one before the handshake).
    monkeypatch.setenv("SSL_CERT_FILE", str(implicit_tls_server.certificate))
    settings.MAILERS = {"default": implicit_tls_server.mailer(timeout=5, use_ssl=True)}
    ids = queue_emails(django_user_model, 3)
    assert loop_worker.drain_once(concurrency=1).sent == 3
    sent_once(implicit_tls_server, ids)
    assert len(implicit_tls_server.mailbox.sessions) == 1  # one connection, kept
