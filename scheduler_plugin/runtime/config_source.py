"""Where the scheduler's ``volcano-scheduler.conf`` comes from, and reloading it.

Two sources, as ``--scheduler-conf`` names them:

* a **file** (the Deployment mounts the ConfigMap at
  ``/etc/hyperplace/scheduler/volcano-scheduler.conf``; the kubelet swaps the file in place
  when the ConfigMap changes), re-read when its content changes, or
* a **ConfigMap** ``namespace/name`` (or ``configmap:namespace/name``), watched through an
  informer: no kubelet sync delay.

A configuration that does not load never replaces a good one, and a file is taken
only once two reads agree (never half-written): the last good configuration stays in force and the error (file, field, line) is logged and kept in
:attr:`ConfigHolder.error` for the caller to report as an Event. Before any good load
the built-in :data:`~scheduler_plugin.config.scheduler_conf.DEFAULT_CONFIG` applies, as in Volcano.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass

from scheduler_plugin.config.scheduler_conf import (
    CONFIGMAP_KEYS,
    DEFAULT_CONFIG,
    ConfigError,
    SchedulerConfig,
    load_scheduler_config,
)

log = logging.getLogger(__name__)

_CM_REF = re.compile(r"^(?:configmap:)?([a-z0-9]([-a-z0-9]*[a-z0-9])?)/([a-z0-9]([-.a-z0-9]*[a-z0-9])?)$")


@dataclass(frozen=True)
class ConfigSource:
    """A file path, or a ConfigMap (namespace, name); neither means the built-in default."""

    path: str | None = None
    configmap: tuple[str, str] | None = None

    @classmethod
    def parse(cls, ref: str | None) -> ConfigSource:
        """``""``/None: default; an existing file or a path with ``/`` at the start or
        ``.`` in the first part: file; ``ns/name`` or ``configmap:ns/name``: ConfigMap."""
        if not ref:
            return cls()
        if ref.startswith("configmap:"):
            m = _CM_REF.match(ref)
            if m is None:
                raise ValueError(f"--scheduler-conf {ref!r}: expected configmap:<namespace>/<name>")
            return cls(configmap=(m.group(1), m.group(3)))
        if os.path.exists(ref) or ref.startswith(("/", ".", "~")):
            return cls(path=os.path.expanduser(ref))
        m = _CM_REF.match(ref)
        if m is not None:
            return cls(configmap=(m.group(1), m.group(3)))
        return cls(path=ref)

    def describe(self) -> str:
        """Human form for logs."""
        if self.configmap:
            return f"ConfigMap {self.configmap[0]}/{self.configmap[1]}"
        return f"file {self.path}" if self.path else "built-in default"


class ConfigHolder:
    """The configuration in force, replaced only by one that loads."""

    def __init__(self, source: ConfigSource) -> None:
        self.source = source
        self.config: SchedulerConfig = DEFAULT_CONFIG
        self.text: str | None = None  # the text of ``config`` (None: built-in)
        self.error: str | None = None  # the last load error, cleared by a good load
        self.generation = 0  # bumped on every change of ``config``
        self._last_seen: str | None = None  # last text tried, good or bad
        self._settling: str | None = None  # a changed file read once, not yet taken

    def offer(self, text: str | None, origin: str) -> bool:
        """Try ``text`` (None: the source is absent). True when the configuration changed.

        Bad text keeps the current configuration and sets :attr:`error`; the same text is
        not parsed (or reported) twice.
        """
        if text is None or text == self._last_seen:
            return False
        self._last_seen = text
        try:
            config = load_scheduler_config(text, source=origin)
        except ConfigError as exc:
            self.error = str(exc)
            log.error("scheduler configuration from %s not loaded, keeping the previous one: %s", origin, exc)
            return False
        self.error = None
        for w in config.warnings:
            log.warning("scheduler configuration %s: %s", origin, w)
        if text == self.text:
            return False
        self.config, self.text = config, text
        self.generation += 1
        log.info("scheduler configuration loaded from %s: actions %s", origin, ", ".join(config.actions))
        return True

    def offer_configmap(self, cm: dict[str, object] | None) -> bool:
        """Take the conf text out of a ConfigMap object (None: deleted, keep the current one)."""
        if cm is None:
            return False
        data = cm.get("data") or {}
        origin = self.source.describe()
        if not isinstance(data, dict):
            return self._bad(origin, "data: not a map")
        for key in CONFIGMAP_KEYS:
            value = data.get(key)
            if isinstance(value, str):
                return self.offer(value, f"{origin} data.{key}")
        return self._bad(origin, f"data: no {' or '.join(CONFIGMAP_KEYS)} key")

    def _bad(self, origin: str, problem: str) -> bool:
        text = f"{origin}: {problem}"
        if text != self._last_seen:
            self._last_seen = text
            self.error = text
            log.error("scheduler configuration not loaded, keeping the previous one: %s", text)
        return False

    def poll_file(self) -> bool:
        """Re-read the file source; True when the configuration changed.

        A changed file is taken once two polls in a row read the same text: an editor that
        rewrites the file in place can be caught half-way, and half a configuration may
        well parse (the kubelet's atomic symlink swap never shows one). The first read at
        start-up is taken at once.
        """
        if self.source.path is None:
            return False
        try:
            with open(self.source.path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            return self._bad(f"file {self.source.path}", exc.strerror or str(exc))
        if self._last_seen is not None and text != self._last_seen and text != self._settling:
            self._settling = text  # seen once; taken if the next poll reads it again
            return False
        self._settling = None
        return self.offer(text, self.source.path)
