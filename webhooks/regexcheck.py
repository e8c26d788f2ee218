"""Judging HyperNode ``regexMatch`` patterns without ever stalling the webhook server, and
without one client's load refusing another's.

RE2 holds the GIL while it compiles, and a hostile pattern of a few hundred bytes can take
a second and several MiB to compile, so a thread would not keep ``/healthz`` answering.
The server therefore sends new patterns to child processes (``webhooks.regex_worker``), one
per core up to three (``default_workers``), and awaits their verdicts; the event loop stays
free the whole time.

**Fairness.** Each request's new patterns join a queue of their client (the requesting user
from the AdmissionReview); the workers take one pattern at a time from the clients in turn,
never two at once from the same client. So eight clients sending 32 costly patterns each
delay another client's one trivial pattern by at most one compile per client and worker,
instead of queueing it behind all of theirs. A pattern another request is compiling already
is awaited, not compiled twice, and every verdict goes into one ``VerdictCache`` all requests
share.

**Two budgets, two answers.** A request may spend ``COMPILE_BUDGET_SECONDS`` compiling its
*own* patterns: a compile that outlives what is left is killed (the worker restarts) and that
pattern and the request's remaining ones are refused as too costly ("split them over several
requests"), a final answer about the request. A request that cannot get its patterns compiled
within ``WAIT_SECONDS`` because the checker is busy with others is answered "the checker is
busy, retry" (``BUSY``), which the server sends as HTTP 429 Too Many Requests in the
AdmissionReview: a retryable error, never a refusal of a valid object. Neither is cached (the
pattern is not at fault); a compile still running when its request gave up finishes and is
cached for the retry.

**Memory.** A worker's resident memory is sampled every 20 ms while it compiles: beyond
``WORKER_KILL_RSS_BYTES`` it is killed mid-compile and the pattern refused as too costly;
after a compile that left it above ``WORKER_MAX_RSS_BYTES`` it is recycled (RE2 and malloc keep
freed memory). Per request, at most ``MAX_NEW_PATTERNS`` patterns the cache does not know
yet, of at most ``MAX_NEW_PATTERN_BYTES`` together, are compiled.

Verdicts (valid, or Go's error) are kept in a ``VerdictCache`` bounded by entries and by
bytes: a verdict is a short string, never a compiled program, so the cache cannot grow
the server by more than its byte bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
import time
from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field

log = logging.getLogger("hyperplace.webhooks.regex")

MAX_NEW_PATTERNS = 32
MAX_NEW_PATTERN_BYTES = 16 * 1024
COMPILE_BUDGET_SECONDS = 2.0
# Wall time a request waits for the checker; the apiserver calls these webhooks with 5 s.
WAIT_SECONDS = 3.0
# A worker starts near 36 MiB and keeps about 1 MiB per costly pattern it compiled; recycled
# past 96 MiB, it stays near 100 MiB, so three of them and the server fit the Deployment's
# 512 MiB. One compile growing a worker past 160 MiB is killed on the spot.
WORKER_MAX_RSS_BYTES = 96 << 20
WORKER_KILL_RSS_BYTES = 160 << 20
WORKER_MAX_PATTERNS = 5000
STARTUP_TIMEOUT_SECONDS = 30.0
VERDICT_CACHE_ENTRIES = 16384
VERDICT_CACHE_BYTES = 16 << 20
MEMORY_POLL_SECONDS = 0.02

BUSY = "not checked: the pattern checker is busy with other requests; retry the request"


def default_workers() -> int:
    """One worker per core, at least one and at most three (memory: see the thresholds)."""
    return max(1, min(3, os.cpu_count() or 1))


def _rss_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


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
    """One child process compiling patterns with RE2; restarted after a timeout. While it
    compiles, its memory is watched (``kill_rss``); ``last_failure`` says why the last
    ``judge`` came back short: "timeout", "memory" or "crash"."""

    def __init__(
        self,
        max_rss: int = WORKER_MAX_RSS_BYTES,
        max_patterns: int = WORKER_MAX_PATTERNS,
        kill_rss: int = WORKER_KILL_RSS_BYTES,
    ):
        self.max_rss = max_rss
        self.kill_rss = kill_rss
        self.max_patterns = max_patterns
        self.restarts = 0
        self.peak_rss = 0
        self.last_failure: str | None = None
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

    async def _watch_memory(self, proc: asyncio.subprocess.Process, flag: list[bool]) -> None:
        while proc.returncode is None:
            rss = _rss_of(proc.pid)
            self.peak_rss = max(self.peak_rss, rss)
            if rss > self.kill_rss:
                flag.append(True)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                return
            await asyncio.sleep(MEMORY_POLL_SECONDS)

    async def judge(self, patterns: list[str], timeout: float) -> list[str | None]:
        """Go's error (or None) for each pattern, in order, as far as ``timeout`` seconds of
        waiting for the worker and compiling allow: the list is shorter when time ran out
        (or the worker grew past ``kill_rss``, or died), and the child is then killed (a
        fresh one starts in the background). Starting a child that is not running does not
        count against ``timeout``."""
        started = time.monotonic()
        out: list[str | None] = []
        self.last_failure = None
        try:
            async with asyncio.timeout(timeout):
                await self._lock.acquire()
        except TimeoutError:
            self.last_failure = "timeout"
            return out
        try:
            waited = time.monotonic() - started
            proc = await self._start()
            deadline = time.monotonic() + timeout - waited
            assert proc.stdin is not None and proc.stdout is not None
            killed_for_memory: list[bool] = []
            watchdog = asyncio.get_running_loop().create_task(self._watch_memory(proc, killed_for_memory))
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
                if killed_for_memory:
                    self.last_failure = "memory"
                elif isinstance(exc, TimeoutError):
                    self.last_failure = "timeout"
                else:
                    self.last_failure = "crash"
                    log.warning("regex worker failed: %s", exc)
                self.restarts += 1
                await self.stop()
                # Start the next child now, so the next request does not wait for it.
                self._prestart = asyncio.get_running_loop().create_task(self._start_locked())
                return out
            finally:
                watchdog.cancel()
            self._served += len(patterns)
            self.peak_rss = max(self.peak_rss, rss)
            if rss > self.max_rss or self._served >= self.max_patterns:
                await self.stop()  # RE2 and malloc keep freed memory; start afresh
            return out
        finally:
            self._lock.release()


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@dataclass(eq=False)
class _Request:
    """One request's new patterns, waiting in its client's queue."""

    client: str
    patterns: deque[str]
    budget_left: float
    results: dict[str, str | None] = field(default_factory=dict)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    gave_up: bool = False
    outstanding: int = 0  # patterns without a result yet (queued or compiling)

    def answer(self, pattern: str, verdict: str | None) -> None:
        self.results[pattern] = verdict
        self.outstanding -= 1
        if self.outstanding <= 0:
            self.done.set()


class RegexChecker:
    """The verdicts for one request's patterns, from the cache or the workers, in budget,
    fairly across clients (see the module docstring)."""

    def __init__(
        self,
        worker: RegexWorker | None = None,
        cache: VerdictCache | None = None,
        *,
        workers: int | None = None,
        max_new: int = MAX_NEW_PATTERNS,
        max_new_bytes: int = MAX_NEW_PATTERN_BYTES,
        budget_seconds: float = COMPILE_BUDGET_SECONDS,
        wait_seconds: float = WAIT_SECONDS,
    ):
        count = workers if workers is not None else (1 if worker is not None else default_workers())
        self.workers = [worker] if worker is not None else []
        self.workers += [RegexWorker() for _ in range(max(1, count) - len(self.workers))]
        self.cache = cache or VerdictCache()
        self.max_new = max_new
        self.max_new_bytes = max_new_bytes
        self.budget_seconds = budget_seconds
        self.wait_seconds = wait_seconds
        self.busy_answers = 0  # requests answered BUSY (for the benchmark and metrics)
        self._queues: OrderedDict[str, deque[_Request]] = OrderedDict()
        self._compiling_for: set[str] = set()  # clients with a pattern in a worker now
        # pattern -> (judged, verdict) once compiled for some request; others asking wait on it.
        self._inflight: dict[str, asyncio.Future[tuple[bool, str | None]]] = {}
        self._changed: asyncio.Event | None = None
        self._loops: list[asyncio.Task[None]] = []

    @property
    def worker(self) -> RegexWorker:
        """The first worker (the only one with ``workers=1``)."""
        return self.workers[0]

    def _too_costly(self) -> str:
        return (
            f"not checked: compiling this request's own patterns took longer than {self.budget_seconds:g} s "
            "(a per-request limit of this webhook; patterns this costly to compile are better split over "
            "several requests)"
        )

    async def start(self) -> None:
        """Start the worker processes and their loops (the server does at start-up)."""
        await asyncio.gather(*(w.start() for w in self.workers))
        self._ensure_loops()

    def _ensure_loops(self) -> None:
        if self._changed is None:
            self._changed = asyncio.Event()
        if not self._loops:
            loop = asyncio.get_running_loop()
            self._loops = [loop.create_task(self._serve(w)) for w in self.workers]

    async def _next(self) -> _Request:
        """The next request to take a pattern from: clients in turn, one pattern in a worker
        per client at a time."""
        assert self._changed is not None
        while True:
            for client in list(self._queues):
                queue = self._queues[client]
                while queue and (queue[0].gave_up or not queue[0].patterns):
                    queue.popleft()  # nothing left to hand out (its last may still compile)
                if not queue:
                    del self._queues[client]
                    continue
                if client in self._compiling_for:
                    continue
                self._queues.move_to_end(client)
                return queue[0]
            self._changed.clear()
            await self._changed.wait()

    async def _serve(self, worker: RegexWorker) -> None:
        assert self._changed is not None
        while True:
            # A worker restarting (after a timeout or recycling) takes no pattern until it is up,
            # so no request's budget is spent waiting for a process to start.
            await worker.start()
            req = await self._next()
            pattern = req.patterns.popleft()
            if req.budget_left <= 0:
                req.answer(pattern, self._too_costly())
                self._resolve(pattern, None, ok=False)
                continue
            self._compiling_for.add(req.client)
            try:
                t0 = time.monotonic()
                out = await worker.judge([pattern], req.budget_left)
            except Exception:  # never let a worker's loop die: the pattern is retried later
                log.exception("regex worker failed")
                out, worker.last_failure = [], "crash"
            finally:
                req.budget_left -= time.monotonic() - t0
                self._compiling_for.discard(req.client)
                self._changed.set()
            if out:
                self.cache.put(pattern, out[0])
                req.answer(pattern, out[0])
                self._resolve(pattern, out[0], ok=True)
                continue
            # Not cached: the pattern may be fine. Over the time budget, this request's
            # remaining patterns are refused the same way, not compiled; a worker that could
            # not run makes the request retry (BUSY); one that grew too large refuses only
            # the pattern it was compiling.
            if worker.last_failure == "memory":
                verdict = (
                    f"not checked: compiling this pattern needed more than {worker.kill_rss >> 20} MiB "
                    "(a per-pattern limit of this webhook)"
                )
                rest_verdict = None
            else:
                verdict = BUSY if worker.last_failure == "crash" else self._too_costly()
                rest_verdict = verdict
            req.answer(pattern, verdict)
            self._resolve(pattern, None, ok=False)
            while rest_verdict is not None and req.patterns:
                rest = req.patterns.popleft()
                req.answer(rest, rest_verdict)
                self._resolve(rest, None, ok=False)

    def _resolve(self, pattern: str, verdict: str | None, *, ok: bool) -> None:
        fut = self._inflight.pop(pattern, None)
        if fut is not None and not fut.done():
            fut.set_result((ok, verdict))  # not judged: others asking get BUSY and retry

    async def verdicts(self, patterns: Iterable[str], client: str = "") -> dict[str, str | None]:
        """pattern -> Go's error, a budget refusal, ``BUSY``, or None (valid), for every
        pattern. ``client`` is whose turn this is (the requesting user)."""
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
        if not admitted:
            return out
        self._ensure_loops()
        assert self._changed is not None
        loop = asyncio.get_running_loop()
        shared: dict[str, asyncio.Future[tuple[bool, str | None]]] = {}
        own: list[str] = []
        for p in admitted:
            if p in self._inflight:
                shared[p] = self._inflight[p]  # another request compiles it: wait for that
            else:
                self._inflight[p] = loop.create_future()
                own.append(p)
        req = _Request(client, deque(own), self.budget_seconds, outstanding=len(own))
        if own:
            self._queues.setdefault(client, deque()).append(req)
            self._changed.set()
        deadline = loop.time() + self.wait_seconds
        busy = False
        if own:
            try:
                async with asyncio.timeout_at(deadline):
                    await req.done.wait()
            except TimeoutError:
                req.gave_up, busy = True, True
                while req.patterns:  # never started: let others asking for them retry too
                    self._resolve(req.patterns.popleft(), None, ok=False)
                self._changed.set()
        for p in own:
            out[p] = req.results.get(p, BUSY)
        for p, fut in shared.items():
            try:
                async with asyncio.timeout_at(deadline):
                    judged, verdict = await asyncio.shield(fut)
            except TimeoutError:
                judged, verdict = False, None
            out[p] = verdict if judged else BUSY
            busy = busy or not judged
        if busy or BUSY in out.values():
            self.busy_answers += 1
        return out

    async def close(self) -> None:
        """Stop the loops and the worker processes."""
        for task in self._loops:
            task.cancel()
        for task in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._loops = []
        for w in self.workers:
            await w.stop()
