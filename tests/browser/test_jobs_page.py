"""/showcases/jobs/ in Chromium, on the production static pipeline with the CSP enforced: the
demo job runs on a click and its run joins the live log at once, started by the visitor."""

from __future__ import annotations

import pytest

from jobs.models import JobRun, Trigger
from showcases import demo_job
from tests.browser.conftest import csp_violations

pytestmark = pytest.mark.browser

PAGE = "/showcases/jobs/"
PREFIX = {"en": "", "ru": "/ru", "de": "/de"}
VISITOR = {"en": "by visitor", "ru": "запустил: посетитель", "de": "von: Besucher"}
# The demo's result names the first state in the page's language.
PENDING = {"en": "pending: ", "ru": "ожидает: ", "de": "wartend: "}
RUN_BUTTON = ".run-demo button[type=submit]"
NEW_RUN = "#job-log li.is-new[data-run-slug=demo][data-run-trigger=visitor]"


@pytest.mark.parametrize("language", ["en", "ru", "de"])
def test_running_the_demo_job_adds_the_visitors_run_to_the_log_at_390_px(site, page, language):
    errors: list[str] = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(site.url + PREFIX[language] + PAGE)
    page.wait_for_selector("#job-log")
    assert page.locator("#job-log li[data-run-slug=demo]").count() == 0

    page.click(RUN_BUTTON)
    # Read in one go: the next poll redraws the log, and the row is no longer marked new.
    row = page.wait_for_function(
        """(selector) => {
            const li = document.querySelector(selector);
            return li && {
                status: li.dataset.runStatus,
                id: li.dataset.runId,
                text: li.innerText,
                result: li.querySelector("[data-run-result]")?.innerText ?? "",
            };
        }""",
        arg=NEW_RUN,
        timeout=10_000,
    ).json_value()
    assert row["status"] == "succeeded"
    assert VISITOR[language] in " ".join(row["text"].split())
    assert row["result"].startswith(PENDING[language])
    [run] = JobRun.objects.filter(slug=demo_job.SLUG)
    assert run.trigger == Trigger.VISITOR
    assert row["id"] == str(run.pk)

    # A poll later the run is still there (now as any row of the log).
    page.evaluate("document.getElementById('job-log').dataset.seen = 'yes'")
    page.wait_for_function(
        "() => document.getElementById('job-log').dataset.seen === undefined", timeout=6000
    )
    assert page.locator(f"#job-log li[data-run-id='{run.pk}']").count() == 1

    width = page.evaluate("document.scrollingElement.scrollWidth")
    assert width <= 390
    assert errors == []
    assert csp_violations(page) == []
