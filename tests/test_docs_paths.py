"""Every file the README and docs/ name exists, so a move or a rename cannot leave a document
pointing at a file that is gone.

A path is what a reader would open: a relative name with at least one folder and a file's
extension (`notifications/outbox.py`, `deploy/systemd/v10r-jobs.timer`), found anywhere in
the text, inside code blocks too. A template named as Django names it
(`accounts/preferences.html`) counts when some templates folder holds it. Absolute paths
(`/etc/nginx/nginx.conf`) and the paths of URLs are another machine's, and are not checked.
Links between the documents (`.md`) are not checked here."""

from __future__ import annotations

import re
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

EXTENSIONS = "py|js|mjs|html|css|json|toml|conf|txt|po|png|svg|webmanifest|service|timer|example|sh"
# Not preceded by a character that would make it part of a longer path, a URL or a domain.
PATH = re.compile(
    rf"(?<![\w./:@~-])((?:[\w.@-]+/)+[\w.@-]+\.(?:{EXTENSIONS}))(?![\w/-])",
)


def documents(root: Path = BASE_DIR) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _exists(path: str, *, root: Path, document: Path | None = None) -> bool:
    if (root / path).exists():
        return True
    # A site's own module, as the docs' worked examples name it ("newsletter/notifications.py"):
    # the examples are real packages under tests/sites/, which tests run.
    if (root / "tests" / "sites" / path).exists():
        return True
    # A link relative to the document itself (docs/x.md naming ../tests/y.py).
    if path.startswith("../") and document is not None:
        return (document.parent / path).resolve().is_file()
    # A template as Django names it: found in an app's templates folder, or the project's.
    if path.endswith(".html"):
        return (
            any(folder.joinpath(path).exists() for folder in root.glob("*/templates"))
            or (root / "templates" / path).exists()
        )
    return False


def missing(document: Path, *, root: Path = BASE_DIR) -> list[str]:
    """Each path document names that does not exist, as "document:line path"."""
    found = []
    for number, line in enumerate(document.read_text().splitlines(), start=1):
        for path in PATH.findall(line):
            if not _exists(path, root=root, document=document):
                found.append(f"{document.relative_to(root).as_posix()}:{number} {path}")
    return found


def test_every_path_the_readme_and_the_docs_name_exists():
    assert [line for document in documents() for line in missing(document)] == []


def test_the_scan_reports_a_path_that_is_gone_and_ignores_absolute_paths_and_urls(tmp_path):
    # The scan itself must be able to fail: a moved module, named the way the docs name one.
    (tmp_path / "docs").mkdir()
    (tmp_path / "notifications").mkdir()
    (tmp_path / "notifications" / "outbox.py").write_text("")
    (tmp_path / "accounts" / "templates" / "accounts").mkdir(parents=True)
    (tmp_path / "accounts" / "templates" / "accounts" / "page.html").write_text("")
    document = tmp_path / "docs" / "probe.md"
    document.write_text(
        "The claim is in `notifications/outbox.py`, the page is `accounts/page.html`.\n"
        "The rules were in `notifications/preferences.py` and notifications/channels/email.py.\n"
        "nginx reads /etc/nginx/nginx.conf; see https://example.com/static/app.js.\n"
    )
    assert missing(document, root=tmp_path) == [
        "docs/probe.md:2 notifications/preferences.py",
        "docs/probe.md:2 notifications/channels/email.py",
    ]


def test_every_document_of_docs_is_scanned():
    names = {document.name for document in documents()}
    assert {"README.md", "architecture.md", "queue.md"} <= names
