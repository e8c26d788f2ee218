"""HyperNode (topology.volcano.sh/v1alpha1): one network performance domain."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, JsonValue

from .common import Condition, KubeModel, LabelSelector, TypedObject
from .constants import TOPOLOGY_GROUP, TOPOLOGY_VERSION

# Kubernetes' DNS-1123 subdomain, the pattern the CRD puts on exactMatch.name.
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

SELECTOR_CEL_RULES: list[JsonValue] = [
    {
        "rule": "has(self.exactMatch) || has(self.regexMatch) || has(self.labelMatch)",
        "message": "Either ExactMatch or RegexMatch or LabelMatch must be specified",
    },
    {
        "rule": "(has(self.exactMatch) ? 1 : 0) + (has(self.regexMatch) ? 1 : 0) + "
        "(has(self.labelMatch) ? 1 : 0) <= 1",
        "message": "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified",
    },
]


class ExactMatch(KubeModel):
    name: str = Field(min_length=1, max_length=253, pattern=DNS1123_SUBDOMAIN)


class RegexMatch(KubeModel):
    """A Go RE2 pattern, matched unanchored against node names."""

    pattern: str = Field(min_length=1)


class MemberSelector(KubeModel):
    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": SELECTOR_CEL_RULES})

    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    # Only takes effect for Node members.
    label_match: LabelSelector | None = None

    def kinds(self) -> list[str]:
        """Which selector kinds are set, in wire names."""
        out = []
        if self.exact_match is not None:
            out.append("exactMatch")
        if self.regex_match is not None:
            out.append("regexMatch")
        if self.label_match is not None:
            out.append("labelMatch")
        return out


MemberType = Literal["Node", "HyperNode"]


class MemberSpec(KubeModel):
    type: MemberType
    selector: MemberSelector


class HyperNodeSpec(KubeModel):
    tier: int = Field(ge=0)
    tier_name: str | None = Field(default=None, max_length=253)
    members: list[MemberSpec] = Field(min_length=1)


class HyperNodeStatus(KubeModel):
    conditions: list[Condition] | None = None
    node_count: int | None = Field(default=None, ge=0)


class HyperNode(TypedObject):
    """A tree node of network performance domains; lower tier = closer network."""

    api_version: str = f"{TOPOLOGY_GROUP}/{TOPOLOGY_VERSION}"
    kind: str = "HyperNode"
    spec: HyperNodeSpec
    status: HyperNodeStatus | None = None
