from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticFilesStorage(CompressedManifestStaticFilesStorage):
    """Hashed, compressed static files whose ES-module imports point at hashed names.

    Without the import rewriting, `import "./palette.js"` inside a hashed module would fetch
    the unhashed file, which is served with a short cache lifetime and can drift out of step
    with its importer after a deploy. The failure only shows with DEBUG off, so the browser
    tests run against this storage.
    """

    support_js_module_import_aggregation = True
