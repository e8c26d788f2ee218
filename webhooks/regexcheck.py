"""Judging HyperNode ``regexMatch`` patterns without ever stalling the webhook server.

RE2 holds the GIL while it compiles, and a hostile pattern of a few hundred bytes can take
a second and several MiB to compile, so a thread would not keep ``/healthz`` answering.
The server therefore sends new patterns to one child process (``webhooks.regex_worker``)
and awaits its verdicts; the event loop stays free the whole time.

Per request, at most ``MAX_NEW_PATTERNS`` patterns the cache does not know yet, of at most
``MAX_NEW_PATTERN_BYTES`` together, are compiled, within ``COMPILE_BUDGET_SECONDS`` in
total. Patterns beyond the budget are refused with a message saying which limit, so a
client may split them over several objects; those refusals are not cached (the pattern is
not at fault). A request's new patterns go to the worker in one message and come back one
line each; a compile that outlives the budget kills the worker, which is restarted for the
next request. The worker is also recycled when its memory grows past
``WORKER_MAX_RSS_BYTES``.

Verdicts (valid, or Go's error) are kept in a ``VerdictCache`` bounded by entries and by
bytes: a verdict is a short string, never a compiled program, so the cache cannot grow
the server by more than its byte bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import time
from collections import OrderedDict
from collections.abc import Iterable

log = logging.getLogger("hyperplace.webhooks.regex")

MAX_NEW_PATTERNS = 32
MAX_NEW_PATTERN_BYTES = 16 * 1024
COMPILE_BUDGET_SECONDS = 2.0
WORKER_MAX_RSS_BYTES = 128 << 20
WORKER_MAX_PATTERNS = 5000
STARTUP_TIMEOUT_SECONDS = 30.0
VERDICT_CACHE_ENTRIES = 16384
VERDICT_CACHE_BYTES = 16 << 20


class VerdictCache:
    """LRU map pattern -> Go's error (or None: valid), bounded by entries and bytes."""

    def __init__(self, max_entries: int = VERDICT_CACHE_ENTRIES, max_bytes: int = VERDICT_CACHE_BYTES):
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: OrderedDict[str, tuple[str | None, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, pattern: object) -> bool:
        return pattern in self._items

    def get(self, pattern: str) -> str | None:
        """The verdict; KeyError when unknown."""
        verdict, _ = self._items[pattern]
        self._items.move_to_end(pattern)
        return verdict

    def put(self, pattern: str, verdict: str | None) -> None:
        """Remember a verdict, evicting the least recently used beyond the bounds."""
        cost = 100 + 2 * len(pattern) + 2 * len(verdict or "")
        if cost > self.max_bytes:
            return
        old = self._items.pop(pattern, None)
        if old is not None:
            self.bytes -= old[1]
        self._items[pattern] = (verdict, cost)
        self.bytes += cost
        while len(self._items) > self.max_entries or self.bytes > self.max_bytes:
            _, (_, c) = self._items.popitem(last=False)
            self.bytes -= c


class RegexWorker:
    """One child process compiling patterns with RE2; restarted after a timeout."""

    def __init__(self, max_rss: int = WORKER_MAX_RSS_BYTES, max_patterns: int = WORKER_MAX_PATTERNS):
        self.max_rss = max_rss
        self.max_patterns = max_patterns
        self.restarts = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._served = 0
        self._lock = asyncio.Lock()
        self._prestart: asyncio.Task[None] | None = None

    async def _start(self) -> asyncio.subprocess.Process:
        if self._proc is None or self._proc.returncode is not None:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "webhooks.regex_worker",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=1 << 20,
            )
            self._served = 0
            assert self._proc.stdout is not None
            try:
                async with asyncio.timeout(STARTUP_TIMEOUT_SECONDS):
                    ready = await self._proc.stdout.readline()
            except TimeoutError:
                ready = b""
            if not ready.startswith(b'{"ready"'):
                await self.stop()
                raise OSError("the regex worker did not start")
        return self._proc

    async def _start_locked(self) -> None:
        async with self._lock:
            with contextlib.suppress(OSError):
                await self._start()

    async def start(self) -> None:
        """Start the child now (the server does at start-up), so no request waits for it."""
        await self._start_locked()

    async def stop(self) -> None:
        """Kill the child (it holds no state worth keeping). Never waits for the lock, so
        it may be called while holding it."""
        if self._prestart is not None and self._prestart is not asyncio.current_task():
            self._prestart.cancel()  # a pending restart would only start another child
            self._prestart = None
        proc, self._proc = self._proc, None
        if proc is not None and proc.returncode is None:
            proc.kill()
            with contextlib.suppress(ProcessLookupError):
                await proc.wait()

    async def judge(self, patterns: list[str], timeout: float) -> list[str | None]:
        """Go's error (or None) for each pattern, in order, as far as ``timeout`` seconds of
        waiting for the worker and compiling allow: the list is shorter when time ran out,
        and the child is then killed (a fresh one starts in the background). Starting a
        child that is not running does not count against ``timeout``."""
        started = time.monotonic()
        out: list[str | None] = []
        try:
            async with asyncio.timeout(timeout):
                await self._lock.acquire()
        except TimeoutError:
            return out
        try:
            waited = time.monotonic() - started
            proc = await self._start()
            deadline = time.monotonic() + timeout - waited
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(patterns).encode() + b"\n")
            rss = 0
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    await proc.stdin.drain()
                    for _ in patterns:  # one line per pattern, as each is compiled
                        line = await proc.stdout.readline()
                        if not line:
                            raise RuntimeError("the regex worker exited")
                        reply = json.loads(line)
                        err = reply.get("err")
                        out.append(err if isinstance(err, str) else None)
                        rss = max(rss, int(reply.get("rss", 0)))
            except (TimeoutError, RuntimeError, ValueError, OSError) as exc:
                if not isinstance(exc, TimeoutError):
                    log.warning("regex worker failed: %s", exc)
                self.restarts += 1
                await self.stop()
                # Start the next child now, so the next request does not wait for it.
                self._prestart = asyncio.get_running_loop().create_task(self._start_locked())
                return out
            self._served += len(patterns)
            if rss > self.max_rss or self._served >= self.max_patterns:
                await self.stop()  # RE2 and malloc keep freed memory; start afresh
            return out
        finally:
            self._lock.release()


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


class RegexChecker:
    """The verdicts for one request's patterns, from the cache or the worker, in budget."""

    def __init__(
        self,
        worker: RegexWorker | None = None,
        cache: VerdictCache | None = None,
        *,
        max_new: int = MAX_NEW_PATTERNS,
        max_new_bytes: int = MAX_NEW_PATTERN_BYTES,
        budget_seconds: float = COMPILE_BUDGET_SECONDS,
    ):
        self.worker = worker or RegexWorker()
        self.cache = cache or VerdictCache()
        self.max_new = max_new
        self.max_new_bytes = max_new_bytes
        self.budget_seconds = budget_seconds

    async def verdicts(self, patterns: Iterable[str]) -> dict[str, str | None]:
        """pattern -> Go's error, a budget refusal, or None (valid), for every pattern."""
        out: dict[str, str | None] = {}
        new: list[str] = []
        for p in dict.fromkeys(patterns):
            if p in self.cache:
                out[p] = self.cache.get(p)
            else:
                new.append(p)
        size = 0
        admitted: list[str] = []
        for count, p in enumerate(new, 1):
            size += len(p.encode("utf-8", "surrogatepass"))
            if count > self.max_new:
                out[p] = (
                    f"not checked: this request brings more than {_plural(self.max_new, 'new pattern')} "
                    "(a per-request limit of this webhook; send the rest in another object or request)"
                )
            elif size > self.max_new_bytes:
                out[p] = (
                    f"not checked: this request's new patterns exceed {self.max_new_bytes} bytes together "
                    "(a per-request limit of this webhook; send the rest in another object or request)"
                )
            else:
                admitted.append(p)
        if admitted:
            unavailable = False
            try:
                verdicts = await self.worker.judge(admitted, self.budget_seconds)
            except OSError as exc:
                log.warning("regex worker unavailable: %s", exc)
                verdicts, unavailable = [], True
            for p, verdict in zip(admitted, verdicts, strict=False):
                self.cache.put(p, verdict)
                out[p] = verdict
            for p in admitted[len(verdicts) :]:
                # Not cached: the pattern may be fine, the request was too costly overall.
                out[p] = (
                    "not checked: the pattern checker could not start; retry the request"
                    if unavailable
                    else f"not checked: compiling this request's patterns took longer than "
                    f"{self.budget_seconds:g} s (a per-request limit of this webhook; patterns this "
                    "costly to compile are better split over several requests)"
                )
        return out

    async def close(self) -> None:
        """Stop the worker process."""
        await self.worker.stop()
