"""Base model configuration and the metav1 types our CRDs embed."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# Quantities arrive as YAML ints, floats or strings ("4", 4, "500m", "8Gi").
Quantity = int | float | str


class KubeModel(BaseModel):
    """Base of every API model: camelCase on the wire, unknown fields kept.

    ``extra="allow"`` means a read-modify-write through a model never drops a field
    a newer API version (or a user) added.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        validate_assignment=False,
    )

    def to_dict(self) -> dict[str, Any]:
        """The wire form: camelCase keys, no nulls, JSON-compatible values."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class OwnerReference(KubeModel):
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(KubeModel):
    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[str] | None = None


class LabelSelectorRequirement(KubeModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] | None = None


class LabelSelector(KubeModel):
    """metav1.LabelSelector. An empty selector matches everything where Kubernetes
    says so; HyperNode labelMatch treats an empty selector as matching nothing."""

    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class Condition(KubeModel):
    """metav1.Condition."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None
    observed_generation: int | None = None


class TypedObject(KubeModel):
    """Common envelope of a top-level API object."""

    api_version: str
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @property
    def name(self) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self) -> str | None:
        return self.metadata.namespace

    @property
    def key(self) -> str:
        """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones."""
        ns = self.metadata.namespace
        return f"{ns}/{self.name}" if ns else self.name
