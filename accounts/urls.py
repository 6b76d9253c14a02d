from django.urls import path

from accounts import inbox_views, push_views, views

app_name = "accounts"

# Under the language prefix (v10r/urls.py): /account/…, /ru/account/…, /de/account/….
urlpatterns = [
    path("sign-in/", views.SignInView.as_view(), name="sign_in"),
    path("sign-out/", views.SignOutView.as_view(), name="sign_out"),
    path("password-reset/", views.PasswordResetView.as_view(), name="password_reset"),
    path("password-reset/sent/", views.password_reset_sent, name="password_reset_sent"),
    path("password-reset/done/", views.password_reset_complete, name="password_reset_complete"),
    # The emailed link; Django's view moves the token into the session and redirects.
    path(
        "password-reset/<uidb64>/<token>/",
        views.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path("sign-up/", views.sign_up, name="sign_up"),
    path("sign-up/sent/", views.sign_up_sent, name="sign_up_sent"),
    # The emailed link: the password chosen at sign-up confirms the address.
    path("sign-up/<uidb64>/<token>/", views.sign_up_confirm, name="sign_up_confirm"),
    path("password/", views.PasswordChangeView.as_view(), name="password_change"),
    path("password/changed/", views.password_change_done, name="password_change_done"),
    # The preference centre: what reaches the user, on which channel, and when.
    path("notifications/", views.preferences, name="preferences"),
    # The inbox: its page (?before=<cursor> for older entries), and its actions, each a POST.
    path("inbox/", inbox_views.page, name="inbox"),
    path("inbox/<uuid:entry_id>/read/", inbox_views.mark_read, name="inbox_read"),
    path("inbox/<uuid:entry_id>/unread/", inbox_views.mark_unread, name="inbox_unread"),
    path("inbox/<uuid:entry_id>/archive/", inbox_views.archive, name="inbox_archive"),
    path("inbox/read-all/", inbox_views.mark_all_read, name="inbox_read_all"),
    # The inbox's unread count and newest entry, polled by every signed-in page (304 when
    # nothing changed).
    path("inbox/state/", inbox_views.state, name="inbox_state"),
    # Web push on this browser: the preference centre's script posts its subscription here.
    path("push/subscribe/", push_views.subscribe, name="push_subscribe"),
    path("push/unsubscribe/", push_views.unsubscribe, name="push_unsubscribe"),
    path("push/status/", push_views.status, name="push_status"),
]
