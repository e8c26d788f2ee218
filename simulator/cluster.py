"""The simulated control plane's shared state: what admission, every controller adapter and
the scheduler session read and write.

One :class:`Cluster` per simulation holds the API server's objects (the store, with
admission in front of it), the simulated clock, the warnings, the random source and the
HyperNode member index; and it is the API server's write path: objects applied from the
input (:meth:`Cluster.apply_inputs`) and objects a controller creates
(:meth:`Cluster.create`), normalized, stamped and admitted as an API server would.
"""

from __future__ import annotations

import random
from typing import Any, Protocol, TypeVar

from pydantic import ValidationError

from hyperplace.api import TypedObject, format_validation_error
from hyperplace.kube.members import MemberIndex
from hyperplace.runtime.api import clone, object_key

from .admission import Admission
from .clock import SimClock
from .loader import Inputs, normalize
from .store import Key, ObjectStore, key_of

M = TypeVar("M", bound=TypedObject)


class Progress(Protocol):
    """Where the engine reports progress (the CLI draws it with rich)."""

    def start(self, description: str, total: int | None) -> None: ...

    def advance(self, n: int = 1) -> None: ...


class NoProgress:
    """Progress reported to no one."""

    def start(self, description: str, total: int | None) -> None:
        return None

    def advance(self, n: int = 1) -> None:
        return None


class Cluster:
    """The state of one simulation, shared by its parts (see the module docstring)."""

    def __init__(
        self,
        inputs: Inputs,
        *,
        seed: int = 0,
        progress: Progress | None = None,
        now: str | None = None,
        elapsed: float = 0.0,
    ) -> None:
        """``seed``: of every random choice; ``now`` and ``elapsed``: see :class:`SimClock`."""
        self.inputs = inputs
        self.objects = ObjectStore()
        self.clock = SimClock(now=now, elapsed=elapsed)
        self.warnings: list[str] = list(inputs.warnings)
        self.admission = Admission(self.objects, inputs, self.warn_once)
        self.rng = random.Random(seed)
        self.progress: Progress = progress or NoProgress()
        # HyperNode members, resolved once and then only where nodes or HyperNodes changed;
        # shared by the HyperNode status controller and every scheduler cycle.
        self.members = MemberIndex()
        self.original: dict[Key, dict[str, Any]] = {}  # input objects as given (normalized)
        self.input_order: list[Key] = []  # input objects admitted, in input order
        self.created: dict[Key, None] = {}  # in creation order (a dict: membership in O(1))
        self.evictions: list[str] = []  # "ns/pod" removed or evicted, in order
        # The pods the scheduler evicted, as they were, in order: what a Job's controller sees
        # as PodEvicted (its own deletes are not in it).
        self.evicted_pods: list[dict[str, Any]] = []

    def warn_once(self, text: str) -> None:
        """Add a warning, unless it was given already."""
        if text not in self.warnings:
            self.warnings.append(text)

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        """The stored objects of one kind, in insertion order."""
        return self.objects.of_kind(kind)

    def models(self, model: type[M], kind: str | None = None) -> list[tuple[dict[str, Any], M]]:
        """(wire object, model) of every object of the model's kind (``kind``: the kind key,
        when it is not the model's ``kind``).

        Admitted objects always parse; objects read from a live cluster skipped admission,
        so one that does not parse is left out with a warning instead of stopping the run.
        """
        kind = kind or str(model.model_fields["kind"].default)
        out: list[tuple[dict[str, Any], M]] = []
        for o in self.of_kind(kind):
            try:
                out.append((o, model.model_validate(o)))
            except ValidationError as exc:
                lines = format_validation_error(exc)
                self.warn_once(f"{kind} {object_key(o)} is invalid and ignored: {'; '.join(lines[:3])}")
        return out

    def apply_inputs(self) -> None:
        """Objects arrive: admission in input order, as ``kubectl apply`` of the files would.
        Objects read from a live cluster passed admission there and are stored as they are."""
        objs = self.inputs.objects
        self.progress.start("admission", len(objs))
        for io in objs:
            k = key_of(io.obj)
            # The input as given: read only from here on (the stored object is a copy).
            self.original[k] = io.obj
            self.clock.collect_times(io.obj)
            stored = clone(io.obj) if io.existing else self.admission.admit(io.obj, str(io.source))
            if stored is not None:
                self.objects[k] = stored
                self.input_order.append(k)
            self.progress.advance()

    def create(
        self, obj: dict[str, Any], source: str, *, namespaced: bool = True, admit: bool = True
    ) -> dict[str, Any] | None:
        """An object a controller creates, as the API server takes it: normalized (namespace,
        uid), its creationTimestamp the simulated now unless it has one, through admission
        (``admit=False`` for the kinds no webhook sees), stored. Returns the stored object, or
        None when admission refused it (``source`` names the creator in the refusal)."""
        body = normalize(obj, namespaced=namespaced)
        body["metadata"].setdefault("creationTimestamp", self.clock.now)
        stored = self.admission.admit(body, source) if admit else body
        if stored is None:
            return None
        k = key_of(stored)
        self.objects[k] = stored
        if k not in self.created and k not in self.original:
            self.created[k] = None
        return stored

    def create_pod(self, pod: dict[str, Any], source: str) -> dict[str, Any] | None:
        """A pod a controller creates (:meth:`create`), Pending."""
        stored = self.create(pod, source)
        if stored is not None:
            stored.setdefault("status", {}).setdefault("phase", "Pending")
        return stored
