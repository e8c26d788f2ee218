"""HyperNodes from an NVIDIA UFM fabric, as Volcano's ``ufm`` discoverer builds them.

Configuration (Volcano's ``volcano-controller.conf``, read by
:func:`controller.hypernode.discovery.parse_discovery_config`)::

    networkTopologyDiscovery:
      - source: ufm
        enabled: true
        interval: 10m                    # Go duration; missing or <= 0: 1h
        credentials:
          secretRef: {name: ufm-credentials, namespace: volcano-system}   # keys username, password
        config:
          endpoint: https://ufm.example.com     # "https://" is added when no scheme is given
          insecureSkipVerify: false             # opt-in; logs a warning
          # caFile: /etc/ufm/ca.crt            # ours: trust this CA instead of the system's

The endpoint may also be ``file:///path/ports.json``: a saved answer of the ports API, read
instead of fetched (no credentials needed). That is how ``hyperplace simulate`` and ``tree``
preview what discovery will create.

Rules (``pkg/controllers/hypernode/discovery/ufm/ufm.go``):

* ``GET <endpoint>/ufmRest/resources/ports`` with basic auth and a 30 s timeout; the answer
  is a JSON list of ports, at most 100 MB.
* Only ports whose ``description`` contains ``Computer`` (host ports) are used: the port's
  ``peer_node_name`` is the leaf switch, its ``system_name`` the node.
* Leaves are sorted by name; leaves that share a node (a multi-rail host cabled to several
  leaves) are merged into one group, as connected components found breadth-first.
* Group k (in the order of its first leaf) becomes HyperNode ``leaf-hn-<k>``, tier 1, whose
  members are its nodes (Node, exactMatch, sorted by name). One ``spine-hn``, tier 2, has
  every leaf group as a member. All carry ``volcano.sh/network-topology-source: ufm``.

Where we are stricter than Volcano: an answer is used only when it is complete. A non-200
status, a connection or TLS failure, a timeout, a body over the limit, a body that is not a
JSON list of port objects, or one with no host port at all is an error
(:class:`UfmError`), and the caller keeps the HyperNodes it has (Volcano would delete every
UFM HyperNode on an empty answer). HyperNodes are deleted only when a complete answer no
longer lists their switches.
"""

from __future__ import annotations

import base64
import json
import ssl
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import aiohttp

from hyperplace.api import ExactMatch, HyperNode, HyperNodeSpec, MemberSelector, MemberSpec, ObjectMeta
from hyperplace.api.constants import NETWORK_TOPOLOGY_SOURCE_LABEL

UFM_SOURCE = "ufm"
PORTS_PATH = "/ufmRest/resources/ports"
MAX_BODY_BYTES = 100 << 20
TIMEOUT_SECONDS = 30.0
HOST_PORT_MARKER = "Computer"
SPINE_NAME = "spine-hn"
LEAF_PREFIX = "leaf-hn-"


class UfmError(RuntimeError):
    """No usable answer from UFM (the previous HyperNodes must be kept)."""


@dataclass(frozen=True)
class UfmPort:
    """The fields of one UFM port that discovery reads."""

    description: str
    system_name: str
    peer_node_name: str
    tier: int | None = None


@dataclass(frozen=True)
class UfmSettings:
    """The ``config`` of a ``ufm`` discovery source."""

    endpoint: str
    insecure_skip_verify: bool = False
    ca_file: str | None = None

    @property
    def url(self) -> str:
        """The ports URL (``https://`` added when no scheme is given), or the ``file://`` URL."""
        ep = self.endpoint.strip()
        if ep.startswith("file://"):
            return ep
        if not ep.startswith(("http://", "https://")):
            ep = "https://" + ep
        return ep.rstrip("/") + PORTS_PATH

    @property
    def is_file(self) -> bool:
        return self.endpoint.strip().startswith("file://")


def ufm_settings(config: Mapping[str, Any]) -> UfmSettings:
    """Read a source's ``config``; raises UfmError naming the field."""
    endpoint = config.get("endpoint")
    if not isinstance(endpoint, str) or not endpoint.strip():
        raise UfmError("config.endpoint: UFM endpoint is not configured")
    skip = config.get("insecureSkipVerify", False)
    if not isinstance(skip, bool):
        raise UfmError(f"config.insecureSkipVerify: must be true or false, got {skip!r}")
    ca = config.get("caFile")
    if ca is not None and not isinstance(ca, str):
        raise UfmError(f"config.caFile: must be a path, got {ca!r}")
    return UfmSettings(endpoint=endpoint, insecure_skip_verify=skip, ca_file=ca)


def credentials_from_secret(secret: Mapping[str, Any] | None, ref: str) -> tuple[str, str]:
    """``(username, password)`` from a Secret's ``data`` (base64) or ``stringData``."""
    if secret is None:
        raise UfmError(f"credentials secret {ref} not found")
    data = secret.get("data") or {}
    plain = secret.get("stringData") or {}
    out: list[str] = []
    for key in ("username", "password"):
        if key in data:
            try:
                out.append(base64.b64decode(str(data[key])).decode())
            except ValueError:
                raise UfmError(f"secret {ref}: data.{key} is not valid base64") from None
        elif key in plain:
            out.append(str(plain[key]))
        else:
            raise UfmError(f"{key} not found in secret {ref}")
    if not out[0] or not out[1]:
        raise UfmError(f"secret {ref}: UFM authentication credentials are empty")
    return out[0], out[1]


def parse_ports(body: bytes | str | Any) -> list[UfmPort]:
    """The ports of an answer (raw JSON or already decoded); raises UfmError when the answer
    is not a JSON list of port objects or names no host port."""
    doc = body
    if isinstance(body, bytes | str):
        try:
            doc = json.loads(body)
        except ValueError as exc:
            raise UfmError(f"failed to decode response (truncated or not JSON): {exc}") from None
    if not isinstance(doc, list):
        raise UfmError(f"failed to decode response: expected a JSON list of ports, got {type(doc).__name__}")
    ports: list[UfmPort] = []
    for i, item in enumerate(doc):
        if not isinstance(item, Mapping):
            raise UfmError(f"failed to decode response: port [{i}] is not an object")
        tier = item.get("tier")
        ports.append(
            UfmPort(
                description=str(item.get("description") or ""),
                system_name=str(item.get("system_name") or ""),
                peer_node_name=str(item.get("peer_node_name") or ""),
                tier=tier if isinstance(tier, int) and not isinstance(tier, bool) else None,
            )
        )
    hosts = [p for p in ports if HOST_PORT_MARKER in p.description and p.system_name and p.peer_node_name]
    if not hosts:
        raise UfmError(
            f"the answer lists {len(ports)} port(s) but no host port (description containing "
            f"{HOST_PORT_MARKER!r}, with system_name and peer_node_name); refusing to treat it as an "
            "empty fabric"
        )
    return ports


def leaf_groups(ports: Iterable[UfmPort]) -> list[tuple[list[str], list[str]]]:
    """``[(leaves, nodes)]``: leaves sharing a node grouped together (connected components,
    breadth-first from the leaves in name order), nodes sorted. Host ports without a leaf or
    node name are skipped."""
    leaf_nodes: dict[str, set[str]] = {}
    for p in ports:
        if HOST_PORT_MARKER not in p.description or not p.peer_node_name or not p.system_name:
            continue
        leaf_nodes.setdefault(p.peer_node_name, set()).add(p.system_name)
    node_leaves: dict[str, set[str]] = {}
    for leaf, members in leaf_nodes.items():
        for n in members:
            node_leaves.setdefault(n, set()).add(leaf)
    done: set[str] = set()
    groups: list[tuple[list[str], list[str]]] = []
    for first in sorted(leaf_nodes):
        if first in done:
            continue
        leaves: list[str] = []
        nodes: set[str] = set()
        queue = deque([first])
        while queue:
            leaf = queue.popleft()
            if leaf in done:
                continue
            done.add(leaf)
            leaves.append(leaf)
            nodes |= leaf_nodes[leaf]
            for n in sorted(leaf_nodes[leaf]):
                queue.extend(sorted(node_leaves[n] - done))
        groups.append((sorted(leaves), sorted(nodes)))
    return groups


def _member(kind: str, name: str) -> MemberSpec:
    return MemberSpec(type=kind, selector=MemberSelector(exact_match=ExactMatch(name=name)))


def build_hypernodes(ports: Iterable[UfmPort]) -> list[HyperNode]:
    """``leaf-hn-<k>`` (tier 1) per leaf group and one ``spine-hn`` (tier 2) above them."""
    labels = {NETWORK_TOPOLOGY_SOURCE_LABEL: UFM_SOURCE}
    out: list[HyperNode] = []
    leaf_names: list[str] = []
    for k, (_leaves, nodes) in enumerate(leaf_groups(ports)):
        name = f"{LEAF_PREFIX}{k}"
        leaf_names.append(name)
        out.append(
            HyperNode(
                metadata=ObjectMeta(name=name, labels=dict(labels)),
                spec=HyperNodeSpec(tier=1, members=[_member("Node", n) for n in nodes]),
            )
        )
    if leaf_names:
        out.append(
            HyperNode(
                metadata=ObjectMeta(name=SPINE_NAME, labels=dict(labels)),
                # Go's sort.Strings: byte order, so leaf-hn-10 comes before leaf-hn-2.
                spec=HyperNodeSpec(tier=2, members=[_member("HyperNode", n) for n in sorted(leaf_names)]),
            )
        )
    return out


def read_file_answer(url: str) -> bytes:
    """The saved answer a ``file://`` endpoint points at; raises UfmError."""
    parsed = urlparse(url)
    path = Path(unquote(parsed.netloc + parsed.path))
    try:
        size = path.stat().st_size
        if size > MAX_BODY_BYTES:
            raise UfmError(f"{path}: {size} bytes, over the {MAX_BODY_BYTES} byte limit")
        return path.read_bytes()
    except OSError as exc:
        raise UfmError(f"cannot read saved UFM answer {path}: {exc.strerror or exc}") from None


def ssl_context(settings: UfmSettings) -> ssl.SSLContext | bool:
    """TLS for the fetch: the system trust (or ``caFile``), or none with insecureSkipVerify."""
    if settings.insecure_skip_verify:
        return False
    ctx = (
        ssl.create_default_context(cafile=settings.ca_file)
        if settings.ca_file
        else ssl.create_default_context()
    )
    return ctx


def _basic_auth(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


async def fetch_ports(settings: UfmSettings, username: str | None, password: str | None) -> list[UfmPort]:
    """One complete, parsed answer of the ports API; raises UfmError otherwise."""
    if settings.is_file:
        return parse_ports(read_file_answer(settings.url))
    if not username or not password:
        raise UfmError("UFM authentication credentials are not configured")
    try:
        timeout = aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(
                settings.url,
                ssl=ssl_context(settings),
                headers={"Accept": "application/json", "Authorization": _basic_auth(username, password)},
            ) as resp,
        ):
            if resp.status != 200:
                raise UfmError(f"unexpected status code: {resp.status} {resp.reason or ''}".rstrip())
            declared = resp.content_length
            if declared is not None and declared > MAX_BODY_BYTES:
                raise UfmError(f"answer of {declared} bytes is over the {MAX_BODY_BYTES} byte limit")
            chunks: list[bytes] = []
            size = 0
            async for chunk in resp.content.iter_chunked(1 << 16):
                size += len(chunk)
                if size > MAX_BODY_BYTES:
                    raise UfmError(f"answer is over the {MAX_BODY_BYTES} byte limit")
                chunks.append(chunk)
            body = b"".join(chunks)
    except UfmError:
        raise
    except (aiohttp.ClientError, TimeoutError, OSError, ssl.SSLError) as exc:
        raise UfmError(f"failed to send request to {settings.url}: {type(exc).__name__}: {exc}") from None
    return parse_ports(body)
