from django.apps import apps
from django.conf.urls.i18n import i18n_patterns
from django.contrib import admin
from django.urls import include, path

from accounts import unsubscribe
from pwa import urls as pwa_urls
from v10r import views

# English lives at the root; Russian and German under /ru/ and /de/. The admin is inside the
# prefix too, so staff read it in the language of the URL.
urlpatterns = [
    # Machine endpoints: no language prefix.
    path("", include("notifications.urls")),
    path("", include("jobs.urls")),
    path("favicon.ico", views.favicon),
    *pwa_urls.root,
]
# The showcase's pages only with the showcase (V10R_SHOWCASES): its views need its channel.
showcases = (
    [path("showcases/", include("showcases.urls"))] if apps.is_installed("showcases") else []
)
urlpatterns += i18n_patterns(
    path("", views.home, name="home"),
    *showcases,
    path("account/", include("accounts.urls")),
    # An email's one-click unsubscribe link (RFC 8058), in the email's language: a mail
    # provider POSTs to it as it stands, and a prefix it gave is never redirected away.
    path("unsubscribe/<str:token>/", unsubscribe.unsubscribe, name="unsubscribe"),
    path("admin/", admin.site.urls),
    *pwa_urls.localised,
    prefix_default_language=False,
)

handler400 = "v10r.views.bad_request"
handler403 = "v10r.views.permission_denied"
handler404 = "v10r.views.page_not_found"
handler500 = "v10r.views.server_error"
