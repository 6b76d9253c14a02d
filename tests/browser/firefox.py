"""Debian's Firefox ESR, headless, driven over Marionette, for what Chromium cannot do here.

Firefox's push service is a WebSocket server named by a pref, so a test can point it at its
own (tests/mozpush.py), where Chromium's is Google's FCM; and Firefox shows a notification in
a window of its own (the XUL alert), which Marionette can click from the chrome context as a
person would. Each Firefox runs on a fresh profile in a test's temporary folder, with
Marionette on a port it picks itself, and reaches nothing beyond loopback.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from marionette_driver.by import By
from marionette_driver.marionette import Marionette

# Nothing that would reach the network at start-up or later (updates, telemetry, captive
# portal and connectivity checks, safe browsing lists, remote settings, studies, the region
# lookup, search and add-on updates), nor a first-run page to wait for. Marionette applies
# most of these too, but only once it is up; from user.js they hold from the first moment.
QUIET = {
    "app.update.disabledForTesting": True,
    "app.update.auto": False,
    "app.normandy.enabled": False,
    "app.normandy.api_url": "",
    "app.shield.optoutstudies.enabled": False,
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.page": 0,
    "browser.startup.homepage": "about:blank",
    "browser.startup.homepage_override.mstone": "ignore",
    "startup.homepage_welcome_url": "about:blank",
    "browser.aboutwelcome.enabled": False,
    "browser.newtabpage.enabled": False,
    "browser.region.network.url": "",
    "browser.region.update.enabled": False,
    "browser.search.update": False,
    "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False,
    "browser.safebrowsing.blockedURIs.enabled": False,
    "browser.safebrowsing.downloads.enabled": False,
    "browser.safebrowsing.provider.mozilla.updateURL": "",
    "browser.ping-centre.telemetry": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "datareporting.healthreport.uploadEnabled": False,
    "toolkit.telemetry.enabled": False,
    "toolkit.telemetry.server": "",
    "extensions.update.enabled": False,
    "extensions.getAddons.cache.enabled": False,
    "extensions.systemAddon.update.enabled": False,
    "extensions.blocklist.enabled": False,
    "geo.provider.network.url": "",
    "media.gmp-manager.updateEnabled": False,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "network.dns.disablePrefetch": True,
    "network.prefetch-next": False,
    "services.settings.server": "data:,#remote-settings-off/v1",
    "security.remote_settings.intermediates.enabled": False,
    "security.OCSP.enabled": 0,
    "browser.sessionstore.resume_from_crash": False,
    # Marionette on a free port, written to the profile's MarionetteActivePort.
    "marionette.port": 0,
}


class Firefox:
    """One Firefox process on profile (a fresh folder) with prefs on top of QUIET, and
    Marionette's session with it (client). Its output goes to profile/../firefox.log, which
    a failure quotes."""

    def __init__(
        self, executable: str, profile: Path, prefs: dict[str, Any], *, seconds: float = 30
    ) -> None:
        profile.mkdir(parents=True, exist_ok=True)
        lines = [
            f"user_pref({json.dumps(k)}, {json.dumps(v)});\n" for k, v in (QUIET | prefs).items()
        ]
        (profile / "user.js").write_text("".join(lines))
        self.profile = profile
        self.log_path = profile.parent / "firefox.log"
        env = {**os.environ, "MOZ_CRASHREPORTER_DISABLE": "1", "MOZ_HEADLESS": "1"}
        with self.log_path.open("wb") as log:
            # A session of its own, so teardown ends Firefox's content processes with it.
            self.process = subprocess.Popen(
                [executable, "--headless", "--marionette", "-remote-allow-system-access"]
                + ["--profile", str(profile), "-no-remote"],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        try:
            port = self._marionette_port(seconds)
            self.client = Marionette(host="127.0.0.1", port=port)
            self.client.start_session(timeout=seconds)
        except BaseException:
            self.quit()
            raise

    def _marionette_port(self, seconds: float) -> int:
        path = self.profile / "MarionetteActivePort"
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"Firefox exited ({self.process.returncode}): {self.log()}")
            with contextlib.suppress(FileNotFoundError, ValueError):
                return int(path.read_text())
            time.sleep(0.05)
        raise AssertionError(f"Marionette did not start within {seconds} s: {self.log()}")

    def log(self) -> str:
        """The end of Firefox's output."""
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-4000:]
        return ""

    def quit(self) -> None:
        """End the session and the process group, at once: nothing of the profile is kept."""
        client = getattr(self, "client", None)
        if client is not None:
            with contextlib.suppress(Exception):
                client.delete_session()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    # --- Driving it ---------------------------------------------------------------------

    def wait_for(self, check: Callable[[], Any], *, seconds: float, what: str) -> Any:
        """Call check until it returns something true, and return that; AssertionError
        naming what, with check's last answer, after seconds."""
        deadline = time.monotonic() + seconds
        while True:
            found = check()
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} within {seconds} s (last: {found!r})")
            time.sleep(0.05)

    def chrome(self, script: str, args: list | None = None) -> Any:
        """Run script with the browser's own privileges (Services and the like)."""
        with self.client.using_context(self.client.CONTEXT_CHROME):
            return self.client.execute_script(script, script_args=args or [])

    def allow_notifications(self, origin: str) -> None:
        """Grant origin the notification permission, as a person answering Firefox's prompt
        with "Allow" would: the push service delivers only to an origin that holds it."""
        self.chrome(
            """
            const principal =
              Services.scriptSecurityManager.createContentPrincipalFromOrigin(arguments[0]);
            Services.perms.addFromPrincipal(
              principal, "desktop-notification", Services.perms.ALLOW_ACTION);
            """,
            [origin],
        )

    def alert(self, title: str) -> str | None:
        """The handle of Firefox's alert window showing a notification titled title, or
        None. Leaves the client in the chrome context on that window when found."""
        self.client.set_context(self.client.CONTEXT_CHROME)
        for handle in self.client.chrome_window_handles:
            self.client.switch_to_window(handle, focus=False)
            shown = self.client.execute_script(
                """
                const root = document.documentElement;
                if (root.getAttribute("windowtype") !== "alert:alert") return null;
                return document.getElementById("alertTitleLabel").getAttribute("value");
                """
            )
            if shown == title:
                return handle
        self.client.set_context(self.client.CONTEXT_CONTENT)
        return None

    def click_alert(self, title: str, *, seconds: float) -> dict[str, str]:
        """Click the body of the alert titled title, as a person would; return what the
        alert showed (title, body, and the language the labels were given)."""
        self.wait_for(lambda: self.alert(title), seconds=seconds, what=f"alert {title!r}")
        try:
            shown = self.client.execute_script(
                """
                const title = document.getElementById("alertTitleLabel");
                const text = document.getElementById("alertTextLabel");
                return {title: title.getAttribute("value"), body: text.textContent,
                        lang: title.getAttribute("lang") || ""};
                """
            )
            self.client.find_element(By.ID, "alertTextLabel").click()
        finally:
            self.client.set_context(self.client.CONTEXT_CONTENT)
        return shown
