"""Request bodies refused by their declared size, and requests refused by a view's rate
limit, before the CSRF check (or anything) reads them; a body no one read, within its
limit, dropped unparsed before the answer, but for a rate limit's refusal."""

from __future__ import annotations

import io

import pytest
from django.core.files.uploadhandler import FileUploadHandler
from django.db import connection
from django.test import Client

from core import middleware, ratelimit
from showcases import views

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


class CountingStream(io.BytesIO):
    """A request body that remembers how much of it anyone read, and in what pieces."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.taken = 0
        self.reads: list[int] = []

    def read(self, size=-1):
        chunk = super().read(size)
        self.taken += len(chunk)
        self.reads.append(len(chunk))
        return chunk

    def readline(self, size=-1):
        line = super().readline(size)
        self.taken += len(line)
        return line


def post_stream(
    url: str, stream: CountingStream, *, length: int, content_type: str, csrf_checks: bool
):
    """POST stream as the request body of a declared length, as a server hands it to Django."""
    return Client(enforce_csrf_checks=csrf_checks).generic(
        "POST",
        url,
        b"",
        content_type=content_type,
        CONTENT_LENGTH=str(length),
        **{"wsgi.input": stream},
    )


def multipart(size: int) -> tuple[bytes, str]:
    boundary = "bench-boundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\n'
            f"Content-Type: image/png\r\n\r\n"
        ).encode()
        + b"\0" * size
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


def spend(name: str, limit: int) -> None:
    for _ in range(limit):
        ratelimit.hit(key=f"{name}:127.0.0.1", limit=limit, window=views.LIMIT_WINDOW)


class RecordingUploadHandler(FileUploadHandler):
    """Notes every multipart body Django starts to parse."""

    parsed: list[int] = []

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        self.parsed.append(content_length)

    def receive_data_chunk(self, raw_data, start):
        return raw_data

    def file_complete(self, file_size):
        return None


@pytest.fixture
def recorded_parses(settings):
    settings.FILE_UPLOAD_HANDLERS = [f"{__name__}.RecordingUploadHandler"]
    RecordingUploadHandler.parsed = []
    return RecordingUploadHandler.parsed


@pytest.mark.parametrize(
    ("url", "name", "limit", "content_type"),
    [
        (ANALYSE, "analyse", views.ANALYSE_LIMIT, None),
        (TRY, "try", views.TRY_LIMIT, "application/x-www-form-urlencoded"),
    ],
)
def test_a_client_over_a_views_rate_limit_is_refused_and_its_body_never_read(
    url, name, limit, content_type, collected_static, recorded_parses
):
    spend(name, limit)
    body, multipart_type = multipart(1_000_000)
    if content_type:
        # Longer than a discarded piece: a form parsed would be read in one.
        body = b"fail=1&" + b"x" * 2_000_000
    stream = CountingStream(body)
    # With the CSRF check on, and no token: only a refusal before that check answers 429.
    response = post_stream(
        url,
        stream,
        length=len(body),
        content_type=content_type or multipart_type,
        csrf_checks=True,
    )
    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    # Nor read afterwards: the server ends the connection (tests/showcases/
    # test_refused_upload.py).
    assert stream.taken == 0
    assert recorded_parses == []


@pytest.mark.parametrize(
    ("url", "length", "status"),
    [
        ("/no-such-page/", 2_000_000, 404),
        # Without a CSRF cookie the check refuses before it reads the POST.
        (TRY, 2_000_000, 403),
    ],
)
def test_a_body_within_its_limit_that_no_one_read_is_dropped_before_the_answer(
    url, length, status, collected_static
):
    stream = CountingStream(b"x" * length)
    response = post_stream(
        url, stream, length=length, content_type="application/octet-stream", csrf_checks=True
    )
    assert response.status_code == status
    assert stream.taken == length
    assert max(stream.reads) <= middleware.DISCARD_CHUNK


@pytest.mark.parametrize(
    ("url", "length", "status"),
    [
        ("/no-such-page/", 2_621_440 + 1, 404),
        (TRY, 2_621_440 + 1, 413),
        (ANALYSE, 20 * 2**20 + 64 * 1024 + 1, 413),
    ],
)
def test_a_body_over_its_limit_is_never_read(url, length, status, collected_static):
    # The connection closes after such an answer anyway; reading the body would only spend
    # the time it takes to carry it.
    stream = CountingStream(b"x" * 1024)
    response = post_stream(
        url, stream, length=length, content_type="application/octet-stream", csrf_checks=False
    )
    assert response.status_code == status
    assert stream.taken == 0


def test_a_request_the_rate_limited_view_does_not_take_is_not_counted(client):
    assert client.get(ANALYSE).status_code == 405
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM v10r_rate_limit_windows")
        assert cursor.fetchone() == (0,)


def test_a_client_under_the_limit_still_reaches_the_view_and_is_counted(client):
    response = client.post(ANALYSE, {})
    assert response.status_code == 400  # no image: the view itself answered
    assert ratelimit.hit(key="analyse:127.0.0.1", limit=99, window=views.LIMIT_WINDOW).hits == 2


@pytest.mark.parametrize(
    "url",
    [
        "/admin/jobs/jobrun/?status__exact=%00",
        "/admin/jobs/jobrun/?slug=%00",
        "/admin/recipients/channeladdress/?channel__exact=%00",
        "/admin/notifications/notificationdelivery/?q=a%00b",
        "/ru/showcases/jobs/?%00=1",
        "/showcases/workers/queue/?x=%00",
    ],
)
def test_a_nul_in_the_query_string_is_a_400_wherever_it_goes(admin_client, url):
    # The admin's filters and search took the NUL to PostgreSQL, which refuses it in text (a
    # 500); the public pages refuse it the same way, whatever they do with their query.
    response = admin_client.get(url)
    assert response.status_code == 400
