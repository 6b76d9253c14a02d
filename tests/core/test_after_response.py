"""Work deferred until a response is closed: run then, once, and a failure logged."""

from __future__ import annotations

import logging

from django.http import HttpResponse

from core import after_response


def test_work_runs_when_the_response_is_closed_not_before():
    done = []
    response = after_response.defer(HttpResponse("ok"), lambda: done.append("work"))
    assert done == []
    response.close()
    assert done == ["work"]


def test_a_failure_is_logged_with_its_traceback_and_later_work_still_runs(caplog):
    done = []

    def fails():
        raise RuntimeError("the database went away")

    response = after_response.defer(HttpResponse("ok"), fails)
    after_response.defer(response, lambda: done.append("next"))
    with caplog.at_level(logging.ERROR, logger="core.after_response"):
        response.close()
    [record] = caplog.records
    assert record.getMessage() == "Work after the response failed"
    assert record.exc_info[1].args == ("the database went away",)
    assert done == ["next"]
