from django.urls import path

from pwa import views

# At the root, outside the language prefixes: a service worker's scope is its script's folder.
root = [path("service-worker.js", views.service_worker, name="service-worker")]

# Inside them: the manifest and the offline page speak the page's language.
localised = [
    path("manifest.webmanifest", views.manifest, name="web-manifest"),
    path("offline/", views.offline, name="offline"),
]
