"""The Content-Security-Policy, enforced by a real browser on the real pages."""

from __future__ import annotations

import pytest

from tests.browser.conftest import csp_violations, log_in

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("path", ["/", "/ru/", "/de/showcases/workers/", "/admin/login/"])
def test_pages_load_without_a_single_violation(site, page, path):
    response = page.goto(site.url + path)
    assert response.status == 200
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_load_state("networkidle")
    assert csp_violations(page) == []


def test_an_injected_inline_script_is_refused_and_reported_once(site, page):
    page.goto(site.url + "/")
    page.evaluate(
        """() => {
            const script = document.createElement("script");
            script.textContent = "window.__injected = true";
            document.body.append(script);
        }"""
    )
    page.wait_for_function("window.__cspViolations.length > 0")
    violations = csp_violations(page)
    assert [v["directive"] for v in violations] == ["script-src-elem"]
    assert page.evaluate("window.__injected") is None


def test_staff_can_log_in_and_use_the_admin_under_the_policy(site, page, django_user_model):
    django_user_model.objects.create_superuser("staff", "staff@example.com", "a-long-password-1")
    log_in(page, site, username="staff", password="a-long-password-1")
    assert page.locator("#site-name").is_visible()
    page.goto(site.url + "/ru/admin/auth/user/")
    page.wait_for_load_state("networkidle")
    assert page.locator("#result_list").is_visible()
    assert csp_violations(page) == []
