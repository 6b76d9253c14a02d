"""What a visitor reads under each of their demo rows: what it waits for, or what became of it."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import translation

from core import platform
from notifications import worker
from notifications.heartbeat import LoopState, LoopStatus
from notifications.models import NotificationDelivery
from showcases import queue_demo
from tests.helpers import db_now, execute

pytestmark = pytest.mark.django_db

SERVER = platform.PLATFORMS["container"]


def loop(state=LoopState.RUNNING, *, ticked_ago: float = 5, interval: float = 15) -> LoopStatus:
    if state != LoopState.RUNNING:
        return LoopStatus(state, SERVER)
    return LoopStatus(
        state,
        SERVER,
        last_tick=db_now() - timedelta(seconds=ticked_ago),
        host="web-1",
        interval=timedelta(seconds=interval),
    )


def row(notification) -> NotificationDelivery:
    (delivery,) = queue_demo.feed([str(notification.pk)])
    return delivery


def note(delivery, status: LoopStatus | None = None) -> str:
    return queue_demo.explain(delivery, loop=status or loop(), max_attempts=5)


def test_a_fresh_row_says_its_commit_woke_the_loop_and_when_the_tick_would_find_it():
    delivery = row(queue_demo.enqueue(label="demo #1", fail=False))
    text = note(delivery, loop(ticked_ago=5, interval=15))
    # A number and its unit are held together by a no-break space (core/templatetags/units).
    assert re.fullmatch(
        r"Its commit sent the drain loop a wake-up; should the loop miss it, it still looks for "
        r"due rows every 15\xa0s, next in about (9|10)\xa0s\.",
        text,
    )


def test_a_fresh_row_without_a_loop_says_nothing_will_claim_it_yet():
    delivery = row(queue_demo.enqueue(label="demo #1", fail=False))
    assert note(delivery, loop(LoopState.STOPPED)) == (
        "No drain loop is running, so it waits until one starts."
    )
    assert "cron" in note(delivery, LoopStatus(LoopState.DORMANT, platform.PLATFORMS["vercel"]))


def test_an_overdue_tick_is_due_now_not_a_negative_wait():
    delivery = row(queue_demo.enqueue(label="demo #1", fail=False))
    assert note(delivery, loop(ticked_ago=30, interval=15)).endswith(
        "every 15\xa0s, and its next look is due now."
    )


def test_a_failing_row_shows_its_error_its_next_send_and_when_it_will_be_dead():
    notification = queue_demo.enqueue(label="demo #1", fail=True)
    worker.drain_once()
    delivery = row(notification)
    assert delivery.shown_status == "retrying"
    text = note(delivery)
    # The first wait is 30 s ± 15 %; should every send fail, 2 + 8 + 32 min follow it.
    assert re.fullmatch(
        r"Send 1 of 5 failed: as you asked, the demo channel refused it\. "
        r"The next send is in about (2[5-9]|3[0-4])\xa0s\. "
        r"Every send of it fails, so after send 5, in about 4[23]\xa0min, it is dead\.",
        text,
    ), text


def test_a_row_whose_next_send_is_due_says_so():
    notification = queue_demo.enqueue(label="demo #1", fail=True)
    worker.drain_once()
    execute(
        "UPDATE notifications.notification_deliveries SET next_attempt_at = now()"
        " WHERE notification_id = %s",
        [notification.pk],
    )
    assert "The next send is due now, at the drain loop's next look." in note(row(notification))


def test_a_delivered_row_and_a_dead_row_say_how_they_ended():
    sent = queue_demo.enqueue(label="demo #1", fail=False)
    dead = queue_demo.enqueue(label="demo #2", fail=True)
    execute(
        "UPDATE notifications.notification_deliveries SET attempts = 4, attempt_base = 0"
        " WHERE notification_id = %s",
        [dead.pk],
    )
    worker.drain_once()
    assert note(row(sent)) == "Delivered on send 1."
    assert row(dead).shown_status == "dead"
    assert note(row(dead)) == (
        "Given up after 5 failed sends: as you asked, the demo channel refused it."
    )


def test_the_note_is_in_the_visitors_language():
    notification = queue_demo.enqueue(label="demo #1", fail=True)
    worker.drain_once()
    with translation.override("ru"):
        text = note(row(notification))
    assert text.startswith("Отправка 1 из 5 не удалась"), text
    assert "мин" in text


@pytest.mark.parametrize(
    ("language", "said"),
    [
        ("en", "Given up after 1 failed send: as you asked, the demo channel refused it."),
        ("ru", "Попытки исчерпаны после 1 неудачной отправки: как вы и просили"),
        ("de", "Aufgegeben nach 1 gescheitertem Versuch:"),
    ],
)
def test_a_row_given_up_after_one_send_says_send_in_the_singular(settings, language, said):
    settings.DELIVERY_MAX_ATTEMPTS = 1
    notification = queue_demo.enqueue(label="demo #1", fail=True)
    worker.drain_once()
    delivery = row(notification)
    assert delivery.shown_status == "dead"
    with translation.override(language):
        text = queue_demo.explain(delivery, loop=loop(), max_attempts=1)
    assert text.startswith(said), text


def test_in_german_the_next_look_reads_as_the_versandschleifes_next_run():
    delivery = row(queue_demo.enqueue(label="demo #1", fail=False))
    with translation.override("de"):
        text = note(delivery, loop(ticked_ago=5, interval=15))
    assert re.fullmatch(
        r"Der Commit, der sie eingereiht hat, hat der Versandschleife ein Wecksignal geschickt; "
        r"verpasst sie es, sucht "
        r"sie trotzdem alle 15\xa0s nach fälligen Zeilen, der nächste Durchlauf folgt in etwa "
        r"(9|10)\xa0s\.",
        text,
    ), text


QUEUE = "/showcases/workers/queue/"


def pickup_in(client, prefix: str = "") -> list[str]:
    body = client.get(prefix + QUEUE, HTTP_HX_REQUEST="true").content.decode()
    return re.findall(r"<span [^>]*data-feed-pickup>([^<]*)</span>", body)


@pytest.mark.parametrize(
    ("prefix", "said"),
    [
        ("", "picked up in 12\xa0ms"),
        ("/ru", "взято в работу через 12\xa0мс"),
        ("/de", "nach 12\xa0ms abgeholt"),
    ],
)
def test_the_feed_says_how_soon_a_drain_loop_picked_the_try_up(client, prefix, said):
    client.post(prefix + "/showcases/workers/try/", HTTP_HX_REQUEST="true")
    assert pickup_in(client, prefix) == []  # not claimed yet: nothing to say
    # The test's one transaction gives the enqueue and the claim the same now(): queued 12 ms
    # before it, the row waits that long for the real drain.
    execute(
        "UPDATE notifications.notification_deliveries"
        " SET created_at = created_at - interval '12 milliseconds' WHERE channel = 'demo'"
    )
    assert worker.drain_once().sent == 1
    assert pickup_in(client, prefix) == [said]


def test_a_pickup_under_a_millisecond_does_not_read_as_no_time_at_all(client):
    client.post("/showcases/workers/try/", HTTP_HX_REQUEST="true")
    worker.drain_once()  # the same now() as the enqueue: a wait of 0
    assert pickup_in(client) == ["picked up in under 1\xa0ms"]


def test_a_row_claimed_again_shows_no_pickup_its_first_claims_time_is_gone(client):
    client.post("/showcases/workers/try/", {"fail": "1"}, HTTP_HX_REQUEST="true")
    execute(
        "UPDATE notifications.notification_deliveries"
        " SET created_at = created_at - interval '3 seconds' WHERE channel = 'demo'"
    )
    worker.drain_once()
    # Failed once and waiting out its backoff: its one claim is still the first.
    assert pickup_in(client) == ["picked up in 3\xa0s"]
    execute(
        "UPDATE notifications.notification_deliveries SET next_attempt_at = now()"
        " WHERE channel = 'demo'"
    )
    worker.drain_once()
    (delivery,) = NotificationDelivery.objects.filter(channel="demo")
    assert delivery.attempts == 2
    assert pickup_in(client) == []


@pytest.mark.parametrize(
    ("language", "said"),
    [
        ("en", "Cancelled before a drain loop sent it; it will not be sent."),
        ("ru", "Отменена до того, как цикл обработки её отправил; отправлена не будет."),
        ("de", "Storniert, bevor eine Versandschleife sie gesendet hat; sie wird nicht gesendet."),
    ],
)
def test_a_row_staff_cancelled_says_so_not_that_it_will_be_retried(language, said):
    from notifications import outbox

    delivery = row(queue_demo.enqueue(label="demo #1", fail=False))
    assert outbox.cancel([delivery.pk]) == {delivery.pk}
    with translation.override(language):
        assert note(row(delivery.notification)) == said
