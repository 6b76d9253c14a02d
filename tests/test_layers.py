"""The rule of docs/architecture.md, held: the roof (v10r) imports the apps, the apps import
core, and nothing imports upwards. Every .py file of the project's packages is parsed, and
every import in it counts, at the top or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

from django.conf import settings

BASE_DIR = Path(__file__).resolve().parent.parent
PACKAGES = (
    "core",
    "transports",
    "recipients",
    "notifications",
    "showcases",
    "pwa",
    "jobs",
    "accounts",
    "v10r",
)

# What each package may import of the project's packages besides itself.
ALLOWED = {
    "core": set(),
    # The notification system's three rooms, each importing only the ones beneath it: the
    # channels (how bytes leave) know neither the rules nor the engine; the recipients' rules
    # (who may receive what) know the channels' registry and facts; the engine (how a row
    # moves) asks both.
    "transports": {"core"},
    "recipients": {"core", "transports"},
    "notifications": {"core", "transports", "recipients"},
    # The jobs page shows the registry and its log, and runs a demo job through the runner;
    # jobs never imports a showcase. The demo's channel is a Channel like any other.
    "showcases": {"core", "transports", "recipients", "notifications", "jobs"},
    "pwa": {"core"},
    # Scheduled work runs the queue's retention and tidying up, so it may import the queue;
    # the queue never imports it.
    "jobs": {"core", "notifications"},
    # Sign-in, sign-up, the preference centre and the inbox: the throttle in core, the
    # recipients' rules for their choices, the reset email through the queue.
    "accounts": {"core", "transports", "recipients", "notifications"},
    "v10r": {
        "core",
        "transports",
        "recipients",
        "notifications",
        "showcases",
        "pwa",
        "jobs",
        "accounts",
    },
}
# The settings are read before any app is loaded: they may use the roof's readers and core's
# modules that need no set-up (logs, platform), and no app.
SETTINGS_ALLOWED = {"v10r", "core"}
# The engine's public face, which a showcase and accounts use; its machinery (drain, worker,
# claim, the admin, the commands) is the engine's own.
OUTBOX_PUBLIC = {
    "notifications.backoff",
    "notifications.enqueue",
    "notifications.heartbeat",
    "notifications.inbox",
    "notifications.models",
    "notifications.outbox",
    "notifications.signals",
    "notifications.stats",
}
# The recipients' rules are public to the apps above them but for their admin; the channels'
# registry and their base class are, but not a transport's insides.
RULES_MACHINERY = ("recipients.admin",)
CHANNELS_PUBLIC = {"transports", "transports.base"}

# The jobs' public face, which the jobs page uses; the site's jobs, the cron endpoints, the
# checks, the admin and the commands are the jobs app's own.
JOBS_PUBLIC = {"jobs.cadence", "jobs.models", "jobs.registry", "jobs.runner"}


def imports(path: Path, *, root: Path) -> list[tuple[int, str]]:
    """Every module path imports (line, dotted name), relative ones resolved."""
    module = ".".join(path.relative_to(root).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module
            # "from notifications import worker" imports notifications.worker.
            found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names]
    return found


def project_files():
    for package in PACKAGES:
        yield from sorted((BASE_DIR / package).rglob("*.py"))


def _within(name: str, modules, *, exact: bool = False) -> bool:
    """Whether name is one of modules, or (unless exact) inside one; for "from a import b",
    name is "a.b", which counts as a when b is no module of a's public ones."""
    for module in modules:
        if name == module or (not exact and name.startswith(module + ".")):
            return True
        if exact and name.rpartition(".")[0] == module and name not in _MODULES:
            return True
    return False


_MODULES = {
    ".".join(p.relative_to(BASE_DIR).with_suffix("").parts)
    for package in PACKAGES
    for p in (BASE_DIR / package).rglob("*.py")
}


def forbidden(path: Path, *, root: Path = BASE_DIR) -> list[str]:
    owner = path.relative_to(root).parts[0]
    relative = path.relative_to(root).as_posix()
    allowed = SETTINGS_ALLOWED if relative == "v10r/settings.py" else ALLOWED[owner] | {owner}
    wrong = []
    for line, name in imports(path, root=root):
        top = name.partition(".")[0]
        if top in PACKAGES and top not in allowed:
            wrong.append(f"{relative}:{line} imports {name}")
        elif (
            owner in {"showcases", "accounts"}
            and top == "notifications"
            and not _within(name, OUTBOX_PUBLIC)
        ):
            wrong.append(f"{relative}:{line} imports the queue's machinery: {name}")
        elif (
            owner in {"showcases", "accounts"}
            and top == "recipients"
            and _within(name, RULES_MACHINERY)
        ):
            wrong.append(f"{relative}:{line} imports the recipients' machinery: {name}")
        elif (
            owner in {"showcases", "accounts"}
            and top == "transports"
            and not _within(name, CHANNELS_PUBLIC, exact=True)
        ):
            wrong.append(f"{relative}:{line} imports a channel's machinery: {name}")
        elif owner == "showcases" and top == "jobs" and not _within(name, JOBS_PUBLIC):
            wrong.append(f"{relative}:{line} imports the jobs' machinery: {name}")
    return wrong


def test_every_package_imports_only_the_layers_below_it():
    wrong = [line for path in project_files() for line in forbidden(path)]
    assert wrong == []


def test_the_scan_sees_imports_inside_functions_and_relative_ones(tmp_path):
    # The scan itself must be able to fail: a core module that reaches up, twice hidden.
    (tmp_path / "core").mkdir()
    probe = tmp_path / "core" / "probe.py"
    probe.write_text(
        "def late():\n    from notifications import worker\n\n"
        "def later():\n    from ..showcases import palette\n"
    )
    assert forbidden(probe, root=tmp_path) == [
        "core/probe.py:2 imports notifications.worker",
        "core/probe.py:5 imports showcases.palette",
    ]


def test_a_showcase_may_use_the_jobs_public_modules_but_not_their_machinery(tmp_path):
    (tmp_path / "showcases").mkdir()
    probe = tmp_path / "showcases" / "probe.py"
    probe.write_text("from jobs import registry, runner\nfrom jobs import tasks\n")
    assert forbidden(probe, root=tmp_path) == [
        "showcases/probe.py:2 imports the jobs' machinery: jobs.tasks"
    ]


def test_every_package_of_the_scan_is_installed_and_every_installed_one_is_scanned():
    # tests/ is the suite's own (its app, tests/notes, is installed by tests/settings.py).
    packages = {p.name for p in BASE_DIR.iterdir() if (p / "__init__.py").exists()} - {"tests"}
    installed = {app.partition(".")[0] for app in settings.INSTALLED_APPS}
    assert packages & installed <= set(PACKAGES) <= packages
    # The showcase is the one app a site may leave out (V10R_SHOWCASES=0).
    assert set(PACKAGES) - installed <= {"showcases"}


def test_the_settings_default_for_max_attempts_is_the_backoffs():
    # Inlined in the settings, which import no app; read from their source, since the
    # environment may set the value itself.
    from notifications import backoff

    tree = ast.parse((BASE_DIR / "v10r" / "settings.py").read_text())
    [call] = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == "DELIVERY_MAX_ATTEMPTS"
    ]
    [default] = [k.value for k in call.keywords if k.arg == "default"]
    assert ast.literal_eval(default) == backoff.MAX_ATTEMPTS


def test_a_channel_may_import_neither_the_rules_nor_the_engine(tmp_path):
    (tmp_path / "transports").mkdir()
    probe = tmp_path / "transports" / "probe.py"
    probe.write_text(
        "from core import logs\nfrom transports.base import Channel\n"
        "from recipients import catalogue\n"
        "def late():\n    from notifications.models import Notification\n"
    )
    assert forbidden(probe, root=tmp_path) == [
        "transports/probe.py:3 imports recipients.catalogue",
        "transports/probe.py:5 imports notifications.models.Notification",
    ]


def test_the_rules_may_import_the_channels_but_not_the_engine(tmp_path):
    (tmp_path / "recipients").mkdir()
    probe = tmp_path / "recipients" / "probe.py"
    probe.write_text("import transports\nfrom notifications import outbox\n")
    assert forbidden(probe, root=tmp_path) == ["recipients/probe.py:2 imports notifications.outbox"]


def test_the_apps_above_use_a_channel_only_through_the_registry_and_its_base(tmp_path):
    (tmp_path / "accounts").mkdir()
    probe = tmp_path / "accounts" / "probe.py"
    probe.write_text(
        "import transports\nfrom transports.base import Channel\n"
        "from transports.telegram import _CHAT_ID\nfrom recipients.admin import addresses\n"
    )
    assert forbidden(probe, root=tmp_path) == [
        "accounts/probe.py:3 imports a channel's machinery: transports.telegram._CHAT_ID",
        "accounts/probe.py:4 imports the recipients' machinery: recipients.admin.addresses",
    ]
