"""The jobs in the admin: the jobs page, Run now behind its own permission, the runs' log."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from jobs.models import JobRun, Status, Trigger
from tests.helpers import make_run
from tests.jobs import sample

SCHEDULE = "/admin/jobs/jobrun/schedule/"
COUNT = sample.make("test-count", sample.count, cron="*/5 * * * *")


def run_url(slug: str) -> str:
    return f"/admin/jobs/jobrun/run/{slug}/"


@pytest.fixture
def staff(django_user_model, client, collected_static):
    """A staff member who may view the runs, signed in; grant(…) adds permissions."""
    user = django_user_model.objects.create_user("ops", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_jobrun"))
    client.force_login(user)

    def grant(codename: str) -> None:
        user.user_permissions.add(Permission.objects.get(codename=codename))

    client.grant = grant
    return client


def test_the_jobs_page_shows_each_job_its_cadence_in_words_and_its_last_run(staff, only):
    only(COUNT)
    make_run(status=Status.FAILED, finished_at="2026-01-01T00:00:01Z")
    page = staff.get(SCHEDULE).content.decode()
    assert "Every 5 minutes" in page and "*/5 * * * *" in page
    assert "A job of the tests." in page
    assert '<span class="status">failed</span>' in page
    # Without the permission to run jobs, there is no Run now button.
    assert run_url("test-count") not in page


def test_the_jobs_page_speaks_the_admins_language(staff, only):
    only(COUNT)
    make_run(status=Status.FAILED)
    page = staff.get("/ru" + SCHEDULE).content.decode()
    assert "Каждые 5 минут" in page and "Следующий запуск" in page
    # A run's status in the words of a job, not of a delivery ("не доставлено").
    assert '<span class="status">ошибка</span>' in page
    assert (
        "Jetzt starten" not in page
        and "Letzter Lauf" in staff.get("/de" + SCHEDULE).content.decode()
    )


def test_a_staff_member_who_may_only_view_cannot_run_a_job(staff, only):
    only(COUNT)
    assert staff.post(run_url("test-count")).status_code == 403
    assert not JobRun.objects.exists()


def test_the_run_permission_without_the_view_permission_runs_nothing(
    django_user_model, client, only
):
    only(COUNT)
    user = django_user_model.objects.create_user("runner", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="run_job"))
    client.force_login(user)
    assert client.post(run_url("test-count")).status_code == 403
    assert not JobRun.objects.exists()


@pytest.mark.parametrize("permissions", [(), ("run_job",)], ids=["none", "run-only"])
def test_the_jobs_page_is_not_shown_to_staff_without_the_view_permission(
    django_user_model, client, only, collected_static, permissions
):
    only(COUNT)
    user = django_user_model.objects.create_user("ops", password="x", is_staff=True)
    for codename in permissions:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    client.force_login(user)
    response = client.get(SCHEDULE)
    assert response.status_code == 403
    assert "A job of the tests." not in response.content.decode()


def test_a_staff_member_with_the_run_permission_runs_a_job_recorded_as_the_admins(staff, only):
    only(COUNT)
    staff.grant("run_job")
    assert run_url("test-count") in staff.get(SCHEDULE).content.decode()
    response = staff.post(run_url("test-count"), follow=True)
    assert response.redirect_chain == [(SCHEDULE, 302)]
    run = JobRun.objects.get()
    assert (run.slug, run.trigger, run.status) == ("test-count", Trigger.ADMIN, Status.SUCCEEDED)
    page = response.content.decode()
    assert '<li class="success">The job test-count succeeded in' in page


def test_run_now_refuses_get_and_an_unknown_slug(staff, only):
    only(COUNT)
    staff.grant("run_job")
    assert staff.get(run_url("test-count")).status_code == 404
    assert staff.post(run_url("nope")).status_code == 404
    assert not JobRun.objects.exists()


def test_someone_signed_out_is_sent_to_the_login_and_runs_nothing(client, db, only):
    only(COUNT)
    response = client.post(run_url("test-count"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert not JobRun.objects.exists()


def test_the_runs_list_filters_by_job_and_status_and_cannot_be_edited(staff, only):
    only(COUNT)
    for status in (Status.SUCCEEDED, Status.FAILED):
        make_run(trigger=Trigger.COMMAND, status=status)
    listed = staff.get("/admin/jobs/jobrun/?slug=test-count&status__exact=failed")
    assert listed.status_code == 200
    assert listed.context["cl"].result_count == 1
    run = JobRun.objects.get(status=Status.FAILED)
    # Read-only: a change posted anyway is refused, and the run stays as it ended.
    assert (
        staff.post(f"/admin/jobs/jobrun/{run.pk}/change/", {"status": "running"}).status_code == 403
    )
    run.refresh_from_db()
    assert run.status == Status.FAILED
    assert staff.get("/admin/jobs/jobrun/add/").status_code == 403


def test_the_job_filter_offers_every_job_in_the_log_the_demo_job_too(staff, only):
    """The showcase's demo job is not in the registry (it has no cadence), but its runs are
    in the log: the filter names it, and finds them."""
    only(COUNT)
    make_run(slug="demo", trigger=Trigger.VISITOR, status=Status.SUCCEEDED)
    make_run(trigger=Trigger.COMMAND, status=Status.SUCCEEDED)
    page = staff.get("/admin/jobs/jobrun/")
    [job_filter] = [spec for spec in page.context["cl"].filter_specs if spec.title == "job"]
    assert [slug for slug, _ in job_filter.lookup_choices] == ["demo", "test-count"]
    assert "?slug=demo" in page.content.decode()
    demo = staff.get("/admin/jobs/jobrun/?slug=demo")
    assert demo.context["cl"].result_count == 1
    assert demo.context["cl"].result_list[0].trigger == Trigger.VISITOR
