"""Django's own auth views, with the site's templates and forms, and sign-up beside them. Each
view's title (in its extra_context) is its page's title and heading (accounts/page.html).

A sign-in, sign-up or reset request refused by its rate limit answers 429 with Retry-After,
the form showing why (core.ratelimit.refuse). A reset request is answered before its email is
queued (core/after_response.py), so the answer takes as long for an address without an account."""

from __future__ import annotations

import zoneinfo

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model, login
from django.contrib.auth import views as auth
from django.contrib.auth.decorators import login_required
from django.http import HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse, reverse_lazy
from django.utils import translation
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from accounts import preference_forms, signup
from accounts.forms import (
    ConfirmSignUpForm,
    PasswordResetRequestForm,
    SignInForm,
    SignUpForm,
    ThrottledPasswordChangeForm,
)
from accounts.push_views import SESSION_ENDPOINT
from core import after_response, ratelimit
from recipients import subscriptions


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

    def form_valid(self, form):
        """Django's form_valid with its save moved after the answer: looking the address up
        and queueing the email (a token, a recipient, a notification and its delivery) cost
        only an address with an account, and an answer that waited for them would tell an
        attacker which addresses have one. Up to the answer both do the same: the form's
        rate limits, then this redirect."""
        options = {
            "use_https": self.request.is_secure(),
            "token_generator": self.token_generator,
            "from_email": self.from_email,
            "email_template_name": self.email_template_name,
            "subject_template_name": self.subject_template_name,
            "request": self.request,
            "html_email_template_name": self.html_email_template_name,
            "extra_email_context": self.extra_email_context,
        }
        # The language of the page asked from, for a recipient who has none yet.
        language = translation.get_language()

        def queue() -> None:
            with translation.override(language):
                form.save(**options)

        return after_response.defer(HttpResponseRedirect(self.get_success_url()), queue)


class PasswordResetConfirmView(auth.PasswordResetConfirmView):
    extra_context = {"title": _("Choose a new password")}
    template_name = "accounts/password_reset_confirm.html"
    success_url = reverse_lazy("accounts:password_reset_complete")

    def form_valid(self, form):
        response = super().form_valid(form)
        # The new password ends every session; it ends every browser's pushes too, or a
        # browser someone else subscribed while they had the account would keep them.
        subscriptions.unsubscribe_all(form.user)
        return response


class PasswordChangeView(_RefusesWhenThrottled, auth.PasswordChangeView):
    extra_context = {"title": _("Change your password")}
    form_class = ThrottledPasswordChangeForm
    template_name = "accounts/password_change.html"
    success_url = reverse_lazy("accounts:password_change_done")

    def form_valid(self, form):
        response = super().form_valid(form)
        # Django keeps this session and ends the others: the same for push, this browser's
        # subscription kept and the others' turned off.
        subscriptions.unsubscribe_all(form.user, keep=self.request.session.get(SESSION_ENDPOINT))
        return response


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


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def sign_up(request):
    """An email address and a password: the answer is the "check your email" page whether or
    not the address has an account (accounts/signup.py)."""
    if request.user.is_authenticated:
        return redirect(settings.LOGIN_REDIRECT_URL)
    form = SignUpForm(request.POST if request.method == "POST" else None, request=request)
    if form.is_bound and form.is_valid():
        form.save()
        return redirect("accounts:sign_up_sent")
    response = render(
        request, "accounts/sign_up.html", {"title": _("Create an account"), "form": form}
    )
    if form.retry_after_seconds:
        return ratelimit.refuse(retry_after_seconds=form.retry_after_seconds, response=response)
    return response


@require_http_methods(["GET", "HEAD"])
def sign_up_sent(request):
    return render(request, "accounts/sign_up_sent.html", {"title": _("Check your email")})


# A GET only shows the form: mail scanners and link previews open every link in an email, and
# must not confirm anything. The token stays in the URL the form posts to; the page loads
# nothing from elsewhere, and the site's Referrer-Policy is same-origin, so it goes nowhere.
@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def sign_up_confirm(request, uidb64: str, token: str):
    """The emailed link: the password chosen at sign-up confirms the address and signs in."""
    user = signup.awaiting(uidb64=uidb64, token=token)
    context = {"title": _("Confirm your email address"), "validlink": user is not None}
    if user is None:
        return render(request, "accounts/sign_up_confirm.html", context)
    form = ConfirmSignUpForm(
        request.POST if request.method == "POST" else None, user=user, request=request
    )
    if form.is_bound and form.is_valid():
        if not signup.confirm(user):
            # Confirmed, or signed up for again, since the link was checked.
            return render(request, "accounts/sign_up_confirm.html", {**context, "validlink": False})
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(
            request,
            _(
                "Your email address is confirmed, and you are signed in. Choose here what "
                "reaches you."
            ),
        )
        return redirect("accounts:preferences")
    response = render(request, "accounts/sign_up_confirm.html", {**context, "form": form})
    if form.retry_after_seconds:
        return ratelimit.refuse(retry_after_seconds=form.retry_after_seconds, response=response)
    return response


# The preference centre's sections, each a form of its own and a partial of the page
# (accounts/preferences.html), saved in place by htmx or by a whole-page POST without it.
SECTIONS = {
    "choices": preference_forms.ChannelChoicesForm,
    "digests": preference_forms.DigestChoicesForm,
    "quiet": preference_forms.QuietHoursForm,
    "addresses": preference_forms.ChannelAddressesForm,
}
SAVED = {
    "choices": _("Your choices are saved."),
    "digests": _("Your digest choices are saved."),
    "quiet": _("Your time zone and quiet hours are saved."),
    "addresses": _("Your addresses are saved."),
}
PREFERENCES_TEMPLATE = "accounts/preferences.html"


def _time_zones() -> list[str]:
    # Suggestions for the time zone field; the database's own list decides what is saved.
    return sorted(name for name in zoneinfo.available_timezones() if "/" in name)


def _preferences_context(request, forms: dict, **extra) -> dict:
    return {
        "title": _("Notification settings"),
        "forms": forms,
        "time_zones": _time_zones(),
        **extra,
    }


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def preferences(request):
    """The preference centre: which categories reach the user on which channel, how often
    (as they happen or in a digest), their time zone and quiet hours, and their channels'
    addresses. Each section posts on its own; htmx
    swaps the section's partial in place, a plain POST is answered with a redirect (PRG)."""
    # The user itself, not request.user's lazy stand-in, which preferences.choose locks by
    # its model.
    user = get_user_model()._default_manager.get(pk=request.user.pk)
    forms = {name: form(user=user) for name, form in SECTIONS.items()}
    if request.method != "POST":
        return render(request, PREFERENCES_TEMPLATE, _preferences_context(request, forms))
    section = request.POST.get("section")
    if section not in SECTIONS:
        # A form from another version of the page, or none: nothing is saved.
        refused = gettext("This form is out of date; nothing was saved. Try again.")
        context = _preferences_context(request, forms, refused=refused)
        return render(request, PREFERENCES_TEMPLATE, context, status=400)
    form = SECTIONS[section](request.POST, user=user)
    saved = form.is_valid() and form.save()
    secrets = getattr(form, "new_secrets", []) if saved else []
    if saved and not request.htmx:
        messages.success(request, SAVED[section])
        for address, secret in secrets:
            messages.warning(request, _new_secret(address, secret))
        return redirect(reverse("accounts:preferences") + f"#{section}")
    forms[section] = SECTIONS[section](user=user) if saved else form
    context = _preferences_context(
        request,
        forms,
        saved={section: SAVED[section]} if saved else {},
        new_secrets={section: [_new_secret(a, s) for a, s in secrets]},
    )
    template = f"{PREFERENCES_TEMPLATE}#{section}" if request.htmx else PREFERENCES_TEMPLATE
    # A refusal answers 200: htmx swaps only 2xx answers, and the form must show why.
    return render(request, template, context)


def _new_secret(address: str, secret: str) -> str:
    return gettext(
        "The signing secret of %(address)s, shown only now: %(secret)s. Your receiver checks "
        "each request's signature with it."
    ) % {"address": address, "secret": secret}
