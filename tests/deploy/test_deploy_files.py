"""The ways to run the site, as operators use them: the Procfile's commands run as written,
the systemd units pass systemd-analyze, and the Containerfile holds what it promises. No image
is built here (no container engine or network on CI): its instructions are read one by one,
its files are copied as its COPY lines say, and the copy is served as its CMD says."""

from __future__ import annotations

import fnmatch
import itertools
import os
import re
import shlex
import shutil
import signal
import string
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from notifications import checks
from tests.deploy import clients
from tests.deploy.test_gunicorn_config import effective_config
from tests.helpers import poll, python, require
from tests.smtp import free_port
from transports import email

BASE_DIR = Path(__file__).resolve().parents[2]
PROCFILE = BASE_DIR / "Procfile"
UNITS = BASE_DIR / "deploy" / "systemd"
CONTAINERFILE = BASE_DIR / "deploy" / "Containerfile"
# The virtual environment running the tests stands in for the one the units and image name.
VENV = Path(sys.executable).parent.parent

STOP_SECONDS = 30


# --- Procfile -------------------------------------------------------------------------------


def procfile() -> dict[str, str]:
    entries = {}
    for line in PROCFILE.read_text().splitlines():
        name, separator, command = line.partition(":")
        assert separator and name.isidentifier(), f"not a Procfile line: {line!r}"
        entries[name] = command.strip()
    return entries


def as_written(command: str, *, port: int) -> list[str]:
    """The command's arguments with $PORT substituted, as a platform's shell does."""
    expanded = command.replace("$PORT", str(port))
    # Nothing else a shell would interpret, so every runner (Heroku's bash, honcho's sh, this
    # test) starts the same program with the same arguments, and signals reach it directly.
    assert not set(expanded) & set("$`|&;<>(){}*?\\'\"~"), expanded
    return shlex.split(expanded)


@pytest.fixture
def process_env(production_env) -> dict[str, str]:
    """A production process's environment; `python` and `gunicorn` are this venv's."""
    return production_env | {
        "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ['PATH']}",
        # One worker: enough to answer, and quick to boot.
        "WEB_CONCURRENCY": "1",
    }


def status_of(port: int, path: str) -> int | None:
    """The status GET path answers with, or None while nothing listens."""
    try:
        return clients.get(port, path, timeout=5).status
    except OSError:
        return None


class Process:
    """A long-running command, its output in a file (a pipe nobody reads would fill up)."""

    def __init__(self, args: list[str], *, env: dict[str, str], folder: Path, cwd: Path) -> None:
        self.log = folder / f"{Path(args[0]).name}.log"
        with self.log.open("w") as output:
            self.popen = subprocess.Popen(
                args, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT
            )

    def output(self) -> str:
        return self.log.read_text()

    def wait_until(self, predicate, *, seconds: float) -> None:
        up = poll(lambda: predicate() or self.popen.poll() is not None, seconds=seconds, every=0.2)
        assert up and self.popen.poll() is None, self.output()

    def terminate(self) -> int:
        """SIGTERM, as a platform or systemd stops it; return its exit status."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(10)
            raise AssertionError(f"still running {STOP_SECONDS} s after SIGTERM") from None


def test_the_procfile_declares_the_web_the_worker_the_release_step_and_the_jobs_sweep():
    assert set(procfile()) == {"web", "worker", "release", "scheduler"}
    # Retention and housekeeping run only as jobs: a Procfile without the sweep would let the
    # outbox grow.
    assert procfile()["scheduler"] == "python manage.py run_jobs --every 60"


@pytest.mark.django_db(transaction=True)
def test_the_procfile_web_process_answers_its_probes_and_exits_0_on_sigterm(process_env, tmp_path):
    port = free_port()
    env = process_env | {"PORT": str(port)}
    web = Process(as_written(procfile()["web"], port=port), env=env, folder=tmp_path, cwd=BASE_DIR)
    try:
        web.wait_until(lambda: status_of(port, "/healthz") == 200, seconds=90)
        assert status_of(port, "/readyz") == 200
        # The image's HEALTHCHECK, as the container engine runs it: a shell command.
        probe = subprocess.run(["/bin/sh", "-c", healthcheck()], env=env, timeout=30)
        assert probe.returncode == 0
    finally:
        status = web.terminate()
    assert status == 0, web.output()
    # ... and the same check fails once nothing answers.
    probe = subprocess.run(["/bin/sh", "-c", healthcheck()], env=env, capture_output=True)
    assert probe.returncode != 0


@pytest.mark.django_db(transaction=True)
def test_the_procfile_worker_ticks_and_exits_0_on_sigterm(process_env, tmp_path):
    command = as_written(procfile()["worker"], port=free_port())
    worker = Process(command, env=process_env, folder=tmp_path, cwd=BASE_DIR)
    try:
        worker.wait_until(lambda: "tick reaped=" in worker.output(), seconds=60)
    finally:
        status = worker.terminate()
    assert status == 0, worker.output()
    assert "SIGTERM received: finishing the current batch" in worker.output()


@pytest.mark.django_db(transaction=True)
def test_the_procfile_release_step_migrates_and_exits_0(process_env):
    command = as_written(procfile()["release"], port=free_port())
    result = subprocess.run(
        command, cwd=BASE_DIR, env=process_env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "No migrations to apply." in result.stdout


@pytest.mark.django_db(transaction=True)
def test_nginx_passes_the_probes_outside_the_per_client_rate_limit(nginx):
    # One request a second, a burst of one: pages are refused at once, probes never.
    proxy = nginx(REQUEST_RATE="1r/s", REQUEST_BURST="1")
    probes = [clients.get(proxy.port, path, timeout=10).status for path in ["/healthz"] * 5]
    probes += [clients.get(proxy.port, path, timeout=10).status for path in ["/readyz"] * 5]
    pages = [clients.get(proxy.port, "/", timeout=10).status for _ in range(5)]
    assert probes == [200] * 10
    assert 429 in pages


# --- systemd --------------------------------------------------------------------------------


def unit_values(path: Path, key: str) -> list[str]:
    prefix = f"{key}="
    return [
        line.removeprefix(prefix)
        for line in path.read_text().splitlines()
        if line.startswith(prefix)
    ]


def render_units(folder: Path, *, change: tuple[str, str] | None = None) -> list[Path]:
    """The units with /opt/v10r's paths pointing into this checkout and its venv:
    systemd-analyze checks that each ExecStart program exists."""
    rendered = []
    for unit in sorted([*UNITS.glob("*.service"), *UNITS.glob("*.timer")]):
        text = unit.read_text()
        text = text.replace("/opt/v10r/venv", str(VENV)).replace("/opt/v10r/app", str(BASE_DIR))
        assert "/opt/v10r" not in text
        if change:
            text = text.replace(*change)
        rendered.append(folder / unit.name)
        rendered[-1].write_text(text)
    return rendered


def verify(units: list[Path]) -> tuple[int, str]:
    analyze = require("systemd-analyze", install="apt-get install systemd")
    result = subprocess.run(
        [analyze, "verify", *map(str, units)], capture_output=True, text=True, timeout=60
    )
    return result.returncode, result.stdout + result.stderr


def test_the_systemd_units_pass_systemd_analyze_verify_without_a_warning(tmp_path):
    units = render_units(tmp_path)
    assert [unit.name for unit in units] == [
        "v10r-drain.service",
        "v10r-drain@.service",
        "v10r-jobs.service",
        "v10r-jobs.timer",
        "v10r-web.service",
    ]
    # The template, as an instance would load it.
    assert verify([*units, tmp_path / "v10r-drain@2.service"]) == (0, "")


def test_systemd_analyze_verify_reports_a_mistake_in_a_unit(tmp_path):
    # What the test above relies on: systemd-analyze exits 0 on a bad value, but says so.
    units = render_units(tmp_path, change=("ProtectSystem=strict", "ProtectSystem=stricter"))
    status, output = verify(units)
    assert "Failed to parse protect system value" in output, (status, output)


def test_the_drain_template_is_the_drain_unit_under_an_instance_name():
    def body(path: Path) -> list[str]:
        return [
            line
            for line in path.read_text().splitlines()
            if not line.startswith(("#", "Description="))
        ]

    assert body(UNITS / "v10r-drain@.service") == body(UNITS / "v10r-drain.service")


@pytest.mark.parametrize("unit", ["v10r-web.service", "v10r-drain.service"])
def test_each_unit_runs_unprivileged_restarts_on_failure_and_stops_with_sigterm(unit):
    path = UNITS / unit
    expected = {
        "User": ["v10r"],
        "EnvironmentFile": ["/etc/v10r/v10r.env"],
        "Restart": ["on-failure"],
        "KillSignal": ["SIGTERM"],
        "NoNewPrivileges": ["yes"],
        "ProtectSystem": ["strict"],
        "PrivateTmp": ["yes"],
    }
    assert {key: unit_values(path, key) for key in expected} == expected
    # Numba writes machine code and then runs it; this option would forbid that.
    assert unit_values(path, "MemoryDenyWriteExecute") == []


def test_the_drain_stop_timeout_outlasts_a_batch_and_closing_its_connections():
    # The unit's arithmetic, with the defaults it names (batch 25, concurrency 16) and the
    # slowest channel configured: 2 rounds of an 11 s email send + 5 s, with EMAIL_TIMEOUT's
    # 10 s. A slower channel or a larger batch makes this fail until the unit is raised.
    batch = checks.worst_case_batch(batch_size=25, concurrency=16).total_seconds()
    closing = 16 * email.CLOSE_SECONDS
    needed = batch + closing
    for unit in ("v10r-drain.service", "v10r-drain@.service"):
        assert float(*unit_values(UNITS / unit, "TimeoutStopSec")) > needed


def test_the_web_stop_timeout_outlasts_gunicorns_graceful_timeout():
    graceful = float(effective_config()["graceful_timeout"])
    assert float(*unit_values(UNITS / "v10r-web.service", "TimeoutStopSec")) > graceful


# --- Containerfile --------------------------------------------------------------------------

INSTRUCTIONS = {
    "FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
    "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL",
}  # fmt: skip


def instructions() -> list[tuple[str, str]]:
    """(instruction, arguments) for each logical line: comments dropped, continuations joined."""
    result, pending = [], ""
    for line in CONTAINERFILE.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, arguments = (pending + stripped).partition(" ")
        result.append((keyword, arguments.strip()))
        pending = ""
    assert not pending, "the file ends inside a continued line"
    return result


def final_stage() -> list[tuple[str, str]]:
    steps = instructions()
    last_from = max(i for i, (keyword, _) in enumerate(steps) if keyword == "FROM")
    return steps[last_from:]


def only(keyword: str) -> str:
    found = [arguments for k, arguments in final_stage() if k == keyword]
    assert len(found) == 1, (keyword, found)
    return found[0]


def healthcheck() -> str:
    """The HEALTHCHECK's command, which the engine runs with /bin/sh -c."""
    _, separator, command = only("HEALTHCHECK").partition(" CMD ")
    assert separator, "HEALTHCHECK without CMD"
    return command


def copies(steps: list[tuple[str, str]]) -> list[tuple[list[str], str]]:
    """(sources, destination) of each COPY from the build context among steps."""
    result = []
    for keyword, arguments in steps:
        if keyword == "COPY" and not arguments.startswith("--from="):
            *sources, destination = shlex.split(arguments)
            result.append((sources, destination))
    return result


def test_the_containerfile_is_made_of_known_instructions_on_python_313_slim():
    steps = instructions()
    assert {keyword for keyword, _ in steps} <= INSTRUCTIONS
    assert steps[0][0] == "FROM"
    bases = [arguments.split()[0] for keyword, arguments in steps if keyword == "FROM"]
    assert bases and set(bases) == {"python:3.13-slim"}


def test_the_image_runs_its_command_as_an_unprivileged_user():
    keywords = [keyword for keyword, _ in final_stage()]
    assert keywords.index("USER") < keywords.index("CMD")
    user = only("USER")
    assert user.split(":")[0] not in {"root", "0"}
    assert any(f" {user}" in arguments for k, arguments in final_stage() if k == "RUN")


def test_the_image_checks_its_health_on_healthz_with_python_alone():
    command = healthcheck()
    assert command.startswith("python -c ")
    assert "/healthz" in command


def test_the_image_command_is_the_procfiles_web_command():
    assert only("CMD") == f"exec {procfile()['web']}"


def test_every_file_the_image_copies_is_in_the_repository_and_in_the_build_context():
    ignored = [
        line.strip()
        for line in (BASE_DIR / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for sources, _ in copies(instructions()):
        for source in sources:
            assert (BASE_DIR / source).exists(), source
            assert not any(fnmatch.fnmatch(source, pattern) for pattern in ignored), source


def test_the_image_copies_every_package_the_project_declares():
    with (BASE_DIR / "pyproject.toml").open("rb") as project:
        packages = tomllib.load(project)["tool"]["setuptools"]["packages"]["find"]["include"]
    copied = {source for sources, _ in copies(final_stage()) for source in sources}
    assert {package.removesuffix("*") for package in packages} <= copied


def image_env(env_lines: list[str], *, into: dict[str, str]) -> dict[str, str]:
    """into with the final stage's ENV lines applied, $NAME expanded as the builder does;
    /opt/venv is this venv."""
    env = dict(into)
    for arguments in env_lines:
        for assignment in shlex.split(arguments):
            name, _, value = assignment.partition("=")
            env[name] = string.Template(value).safe_substitute(env).replace("/opt/venv", str(VENV))
    return env


@pytest.mark.django_db(transaction=True)
def test_the_files_the_image_copies_are_enough_to_build_and_serve_the_site(process_env, tmp_path):
    # The final stage, replayed without an engine: its COPY lines into a folder, its
    # collectstatic with nothing but the image's own environment, then its CMD.
    app = tmp_path / "app"
    assert only("WORKDIR") == "/app"
    for sources, destination in copies(final_stage()):
        for source in sources:
            target = app / destination / (Path(source).name if destination.endswith("/") else "")
            if (BASE_DIR / source).is_dir():
                shutil.copytree(
                    BASE_DIR / source, target, ignore=shutil.ignore_patterns("__pycache__")
                )
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(BASE_DIR / source, target)
    env_lines = [arguments for keyword, arguments in final_stage() if keyword == "ENV"]
    # Numba's cache keys on the source files' paths: this copy's would only pile up in /tmp.
    numba = {"NUMBA_CACHE_DIR": str(tmp_path / "numba")}

    (collectstatic,) = [a for k, a in final_stage() if k == "RUN" and "collectstatic" in a]
    words = shlex.split(collectstatic)
    program = next(i for i, word in enumerate(words) if "=" not in word)
    build_env = image_env(env_lines, into={"PATH": "/usr/bin:/bin"}) | numba
    build_env |= dict(word.split("=", 1) for word in words[:program])
    built = subprocess.run(
        words[program:], cwd=app, env=build_env, capture_output=True, text=True, timeout=120
    )
    assert built.returncode == 0, built.stderr
    assert (app / "staticfiles" / "staticfiles.json").exists()

    port = free_port()
    run_env = image_env(env_lines, into=process_env) | numba | {"PORT": str(port)}
    run_env.pop("DJANGO_STATIC_ROOT")  # the image's own: /app/staticfiles
    command = only("CMD").removeprefix("exec ")
    web = Process(as_written(command, port=port), env=run_env, folder=tmp_path, cwd=app)
    try:
        web.wait_until(lambda: status_of(port, "/healthz") == 200, seconds=90)
        # A page: templates, translations and the static manifest all came along.
        assert status_of(port, "/") == 200
    finally:
        status = web.terminate()
    assert status == 0, web.output()


# --- The environment file -------------------------------------------------------------------


def env_example() -> dict[str, str]:
    lines = (UNITS / "v10r.env.example").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def test_every_variable_in_the_environment_example_is_one_the_site_reads():
    read = (BASE_DIR / "v10r" / "settings.py").read_text()
    for name in env_example():
        assert f'"{name}"' in read, name


def test_the_environment_example_filled_in_passes_the_deploy_checks(tmp_path):
    example = env_example()
    assert example["DJANGO_SECRET_KEY"] == ""  # no secret in the repository
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "V10R_"))}
    clean = {k: v for k, v in clean.items() if not k.startswith("WEBPUSH_")}
    env = clean | example | {"DJANGO_SECRET_KEY": "filled-in-" + "k" * 50}
    # The VAPID lines, appended as docs/deploy.md says: what the command prints on stdout.
    keys = python("manage.py", "vapid_keys", "--subject", "mailto:ops@v10r.example", env=env)
    assert keys.returncode == 0, keys.stderr
    env_file = tmp_path / "v10r.env"
    env_file.write_text((UNITS / "v10r.env.example").read_text() + keys.stdout)
    lines = env_file.read_text().splitlines()
    filled = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    env = clean | filled | {"DJANGO_SECRET_KEY": "filled-in-" + "k" * 50}
    result = python("manage.py", "check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode == 0, result.stderr


def test_the_environment_example_runs_the_inbox_and_web_push_as_the_sites_default_does():
    from v10r import settings

    channels = env_example()["V10R_CHANNELS"].split(",")
    # The site's default is every channel; the example leaves out only the bots, which need
    # tokens of the operator's own.
    assert set(channels) == set(settings._CHANNEL_CLASSES) - {"telegram", "discord"}
    assert {"inapp", "webpush"} <= set(channels)
    text = (UNITS / "v10r.env.example").read_text()
    for name in ("WEBPUSH_VAPID_PUBLIC_KEY", "WEBPUSH_VAPID_PRIVATE_KEY", "WEBPUSH_VAPID_SUBJECT"):
        assert name in text, name
    assert "manage.py vapid_keys --subject" in text and ">> /etc/v10r/v10r.env" in text


def test_the_environment_example_keeps_retention_on():
    example = env_example()
    assert int(example["OUTBOX_KEEP_SENT_DAYS"]) >= 1
    assert int(example["OUTBOX_KEEP_FINISHED_DAYS"]) >= int(example["OUTBOX_KEEP_SENT_DAYS"])


# --- docs/deploy.md, as an operator follows it ----------------------------------------------

DEPLOY_DOC = BASE_DIR / "docs" / "deploy.md"


def doc_commands() -> list[str]:
    """Every command in the guide's sh blocks, continuation lines joined, comments cut."""
    blocks = re.findall(r"```sh\n(.*?)```", DEPLOY_DOC.read_text(), flags=re.DOTALL)
    joined = "\n".join(blocks).replace("\\\n", " ")
    commands = (" ".join(line.split("  #")[0].split()) for line in joined.splitlines())
    return [command for command in commands if command]


def test_the_one_host_steps_install_every_unit_and_start_the_jobs_timer():
    commands = doc_commands()
    copies = [c for c in commands if c.startswith("cp deploy/systemd/")]
    assert copies, commands
    # cp PATTERN… /etc/systemd/system/ && systemctl daemon-reload
    patterns = copies[0].split()[1:-3]
    units = [p.name for p in UNITS.iterdir() if p.suffix in {".service", ".timer"}]
    for unit in units:
        assert any(fnmatch.fnmatch(f"deploy/systemd/{unit}", p) for p in patterns), unit
    enabled = " ".join(c for c in commands if c.startswith("systemctl enable --now"))
    for unit in ("v10r-web", "v10r-drain", "v10r-jobs.timer"):
        assert unit in enabled.split(), (unit, enabled)
    # The timer starts the sweep the service runs.
    assert unit_values(UNITS / "v10r-jobs.timer", "OnCalendar") == ["minutely"]
    assert unit_values(UNITS / "v10r-jobs.service", "ExecStart")[0].endswith("run_jobs --due")


def test_the_container_steps_run_the_jobs_beside_the_web_and_the_drain():
    runs = [c for c in doc_commands() if c.startswith("podman run") and " -d " in c]
    commands = [c.split(" v10r ", 1)[1] if " v10r " in c else "web" for c in runs]
    assert "python manage.py drain_outbox" in commands, commands
    assert "python manage.py run_jobs --every 60" in commands, commands


def containerfile_commands() -> list[str]:
    """The commands in the Containerfile's opening comment, continuation lines joined."""
    header = itertools.takewhile(
        lambda line: line.startswith("#"), CONTAINERFILE.read_text().splitlines()
    )
    joined = "\n".join(line[1:] for line in header).replace("\\\n", " ")
    commands = (" ".join(line.split("  #")[0].split()) for line in joined.splitlines())
    return [command for command in commands if command.startswith("podman ")]


def test_the_containerfile_starts_the_same_containers_as_the_guide_the_jobs_among_them():
    # The image's own notes are where an operator who only reads the Containerfile learns
    # what to run: they must not leave out the jobs the guide starts.
    def containers(commands):
        return [c for c in commands if c.startswith("podman run") and " -d " in c]

    assert containers(containerfile_commands()) == containers(doc_commands())


def test_the_guide_makes_the_first_account_and_the_vapid_keys_where_the_site_reads_them():
    commands = doc_commands()
    assert any(c.endswith("manage.py createsuperuser") and "--pty" in c for c in commands)
    assert any(c.endswith("python manage.py createsuperuser") and " -it " in c for c in commands)
    appends = [c for c in commands if "manage.py vapid_keys --subject" in c]
    assert any(c.endswith(">> /etc/v10r/v10r.env") for c in appends), appends
    assert any(c.endswith(">> v10r.env") for c in appends), appends
    assert "](accounts.md" in DEPLOY_DOC.read_text()  # sign-up, and the accounts staff add
