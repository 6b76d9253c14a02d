"""Django's own auth views, with the site's templates and forms. Each view's title (in its
extra_context) is its page's title and heading (accounts/page.html).

A sign-in or reset request refused by its rate limit answers 429 with Retry-After, the form
showing why (core.ratelimit.refuse)."""

from __future__ import annotations

from django.contrib.auth import views as auth
from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.urls import reverse_lazy
from django.utils.translation import gettext_lazy as _

from accounts.forms import PasswordResetRequestForm, SignInForm, ThrottledPasswordChangeForm
from core import ratelimit


class _RefusesWhenThrottled:
    def get_form_kwargs(self):
        # A throttled form counts by the client, so it is given the request (as LoginView's
        # own form already is).
        return {**super().get_form_kwargs(), "request": self.request}

    def form_invalid(self, form):
        response = super().form_invalid(form)
        if form.retry_after_seconds:
            return ratelimit.refuse(retry_after_seconds=form.retry_after_seconds, response=response)
        return response


class SignInView(_RefusesWhenThrottled, auth.LoginView):
    extra_context = {"title": _("Sign in")}
    authentication_form = SignInForm
    template_name = "accounts/sign_in.html"


class SignOutView(auth.LogoutView):
    # POST only, as Django's own is: a link or an image on another site cannot sign anyone out.
    extra_context = {"title": _("You are signed out")}
    template_name = "accounts/signed_out.html"

    def get_success_url(self):
        # Always this page, whatever ?next= says: it empties the service worker's caches
        # (pwa/flush.js), which a redirect elsewhere would skip.
        return self.request.get_full_path()


class PasswordResetView(_RefusesWhenThrottled, auth.PasswordResetView):
    extra_context = {"title": _("Reset your password")}
    form_class = PasswordResetRequestForm
    template_name = "accounts/password_reset.html"
    success_url = reverse_lazy("accounts:password_reset_sent")


class PasswordResetConfirmView(auth.PasswordResetConfirmView):
    extra_context = {"title": _("Choose a new password")}
    template_name = "accounts/password_reset_confirm.html"
    success_url = reverse_lazy("accounts:password_reset_complete")


class PasswordChangeView(_RefusesWhenThrottled, auth.PasswordChangeView):
    extra_context = {"title": _("Change your password")}
    form_class = ThrottledPasswordChangeForm
    template_name = "accounts/password_change.html"
    success_url = reverse_lazy("accounts:password_change_done")


def _told(view: type[auth.PasswordContextMixin], name: str, title):
    """A page that only tells of a step done: Django's view, with the page's template (named
    as the page is) and title."""
    return view.as_view(template_name=f"accounts/{name}.html", extra_context={"title": title})


password_reset_sent = _told(
    auth.PasswordResetDoneView, "password_reset_sent", _("Check your email")
)
password_reset_complete = _told(
    auth.PasswordResetCompleteView, "password_reset_complete", _("Your password is set")
)
password_change_done = _told(
    auth.PasswordChangeDoneView, "password_change_done", _("Your password is changed")
)


@login_required
def preferences(request):
    """The preference centre: which categories reach the user on which channel, and when."""
    return render(request, "accounts/preferences.html", {"title": _("Notification settings")})
