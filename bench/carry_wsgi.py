"""A WSGI application that carries a request's body and nothing else, for
bench/refused_upload.py: it reads the whole body from gunicorn in 1 MB pieces, drops it and
answers 404 (a GET, the readiness probe's, gets 200). What a POST costs here is what
gunicorn's reading of the bytes costs: the floor under any answer that keeps the connection
usable for the next request."""

from __future__ import annotations

PIECE = 2**20


def application(environ, start_response):
    stream = environ["wsgi.input"]
    try:
        left = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        left = 0
    while left > 0 and (piece := stream.read(min(PIECE, left))):
        left -= len(piece)
    status = "200 OK" if environ["REQUEST_METHOD"] == "GET" else "404 Not Found"
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", "0")])
    return [b""]
