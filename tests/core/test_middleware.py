"""Request bodies refused by their declared size, before the CSRF check (or anything) reads
them."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

TRY = "/showcases/workers/try/"
ANALYSE = "/showcases/workers/analyse/"


def test_a_body_declared_larger_than_the_default_limit_is_refused_unread(client):
    # The declared length is a lie the test client would fail to read: a 413 proves nothing
    # tried to.
    response = client.generic(
        "POST",
        TRY,
        b"fail=1",
        content_type="application/x-www-form-urlencoded",
        CONTENT_LENGTH=str(2_621_440 + 1),
    )
    assert response.status_code == 413
    assert response.json() == {"error": "The request is larger than 2.5 MB."}


def test_the_limit_is_said_in_the_visitors_language(client):
    response = client.generic(
        "POST",
        "/de" + TRY,
        b"",
        content_type="application/x-www-form-urlencoded",
        CONTENT_LENGTH=str(10**9),
    )
    assert response.status_code == 413
    assert response.json() == {"error": "Die Anfrage ist größer als 2,5 MB."}


def test_the_analyse_view_declares_room_for_a_20_mb_image_and_no_more(client):
    over = client.generic(
        "POST",
        ANALYSE,
        b"",
        content_type="multipart/form-data; boundary=x",
        CONTENT_LENGTH=str(20 * 2**20 + 64 * 1024 + 1),
    )
    assert over.status_code == 413
    assert over.json() == {"error": "The image is larger than 20 MB."}
    # Within the limit the view itself answers (here: no image in an empty body).
    within = client.generic(
        "POST", ANALYSE, b"--x--\r\n", content_type="multipart/form-data; boundary=x"
    )
    assert within.status_code == 400


def test_ordinary_requests_pass_through(client):
    assert client.get("/").status_code == 200
    assert client.post(TRY, {"fail": ""}).status_code == 302
