from django.urls import path

from accounts import views

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
    path("password/", views.PasswordChangeView.as_view(), name="password_change"),
    path("password/changed/", views.password_change_done, name="password_change_done"),
    # The preference centre: what reaches the user, on which channel, and when.
    path("notifications/", views.preferences, name="preferences"),
]
