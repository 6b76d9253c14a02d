"""deploy/nginx.conf as a template: every placeholder filled, and valid nginx once it is."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from django.conf import settings

from deploy import nginx as template
from showcases import analysis, views
from tests.deploy.servers import nginx_executable


def test_every_placeholder_has_a_production_default_and_every_default_a_placeholder():
    placeholders = set(template.PLACEHOLDER.findall(template.TEMPLATE.read_text()))
    assert placeholders == set(template.DEFAULTS)


def test_rendering_leaves_no_placeholder_and_uses_the_values_given():
    text = template.render(LISTEN="127.0.0.1:8081", UPSTREAM="unix:/run/v10r/gunicorn.sock")
    assert template.PLACEHOLDER.search(text) is None
    assert "listen 127.0.0.1:8081 default_server;" in text
    assert "server unix:/run/v10r/gunicorn.sock;" in text
    # Unchanged placeholders take the production defaults.
    assert "client_header_timeout 10s;" in text


def test_a_misspelt_placeholder_is_an_error_not_a_silent_default():
    with pytest.raises(KeyError, match="LISTENS"):
        template.render(LISTENS="8080")


def kilobytes(size: str) -> int:
    assert size.endswith("k"), size
    return int(size[:-1]) * 1024


def test_the_body_limits_are_the_apps_own():
    """nginx refuses exactly what the app would: anything above is a wasted upload, anything
    below an upload the app would have taken."""
    general, analyse = re.findall(r"client_max_body_size (\S+);", template.TEMPLATE.read_text())
    assert kilobytes(general) == settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    assert kilobytes(analyse) == analysis.MAX_BYTES + views.MULTIPART_OVERHEAD


def test_nginxs_refusal_of_a_large_photo_is_the_apps_own_message_in_english():
    from django.utils import translation

    [body] = re.findall(r"return 413 '(.*)';", template.TEMPLATE.read_text())
    with translation.override("en"):
        assert json.loads(body) == {"error": analysis.too_large(), "code": "too_large"}


def test_the_command_line_prints_the_rendered_file():
    result = subprocess.run(
        [sys.executable, "deploy/nginx.py", "--set", "LISTEN=8443", "--set", "REQUEST_BURST=7"],
        cwd=template.TEMPLATE.parents[1],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert "listen 8443 default_server;" in result.stdout
    assert "burst=7 nodelay;" in result.stdout


def test_the_server_names_are_the_apps_allowed_hosts():
    assert template.server_names("example.com, .Example.org,[2001:db8::1],192.0.2.1") == (
        "example.com .example.org [2001:db8::1] 192.0.2.1"
    )
    # Unset, the app's own default; "*", any Host at all.
    assert template.server_names("") == "localhost 127.0.0.1 [::1]"
    assert template.server_names("example.com,*") == '"~."'


@pytest.mark.parametrize("hosts", ["example.com;", "a.com b.com", "ex{ample}.com", "*.example.com"])
def test_allowed_hosts_nginx_would_read_otherwise_are_refused_with_their_name(hosts):
    with pytest.raises(ValueError, match="is not a host name or address"):
        template.server_names(hosts)


def test_the_command_line_takes_the_server_names_from_django_allowed_hosts():
    def run(hosts: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "deploy/nginx.py"],
            cwd=template.TEMPLATE.parents[1],
            env={"PATH": "/usr/bin:/bin", "DJANGO_ALLOWED_HOSTS": hosts},
            capture_output=True,
            text=True,
            timeout=30,
        )

    rendered = run("example.com,www.example.com")
    assert rendered.returncode == 0, rendered.stderr
    assert "server_name example.com www.example.com;" in rendered.stdout
    refused = run("example.com;evil")
    assert refused.returncode == 2
    assert "'example.com;evil' is not a host name or address" in refused.stderr


def test_the_production_rendering_is_valid_nginx(nginx_installed, tmp_path):
    """Production's values as they are, but its files moved here: `nginx -t` opens them."""
    config = tmp_path / "nginx.conf"
    tmp_path.chmod(0o755)
    config.write_text(
        template.render(
            PID=str(tmp_path / "nginx.pid"),
            ERROR_LOG=str(tmp_path / "error.log"),
            ACCESS_LOG=str(tmp_path / "access.log"),
            TEMP_DIR=str(tmp_path),
        )
    )
    result = subprocess.run(
        [nginx_executable(), "-t", "-p", str(tmp_path), "-c", str(config)]
        + ["-e", str(tmp_path / "error.log")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert "test is successful" in result.stderr
