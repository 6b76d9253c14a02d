"""The sentences the /showcases/workers/ page's scripts show, in the request's language.

Translated on the server, like every other word of the page, and handed to the scripts as
JSON (json_script in showcases/workers.html): the scripts hold no words of their own. A
sentence that counts comes as ngettext's words for each plural category of the language
(core/plurals.py), for the script to pick with Intl.PluralRules.
"""

from __future__ import annotations

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from core import plurals


def palette_demo() -> dict:
    """The palette demo's sentences, read by workers-page.js.

    Numbers arrive formatted in the page's language; none of these embeds the browser's own
    (English) words, which the page logs and leaves in a tooltip.
    """
    return {
        # Refusals on choosing a file: every lane must be able to read it.
        "empty": _("That file is empty (0 bytes). Choose a JPEG, PNG or WebP photo."),
        "notImage": _("That file is not an image. Choose a JPEG, PNG or WebP photo."),
        "unsupported": _(
            "The demo reads only JPEG, PNG and WebP photos: all three lanes must read the same "
            "photo, and the server lane reads no other format. Choose a photo in one of these."
        ),
        "undecodable": _(
            "The browser could not decode this image; the file may be damaged or cut short. "
            "Choose another photo."
        ),
        "unreadable": _(
            "The browser can no longer read this file (was it moved or changed?). Choose it again."
        ),
        "sampleFailed": _("The sample photo could not be loaded. Reload the page and try again."),
        # While a photo is fetched or read, before its preview.
        "loadingSample": _("Loading the sample photo…"),
        "reading": _("Reading the photo…"),
        # What the server lane would refuse, said on choosing, before anything is uploaded.
        "serverFileTooLarge": _(
            "This file is {size}; the server lane takes files up to {limit}, so it stays off. "
            "The two browser lanes can still run it."
        ),
        "serverTooManyPixels": _(
            "This photo has {megapixels} million pixels; the server lane takes at most {limit} "
            "million, so it stays off. Scale the photo down to {limit} megapixels or fewer to "
            "run it there; the two browser lanes can run it as it is."
        ),
        # While a lane runs.
        "working": {
            "main": _("Working… the page freezes until the main thread is done."),
            "worker": _("Working in the worker… the main thread stays free."),
            "server": _("Sending the photo and waiting for the server…"),
        },
        # A lane's failures.
        "decodeFailed": _("The browser could not decode this image."),
        "outOfMemory": _("The browser ran out of memory for this photo. Try the 720 px work size."),
        "mainFailed": _("The run on the main thread failed."),
        "workerFailed": _("The worker failed."),
        "workerLoad": _(
            "The worker could not start, so nothing ran. Reload the page and try again."
        ),
        "workerMessage": _("The worker’s answer could not be read."),
        "workerTimeout": _(
            "The worker did not answer within {seconds} s, so it was stopped; the next run "
            "starts a fresh one."
        ),
        "serverFailed": _("The server lane failed."),
        "serverOffline": _(
            "The server lane needs the network, and this browser is offline. The two browser "
            "lanes work without it."
        ),
        "serverUnreachable": _(
            "The server could not be reached. Check the connection and try again."
        ),
        "serverTooLarge": _(
            "The server refused the photo as too large: the server lane takes files up to "
            "{limit}. The two browser lanes can still run it."
        ),
        "serverStatus": _(
            "The server answered with an error ({status}) and no explanation. Try again later."
        ),
        "serverTooMany": _(
            "The server is getting too many requests from this address; try again in a "
            "second. The two browser lanes can still run it."
        ),
        # Results.
        "caption": _("{width} × {height} px, {size}"),
        "pixels": _("{width} × {height} px"),
        "swatch": _("{hex} · {percent}"),
        "otherColours": _("Grey, {percent}: pixels near none of these six colours"),
        "transparent": _(
            "{percent} of the pixels are transparent, or nearly, and are not counted: the "
            "shares above are of the other pixels."
        ),
        "verdictMainSlow": _(
            "On the main thread the page froze for up to {main}; with the worker the longest "
            "frame was {worker}, so the page kept moving."
        ),
        "verdictWorkerSmoother": plurals.forms(
            lambda ratio: ngettext(
                "Both lanes had slow frames, but the worker kept the page far smoother: the main "
                "thread’s longest frame, {main}, was {ratio} time as long as the worker’s, "
                "{worker}.",
                "Both lanes had slow frames, but the worker kept the page far smoother: the main "
                "thread’s longest frame, {main}, was {ratio} times as long as the worker’s, "
                "{worker}.",
                ratio,
            )
        ),
        "verdictBothSlow": _(
            "Both lanes had slow frames of about the same length this time: up to {main} on the "
            "main thread and {worker} with the worker. The machine was busy, and a busy machine "
            "delays frames whichever thread does the work. Run both again to compare."
        ),
        "verdictBothSlowMainLonger": _(
            "Both lanes had slow frames: up to {main} on the main thread and {worker} with the "
            "worker. The main thread’s was longer, but not twice as long, and a busy machine "
            "delays frames whichever thread does the work. Run both again to compare."
        ),
        "verdictBothSlowWorkerLonger": _(
            "Both lanes had slow frames: up to {worker} with the worker and {main} on the main "
            "thread. The worker’s was longer, but not twice as long, and a busy machine delays "
            "frames whichever thread does the work. Run both again to compare."
        ),
        "verdictClose": _(
            "The longest frames were close, {main} on the main thread and {worker} with the "
            "worker: less than one stutter apart, so this run does not tell the threads apart."
        ),
        "verdictWorkerSlow": _(
            "This time the worker lane had the slow frame: {worker}, against {main} on the main "
            "thread (over {limit}, a frame is a visible stutter). Run both again to compare."
        ),
        "verdictNeither": _(
            "Neither lane stalled the page: the longest frame was {main} on the main thread and "
            "{worker} with the worker."
        ),
        "tryFullResolution": _(
            "Choose full resolution to give the main thread enough work to freeze the page."
        ),
        "verdictMixed": _(
            "The two browser lanes ran at different work sizes; run both at the same size to "
            "compare them."
        ),
        # The indicator's counter, in words for its number.
        "framesDrawn": plurals.forms(
            lambda count: ngettext("{count} frame drawn", "{count} frames drawn", count)
        ),
    }


def live_queue() -> dict[str, str]:
    """The live queue's sentences, read by queue-live.js."""
    return {
        "offline": _(
            "This browser is offline, so the live queue has stopped updating; it picks up again "
            "when the connection is back."
        ),
        "unreachable": _(
            "The server did not answer, so the live queue has stopped updating; it tries again "
            "in {seconds} s."
        ),
        "tryOffline": _("This browser is offline; “Try it” needs the network."),
        "tryUnreachable": _(
            "The server could not be reached, so nothing was queued. Try again in a moment."
        ),
    }
