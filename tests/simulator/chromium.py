"""A headless Chromium for the HTML page tests, driven over the DevTools protocol.

The page is opened from a file (no network); the tests type into it, press keys, read the
DOM with JavaScript and take screenshots, as a user's browser would show it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp


def chromium() -> str | None:
    """The Chromium (or Chrome) binary on PATH, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium_args(binary: str, profile: Path) -> list[str]:
    """A headless browser that talks to nobody."""
    return [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
    ]


class Page:
    """One browser tab: ``goto``, ``js``, ``type``, ``press``, ``screenshot``."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, session_id: str) -> None:
        self._ws = ws
        self._session = session_id
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._events: dict[str, asyncio.Event] = {}
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self._ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            fut = self._waiting.pop(data.get("id", -1), None)
            if fut is not None and not fut.done():
                fut.set_result(data)
            elif "method" in data and data["method"] in self._events:
                self._events[data["method"]].set()

    async def send(self, method: str, params: dict[str, Any] | None = None, *, browser: bool = False) -> Any:
        """One DevTools command; its result, or an AssertionError with the browser's error."""
        i = next(self._ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[i] = fut
        msg: dict[str, Any] = {"id": i, "method": method, "params": params or {}}
        if not browser:
            msg["sessionId"] = self._session
        await self._ws.send_str(json.dumps(msg))
        data = await asyncio.wait_for(fut, 120)
        assert "error" not in data, f"{method}: {data['error']}"
        return data.get("result", {})

    async def goto(self, url: str) -> None:
        """Open ``url`` and wait for its load event."""
        loaded = self._events["Page.loadEventFired"] = asyncio.Event()
        await self.send("Page.navigate", {"url": url})
        await asyncio.wait_for(loaded.wait(), 120)

    async def js(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        res = await self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
        )
        assert "exceptionDetails" not in res, res["exceptionDetails"]
        return res["result"].get("value")

    async def type(self, text: str) -> None:
        """Type into the focused element, firing input events as a keyboard would."""
        await self.send("Input.insertText", {"text": text})

    async def press(self, key: str) -> None:
        """Press and release a named key (``Enter``, ``Escape``)."""
        codes = {"Enter": 13, "Escape": 27}
        for kind in ("keyDown", "keyUp"):
            await self.send(
                "Input.dispatchKeyEvent",
                {"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": codes[key]},
            )

    async def screenshot(self, path: Path) -> Path:
        """A PNG of the visible part of the page."""
        await self.js("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        res = await self.send("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(res["data"]))
        return path


@contextlib.asynccontextmanager
async def open_page(binary: str, profile: Path, width: int = 1400, height: int = 1000) -> AsyncIterator[Page]:
    """Start a headless Chromium and yield one of its tabs; the browser is stopped on exit."""
    proc = await asyncio.create_subprocess_exec(
        *chromium_args(binary, profile),
        "--remote-debugging-port=0",
        "about:blank",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    drain: asyncio.Task[None] | None = None
    try:
        url = None
        while url is None:
            line = await asyncio.wait_for(proc.stderr.readline(), 120)
            if not line:
                raise AssertionError("Chromium exited before it listened for DevTools")
            m = re.search(rb"DevTools listening on (ws://\S+)", line)
            url = m.group(1).decode() if m else None
        stderr = proc.stderr

        async def drain_stderr() -> None:  # a full pipe would stall the browser
            while await stderr.readline():
                pass

        drain = asyncio.create_task(drain_stderr())
        async with aiohttp.ClientSession() as http, http.ws_connect(url, max_msg_size=0) as ws:
            page = Page(ws, "")
            targets = await page.send("Target.getTargets", browser=True)
            tab = next(t for t in targets["targetInfos"] if t["type"] == "page")
            attached = await page.send(
                "Target.attachToTarget", {"targetId": tab["targetId"], "flatten": True}, browser=True
            )
            page._session = attached["sessionId"]
            await page.send("Page.enable")
            await page.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            )
            try:
                yield page
            finally:
                page._reader.cancel()
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 20)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        if drain is not None:
            drain.cancel()
