"""Audiences: a static one's members added and removed in bulk and imported from a CSV through
the admin; a group's, every active user's and a registered queryset's read when asked."""

from __future__ import annotations

import io
import time

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import reverse

from recipients import audiences
from recipients.models import Audience, AudienceKind, AudienceMember

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(django_user_model):
    made = [
        django_user_model.objects.create_user(f"u{i}", email=f"U{i}@Example.com") for i in range(5)
    ]
    made[4].is_active = False
    made[4].save()
    return made


@pytest.fixture
def static():
    return Audience.objects.create(name="Beta testers", key="beta")


def usernames(audience) -> list[str]:
    return sorted(audiences.members(audience).values_list("username", flat=True))


def test_adding_in_bulk_counts_the_new_members_and_is_idempotent(people, static):
    assert audiences.add(static, people[:3]) == 3
    assert audiences.add(static, [p.pk for p in people[1:4]]) == 1  # u1, u2 were in
    assert audiences.add(static, people[:4]) == 0
    assert AudienceMember.objects.filter(audience=static).count() == 4
    assert usernames(static) == ["u0", "u1", "u2", "u3"]


def test_removing_in_bulk_counts_the_members_removed_and_is_idempotent(people, static):
    audiences.add(static, people)
    assert audiences.remove(static, people[:2]) == 2
    assert audiences.remove(static, people[:2]) == 0
    assert usernames(static) == ["u2", "u3"]  # u4 is a member, but inactive


def test_ids_that_name_no_user_add_nobody(people, static):
    assert audiences.add(static, [people[0].pk, 10**9]) == 1


def test_inactive_users_are_no_members_and_not_counted(people, static):
    audiences.add(static, people)
    assert "u4" not in usernames(static)
    assert audiences.size(static) == 4
    assert audiences.size(static, at_most=2) == 3  # counting stops past at_most


def test_only_a_static_audience_has_members_added(people):
    everyone = Audience.objects.create(name="All", key="all", kind=AudienceKind.ACTIVE)
    with pytest.raises(ValueError):
        audiences.add(everyone, people)


def test_a_group_audience_is_the_groups_active_members(people, django_user_model):
    group = Group.objects.create(name="support")
    group.user_set.add(people[1], people[2], people[4])
    audience = Audience.objects.create(
        name="Support", key="support", kind=AudienceKind.GROUP, group=group
    )
    assert usernames(audience) == ["u1", "u2"]
    assert audiences.size(audience) == 2


def test_every_active_user_is_every_active_user(people):
    audience = Audience.objects.create(name="All", key="all", kind=AudienceKind.ACTIVE)
    assert usernames(audience) == ["u0", "u1", "u2", "u3"]
    assert audiences.size(audience) == 4


def test_a_registered_audience_reads_its_queryset_and_keeps_out_the_inactive(
    people, django_user_model
):
    def evens():
        return django_user_model.objects.filter(username__in=["u0", "u2", "u4"])

    audiences.register("evens", evens)
    try:
        audiences.register("evens", evens)  # the same again is nothing new
        with pytest.raises(Exception, match="already registered"):
            audiences.register("evens", lambda: django_user_model.objects.none())
        audience = Audience.objects.create(
            name="Evens", key="evens", kind=AudienceKind.REGISTERED, registered_name="evens"
        )
        assert usernames(audience) == ["u0", "u2"]
        assert audiences.size(audience) == 2
    finally:
        audiences.unregister("evens")
    with pytest.raises(LookupError):
        audiences.members(audience)


def test_the_database_refuses_a_kind_without_its_source():
    from django.db import IntegrityError

    with pytest.raises(IntegrityError):
        Audience.objects.create(name="G", key="g", kind=AudienceKind.GROUP)


# --- CSV --------------------------------------------------------------------------------------


def csv_of(*lines: str, bom: bool = False) -> io.BytesIO:
    return io.BytesIO(("\ufeff" if bom else "").encode() + "\r\n".join(lines).encode())


def test_a_csv_matches_usernames_and_emails_in_any_case_and_reports_the_rest(people, static):
    audiences.add(static, people[:1])
    report = audiences.import_csv(
        static,
        csv_of(
            "Username",  # a header, skipped
            "u0",  # already a member
            "u1@EXAMPLE.com",  # an email in another case
            "",
            "ghost",
            "u2",
            "u2",  # twice: added once
            "two words",
            "u3,extra",
            bom=True,
        ),
    )
    assert report.header
    assert report.lines == 8
    assert (report.matched, report.added, report.already_members) == (5, 3, 2)
    assert report.not_matched == 1 and report.unmatched_lines == [(5, "ghost")]
    assert report.blank == 1
    assert report.invalid == 1 and report.invalid_lines == [(8, "two words")]
    assert usernames(static) == ["u0", "u1", "u2", "u3"]


def test_a_csv_column_is_chosen_by_its_header(people, static):
    report = audiences.import_csv(static, csv_of("name,email", "Ada,u1@example.com", "Bo,"))
    assert (report.header, report.added, report.blank) == (True, 1, 1)
    with pytest.raises(audiences.ImportRefused, match="no column named login"):
        audiences.import_csv(static, csv_of("name,email", "x,y"), column="login")


def test_a_file_not_in_utf8_is_refused_and_adds_nobody(people, static):
    good = "\r\n".join(f"u{i}" for i in range(4)) * 3000
    file = io.BytesIO(good.encode() + "\r\nM\xfcller\r\n".encode("latin-1"))
    with pytest.raises(audiences.ImportRefused, match="not UTF-8"):
        audiences.import_csv(static, file)
    assert not AudienceMember.objects.filter(audience=static).exists()


def test_a_file_over_the_bounds_is_refused_and_adds_nobody(people, static, settings):
    settings.AUDIENCE_CSV_MAX_LINES = 3
    with pytest.raises(audiences.ImportRefused, match="more than 3 lines"):
        audiences.import_csv(static, csv_of("u0", "u1", "u2", "u3"))
    settings.AUDIENCE_CSV_MAX_BYTES = 5
    with pytest.raises(audiences.ImportRefused, match="larger than 5 bytes"):
        audiences.import_csv(static, csv_of("u0", "u1"))
    assert not AudienceMember.objects.filter(audience=static).exists()


# --- the admin --------------------------------------------------------------------------------


def staff(django_user_model, *codenames: str) -> Client:
    person = django_user_model.objects.create_user("staffer", is_staff=True)
    person.user_permissions.set(
        Permission.objects.filter(content_type__app_label="recipients", codename__in=codenames)
    )
    client = Client()
    client.force_login(person)
    return client


MANY = 100_000

# A hundred thousand users, made by one statement: the test is about the import, not this.
MAKE_USERS_SQL = """
    INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email,
                           is_staff, is_active, date_joined)
    SELECT '!', false, 'user' || n, '', '', 'user' || n || '@example.com', false, true, now()
    FROM generate_series(1, %(many)s) AS n
"""


def line(i: int) -> str:
    """Line i of the big file: mostly usernames, every tenth an email in upper case, a few
    unknown, a few blank."""
    if i % 5000 == 3:
        return ""
    if i % 1000 == 7:
        return f"nobody{i}"
    if i % 10 == 0:
        return f"USER{i}@EXAMPLE.COM"
    return f"user{i}"


def test_staff_import_a_hundred_thousand_line_csv_through_the_admin(
    django_user_model, collected_static
):
    with connection.cursor() as cursor:
        cursor.execute(MAKE_USERS_SQL, {"many": MANY})
    audience = Audience.objects.create(name="Everyone in the file", key="file")
    body = "\ufeffusername\r\n" + "\r\n".join(line(i) for i in range(1, MANY + 1)) + "\r\n"
    upload = io.BytesIO(body.encode())
    upload.name = "people.csv"
    client = staff(django_user_model, "view_audience", "change_audience")
    url = reverse("admin:recipients_audience_import", args=[audience.pk])
    assert client.get(url).status_code == 200

    started = time.monotonic()
    response = client.post(url, {"file": upload})
    seconds = time.monotonic() - started
    print(f"\nimported {MANY:,} lines through the admin in {seconds:.1f} s")

    blank = sum(1 for i in range(1, MANY + 1) if line(i) == "")
    unknown = [i for i in range(1, MANY + 1) if line(i).startswith("nobody")]
    assert response.status_code == 200
    report = response.context["report"]
    assert (report.lines, report.header) == (MANY, True)
    assert report.blank == blank
    assert report.not_matched == len(unknown)
    # The header is line 1, so the file's i-th user is on line i + 1.
    assert report.unmatched_lines[:2] == [(8, "nobody7"), (1008, "nobody1007")]
    assert report.added == MANY - blank - len(unknown) == audiences.size(audience)
    body = response.content.decode()
    assert "nobody7" in body and "line 8" in body

    again = io.BytesIO(b"user1\r\nUSER2@example.com\r\n")
    again.name = "again.csv"
    report = client.post(url, {"file": again}).context["report"]
    assert (report.added, report.already_members) == (0, 2)


def test_a_view_only_staff_member_cannot_import(people, static, django_user_model):
    client = staff(django_user_model, "view_audience")
    url = reverse("admin:recipients_audience_import", args=[static.pk])
    file = io.BytesIO(b"u0\r\n")
    file.name = "x.csv"
    assert client.get(url).status_code == 403
    assert client.post(url, {"file": file}).status_code == 403
    assert not AudienceMember.objects.exists()
    members = client.get(reverse("admin:recipients_audience_members", args=[static.pk]))
    assert members.status_code == 200


def test_a_bad_file_gets_a_clear_error_in_the_admin_and_imports_nothing(
    people, static, django_user_model, settings, collected_static
):
    client = staff(django_user_model, "view_audience", "change_audience")
    url = reverse("admin:recipients_audience_import", args=[static.pk])
    file = io.BytesIO("u0\r\nM\xfcller\r\n".encode("latin-1"))
    file.name = "latin.csv"
    response = client.post(url, {"file": file})
    assert "not UTF-8" in response.content.decode()
    settings.AUDIENCE_CSV_MAX_BYTES = 2
    file = io.BytesIO(b"u0\r\nu1\r\n")
    file.name = "big.csv"
    response = client.post(url, {"file": file})
    assert "larger than 2 bytes" in response.content.decode()
    assert not AudienceMember.objects.exists()


def test_the_list_shows_each_audiences_size_and_the_members_page_lists_them(
    people, static, admin_client
):
    audiences.add(static, people)
    listing = admin_client.get(reverse("admin:recipients_audience_changelist"))
    assert listing.status_code == 200
    page = admin_client.get(reverse("admin:recipients_audience_members", args=[static.pk]))
    body = page.content.decode()
    assert "4 active members" in body and "U3@example.com" in body and ">u4<" not in body
    change = admin_client.get(reverse("admin:recipients_audience_change", args=[static.pk]))
    assert reverse("admin:recipients_audience_import", args=[static.pk]) in change.content.decode()


def test_no_migration_is_missing():
    out = io.StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


def test_staff_add_an_audience_of_a_registered_queryset_by_its_name(admin_client, people):
    audiences.register("everyone", lambda: type(people[0]).objects.all())
    try:
        url = reverse("admin:recipients_audience_add")
        form = admin_client.get(url).content.decode()
        assert '<option value="everyone">everyone</option>' in form
        data = {"name": "All", "key": "all", "kind": "registered", "registered_name": "everyone"}
        assert admin_client.post(url, data).status_code == 302
        refused = admin_client.post(url, {**data, "name": "G", "key": "g", "kind": "group"})
        assert "Choose the group whose members are the audience." in refused.content.decode()
        assert audiences.size(Audience.objects.get(key="all")) == 5  # the superuser too
    finally:
        audiences.unregister("everyone")


def test_a_queryset_is_added_and_removed_inside_the_database(people, static, django_user_model):
    chosen = django_user_model.objects.filter(username__in=["u1", "u2", "u4"]).order_by("-pk")
    assert audiences.add(static, chosen) == 3
    assert audiences.add(static, chosen) == 0
    assert usernames(static) == ["u1", "u2"]  # u4 is in, but inactive
    assert audiences.remove(static, chosen.filter(username="u1")) == 1
    assert audiences.remove(static, chosen.filter(username="u1")) == 0
    assert usernames(static) == ["u2"]


def test_staff_who_may_change_remove_the_ticked_members_and_are_told_how_many(
    people, static, django_user_model, collected_static
):
    audiences.add(static, people[:4])
    client = staff(django_user_model, "view_audience", "change_audience")
    members = reverse("admin:recipients_audience_members", args=[static.pk])
    remove = reverse("admin:recipients_audience_members_remove", args=[static.pk])
    page = client.get(members).content.decode()
    assert f'action="{remove}"' in page
    assert f'name="user" value="{people[1].pk}"' in page
    ticked = [people[1].pk, people[2].pk, people[4].pk, "x", ""]  # u4 is no (active) member
    response = client.post(remove, {"user": ticked, "page": "1"}, follow=True)
    assert response.redirect_chain[-1][0] == f"{members}?page=1"
    body = response.content.decode()
    assert "2 members removed." in body
    assert "1 of the users ticked was no longer a member." in body
    assert usernames(static) == ["u0", "u3"]
    entry = LogEntry.objects.get(object_id=str(static.pk))
    assert "members (removed)" in entry.get_change_message()
    nothing = client.post(remove, {}, follow=True).content.decode()
    assert "Tick the members to remove." in nothing
    russian = client.post("/ru" + remove, {"user": [people[0].pk]}, follow=True)
    assert "Удалён 1 участник." in russian.content.decode()
    assert usernames(static) == ["u3"]


def test_a_view_only_staff_member_can_remove_nobody(people, static, django_user_model):
    audiences.add(static, people[:2])
    client = staff(django_user_model, "view_audience")
    members = client.get(reverse("admin:recipients_audience_members", args=[static.pk]))
    assert members.status_code == 200
    assert 'name="user"' not in members.content.decode()
    remove = reverse("admin:recipients_audience_members_remove", args=[static.pk])
    assert client.post(remove, {"user": [people[0].pk]}).status_code == 403
    assert client.get(remove).status_code == 405
    assert usernames(static) == ["u0", "u1"]


def test_members_of_an_audience_that_is_not_static_cannot_be_removed(
    people, admin_client, django_user_model
):
    group = Group.objects.create(name="support")
    people[0].groups.add(group)
    audience = Audience.objects.create(
        name="Support", key="support", kind=AudienceKind.GROUP, group=group
    )
    page = admin_client.get(reverse("admin:recipients_audience_members", args=[audience.pk]))
    assert "u0" in page.content.decode() and 'name="user"' not in page.content.decode()
    remove = reverse("admin:recipients_audience_members_remove", args=[audience.pk])
    assert admin_client.post(remove, {"user": [people[0].pk]}).status_code == 404
    assert usernames(audience) == ["u0"]
