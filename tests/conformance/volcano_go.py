"""Volcano's table-driven scheduler tests, read from Go source into conformance cases.

A Volcano test function builds a list of ``uthelper.TestCommonStruct`` (or a struct embedding
one), a ``[]conf.Tier`` and a list of actions, then runs, for each entry, one session with
those tiers and actions and checks binds, evictions, pipelined tasks and PodGroup phases
(``uthelper.CheckAll``). :func:`convert_file` evaluates those Go values (the builders of
``pkg/scheduler/util/test_utils.go`` and ``pkg/scheduler/api/test_utils.go`` are modelled
here, each by what it writes) into one plain case per entry: the cluster objects in wire form,
a ``volcano-scheduler.conf`` and the expectations. An entry that uses something not modelled
is returned as not convertible, with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .golit import (
    Binary,
    Block,
    Call,
    Composite,
    Func,
    GoSyntaxError,
    Ident,
    Index,
    Lit,
    Parser,
    Selector,
    Statement,
    Tok,
    Tuple,
    TypeExpr,
    Unary,
    param_names,
    parse_functions,
)


class Unconvertible(Exception):
    """A value the converter does not model; the message is the reason given for the case."""


@dataclass(frozen=True)
class Action:
    name: str


@dataclass
class GoStruct:
    """A struct literal of a type with no builder here: its fields by Go name."""

    type: str
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class Closure:
    """A func literal of the test, with the variables it sees."""

    params: tuple[str, ...]
    body: list[Statement]
    env: dict[str, Any]


@dataclass(frozen=True)
class Opaque:
    """A name the converter could not resolve; an error only where a case uses it."""

    name: str


# Constants of Kubernetes and of volcano.sh/apis (not in the Volcano repository), by their
# last two name parts.
CONSTANTS: Mapping[str, Any] = {
    "v1.PodRunning": "Running",
    "v1.PodPending": "Pending",
    "v1.PodSucceeded": "Succeeded",
    "v1.PodFailed": "Failed",
    "v1.PodUnknown": "Unknown",
    "v1.PreemptNever": "Never",
    "v1.PreemptLowerPriority": "PreemptLowerPriority",
    "v1.ResourceCPU": "cpu",
    "v1.ResourceMemory": "memory",
    "v1.ResourcePods": "pods",
    "v1.ResourceEphemeralStorage": "ephemeral-storage",
    "v1.ResourceName": "ResourceName",
    "v1.NodeSelectorOpIn": "In",
    "v1.NodeSelectorOpNotIn": "NotIn",
    "v1.NodeSelectorOpExists": "Exists",
    "v1.NodeSelectorOpDoesNotExist": "DoesNotExist",
    "metav1.LabelSelectorOpIn": "In",
    "metav1.LabelSelectorOpNotIn": "NotIn",
    "metav1.LabelSelectorOpExists": "Exists",
    "v1.TaintEffectNoSchedule": "NoSchedule",
    "v1.TaintEffectNoExecute": "NoExecute",
    "v1.TaintEffectPreferNoSchedule": "PreferNoSchedule",
    "v1.ScheduleAnyway": "ScheduleAnyway",
    "v1.DoNotSchedule": "DoNotSchedule",
    "v1.TolerationOpEqual": "Equal",
    "v1.TolerationOpExists": "Exists",
    "corev1.PodRunning": "Running",
    "corev1.PodPending": "Pending",
    "corev1.ResourceCPU": "cpu",
    "corev1.ResourceMemory": "memory",
    "corev1.ResourcePods": "pods",
    "PodGroupInqueue": "Inqueue",
    "PodGroupPending": "Pending",
    "PodGroupRunning": "Running",
    "PodGroupUnknown": "Unknown",
    "PodGroupCompleted": "Completed",
    "PodPreemptable": "volcano.sh/preemptable",
    "KubeGroupNameAnnotationKey": "scheduling.k8s.io/group-name",
    "QueueStateOpen": "Open",
    "QueueStateClosed": "Closed",
    "QueueStateClosing": "Closing",
    "QueueStateUnknown": "Unknown",
    "MemberTypeNode": "Node",
    "MemberTypeHyperNode": "HyperNode",
    "JobAllocatedHyperNode": "volcano.sh/allocated-hypernode",
    "PodGroupReady": "Ready",
    "ClusterTopHyperNode": "<cluster-top-hypernode>",
    # framework.Status codes (iota in Go), by name.
    "api.Success": "Success",
    "api.Error": "Error",
    "api.Unschedulable": "Unschedulable",
    "api.UnschedulableAndUnresolvable": "UnschedulableAndUnresolvable",
    "HardNetworkTopologyMode": "hard",
    "SoftNetworkTopologyMode": "soft",
    "true": True,
    "false": False,
    "nil": None,
}

# Plugin package -> the plugin's name (``<pkg>.PluginName``).
PLUGIN_PACKAGES = {
    "networktopologyaware": "network-topology-aware",
    "resourcestrategyfit": "resource-strategy-fit",
    "tasktopology": "task-topology",
}

# conf.PluginOption's Go fields -> the yaml keys of volcano-scheduler.conf.
PLUGIN_OPTION_KEYS = {
    "EnabledJobOrder": "enableJobOrder",
    "EnabledNamespaceOrder": "enableNamespaceOrder",
    "EnabledHierarchy": "enableHierarchy",
    "EnabledJobReady": "enableJobReady",
    "EnabledJobPipelined": "enableJobPipelined",
    "EnabledTaskOrder": "enableTaskOrder",
    "EnabledPreemptable": "enablePreemptable",
    "EnabledReclaimable": "enableReclaimable",
    "EnablePreemptive": "enablePreemptive",
    "EnabledQueueOrder": "enableQueueOrder",
    "EnabledClusterOrder": "enabledClusterOrder",
    "EnabledPredicate": "enablePredicate",
    "EnabledBestNode": "enableBestNode",
    "EnabledNodeOrder": "enableNodeOrder",
    "EnabledTargetJob": "enableTargetJob",
    "EnabledReservedNodes": "enableReservedNodes",
    "EnabledJobEnqueued": "enableJobEnqueued",
    "EnabledVictim": "enabledVictim",
    "EnabledJobStarving": "enableJobStarving",
    "EnabledOverused": "enabledOverused",
    "EnabledAllocatable": "enabledAllocatable",
    "EnabledHyperNodeOrder": "enabledHyperNodeOrder",
    "EnabledSubJobReady": "enabledSubJobReady",
    "EnabledSubJobPipelined": "enabledSubJobPipelined",
    "EnabledSubJobOrder": "enabledSubJobOrder",
    "EnabledHyperNodeGradient": "enabledHyperNodeGradient",
}

# TestCommonStruct fields a case may set that this converter turns into data.
CASE_FIELDS = {
    "Name", "Plugins", "Pods", "Nodes", "PodGroups", "Queues", "PriClass", "HyperNodesSetByTier",
    "HyperNodes", "HyperNodesMap", "ExpectBindMap", "ExpectPipeLined", "ExpectEvicted",
    "ExpectStatus", "ExpectBindsNum", "ExpectEvictNum", "MinimalBindCheck", "ResourceQuotas",
    "ExpectBindNumsInHyperNode", "HyperNodesTierNameMap", "IgnoreProvisioners", "RealNodesList",
    "HyperNodesReadyToSchedule", "ExpectTaskStatusNums",
}  # fmt: skip
# Fields whose objects the session cannot be given from a case's data.
UNMODELLED_FIELDS = {
    "PVs": "PersistentVolumes", "PVCs": "PersistentVolumeClaims", "SCs": "StorageClasses",
    "ResourceSlices": "DRA ResourceSlices", "DeviceClasses": "DRA DeviceClasses",
    "ResourceClaims": "DRA ResourceClaims", "ShardingMode": "scheduler sharding",
    "NodesInShard": "scheduler sharding", "ShardName": "scheduler sharding",
}  # fmt: skip


class GoSource:
    """Reads files of one Volcano commit (``read(path) -> text``) and the constants of a package."""

    def __init__(self, read: Callable[[str], str], list_dir: Callable[[str], list[str]]) -> None:
        self.read = read
        self.list_dir = list_dir
        self._consts: dict[str, dict[str, Any]] = {}

    def package_constants(self, pkg_dir: str) -> dict[str, Any]:
        """``Name = "text"`` / ``Name = 3`` / ``Name = true`` declarations of a package's files."""
        if pkg_dir not in self._consts:
            out: dict[str, Any] = {}
            for name in self.list_dir(pkg_dir):
                if not name.endswith(".go"):
                    continue
                text = self.read(f"{pkg_dir}/{name}")
                for m in re.finditer(
                    r'^\s*(\w+)\s*(?:\w+\s*)?=\s*("(?:[^"\\]|\\.)*"|\d+(?:\.\d+)?(?:e-?\d+)?|true|false)\s*$',
                    text,
                    re.M,
                ):
                    raw = m.group(2)
                    out.setdefault(
                        m.group(1),
                        raw[1:-1]
                        if raw.startswith('"')
                        else (raw == "true" if raw in ("true", "false") else _number(raw)),
                    )
            self._consts[pkg_dir] = out
        return self._consts[pkg_dir]


def _number(raw: str) -> int | float:
    return int(raw) if raw.isdigit() else float(raw)


# Go's zero values of the basic types.
_ZERO = {"int": 0, "int32": 0, "int64": 0, "float64": 0.0, "string": "", "bool": False}


def struct_zero_values(src: str) -> dict[str, dict[str, Any]]:
    """Per struct type declared at the top of a Go file, its fields of a basic type with their
    zero values."""
    out: dict[str, dict[str, Any]] = {}
    for m in re.finditer(r"^type\s+(\w+)\s+struct\s*\{(.*?)^\}", src, re.S | re.M):
        fields = {}
        for line in m.group(2).splitlines():
            f = re.match(r"\s*(\w+)\s+(\w+)\s*(?://.*)?$", line)
            if f and f.group(2) in _ZERO:
                fields[f.group(1)] = _ZERO[f.group(2)]
        out[m.group(1)] = fields
    return out


def imports_of(src: str) -> dict[str, str]:
    """alias -> import path of a Go file."""
    out: dict[str, str] = {}
    block = re.search(r"^import\s*\((.*?)^\)", src, re.S | re.M)
    lines = block.group(1).splitlines() if block else re.findall(r"^import\s+(.*)$", src, re.M)
    for line in lines:
        m = re.match(r'\s*(?:(\w+|_|\.)\s+)?"([^"]+)"', line)
        if m:
            path = m.group(2)
            alias = m.group(1) or path.rsplit("/", 1)[-1].replace("-", "")
            out[alias] = path
    return out


VOLCANO_MODULE = "volcano.sh/volcano/"


class Evaluator:
    """Evaluates the Go values of one test file."""

    def __init__(self, source: GoSource, path: str) -> None:
        self.source = source
        self.path = path
        self.pkg_dir = path.rsplit("/", 1)[0]
        src = source.read(path)
        self.imports = imports_of(src)
        self.funcs = {f.name: f for f in parse_functions(src)}
        self.zero_fields = struct_zero_values(src)
        self.depth = 0
        self._file_vars: dict[str, Any] | None = None

    def file_vars(self) -> dict[str, Any]:
        """The file's top-level ``var`` values (those that can be read)."""
        if self._file_vars is None:
            self._file_vars = {}
            for st in self.funcs[""].body if "" in self.funcs else []:
                if st.value is None:
                    continue
                try:
                    self.assign(st, self._file_vars)
                except (Unconvertible, KeyError, TypeError, IndexError):
                    for n in st.names:
                        self._file_vars[n] = Opaque(n)
        return self._file_vars

    # -- names
    def package_of(self, alias: str) -> str | None:
        path = self.imports.get(alias)
        if path and path.startswith(VOLCANO_MODULE):
            return path[len(VOLCANO_MODULE) :]
        return None

    def canonical(self, name: str) -> str:
        """``schedulingapi.BuildResourceList`` -> ``api.BuildResourceList`` (by import path)."""
        if "." not in name:
            return name
        alias, rest = name.split(".", 1)
        path = self.imports.get(alias, alias)
        return path.rstrip("/").rsplit("/", 1)[-1].replace("-", "") + "." + rest

    def resolve(self, name: str, env: Mapping[str, Any]) -> Any:
        head = name.split(".", 1)[0]
        if head in env:
            value = env[head]
            for part in name.split(".")[1:]:
                value = self.field(value, part)
            return value
        if name == "PluginName":
            return self.plugin_name(self.pkg_dir.rsplit("/", 1)[-1])
        if name.endswith(".PluginName"):
            return self.plugin_name(self.canonical(name).split(".")[0])
        canon = self.canonical(name)
        for key in (name, canon, name.rsplit(".", 1)[-1]):
            if key in CONSTANTS:
                return CONSTANTS[key]
        if "." in name:
            pkg = self.package_of(name.split(".", 1)[0])
            consts = self.source.package_constants(pkg) if pkg else {}
        else:
            consts = self.source.package_constants(self.pkg_dir)
        last = name.rsplit(".", 1)[-1]
        if last in consts:
            return consts[last]
        return Opaque(name)

    @staticmethod
    def plugin_name(pkg: str) -> str:
        return PLUGIN_PACKAGES.get(pkg, pkg)

    def field(self, value: Any, name: str) -> Any:
        if isinstance(value, GoStruct):
            if name in value.fields:
                return value.fields[name]
            inner = value.fields.get("TestCommonStruct")
            if isinstance(inner, GoStruct):
                return self.field(inner, name)
            return None
        if isinstance(value, dict):
            for key in (name, _json_name(name)):
                if key in value:
                    return value[key]
            meta = value.get("metadata")  # ObjectMeta's fields are promoted: pg.Name
            if isinstance(meta, dict) and _json_name(name) in meta:
                return meta[_json_name(name)]
        raise Unconvertible(f"field {name} of {type(value).__name__}")

    # -- expressions
    def eval(self, e: Any, env: Mapping[str, Any], hint: TypeExpr | None = None) -> Any:
        if isinstance(e, Lit):
            return e.value
        if isinstance(e, Ident):
            return self.resolve(e.name, env)
        if isinstance(e, Unary):
            v = self.eval(e.operand, env, hint)
            if e.op == "-":
                return -v
            if e.op == "!":
                return not v
            return v  # & and *: Go pointers are the values here
        if isinstance(e, Binary):
            a, b = self.eval(e.left, env), self.eval(e.right, env)
            ops: dict[str, Callable[[Any, Any], Any]] = {
                "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
                "/": lambda x, y: x // y if isinstance(x, int) else x / y, "==": lambda x, y: x == y,
                "!=": lambda x, y: x != y, "&&": lambda x, y: x and y, "||": lambda x, y: x or y,
            }  # fmt: skip
            if e.op not in ops:
                raise Unconvertible(f"operator {e.op}")
            return ops[e.op](a, b)
        if isinstance(e, Composite):
            return self.composite(e, env, hint)
        if isinstance(e, Call):
            return self.call(e, env)
        if isinstance(e, Selector):
            return self.field(self.eval(e.base, env), e.name)
        if isinstance(e, Index):
            base = self.eval(e.base, env)
            return base[self.eval(e.index, env)]
        if isinstance(e, TypeExpr):
            return Opaque(e.text)
        if isinstance(e, Block):
            return closure_of(e, env)
        if isinstance(e, Tuple):
            return tuple(self.eval(x, env) for x in e.items)
        raise Unconvertible(f"expression {type(e).__name__}")

    def composite(self, e: Composite, env: Mapping[str, Any], hint: TypeExpr | None) -> Any:
        ty = e.type or hint
        text = ty.text if ty else ""
        bare = text.lstrip("*")
        if bare.startswith("[]"):
            inner = TypeExpr(bare[2:])
            return [self.eval(v, env, inner) for _, v in e.elements]
        if bare.startswith("map[") or self.canonical(bare) in MAP_TYPES:
            inner = TypeExpr(_map_value_type(bare) or MAP_TYPES.get(self.canonical(bare), ""))
            out: dict[Any, Any] = {}
            for k, v in e.elements:
                out[_hashable(self.eval(k, env))] = self.eval(v, env, inner)
            return out
        fields = dict(ty.fields) if ty and ty.fields else {}
        struct = GoStruct(self.canonical(bare) if bare else "")
        # A field of a basic type the literal leaves out holds Go's zero value (an int argument
        # not set is 0, not absent).
        struct.fields.update(self.zero_fields.get(bare, {}))
        for i, (k, v) in enumerate(e.elements):
            if k is None:
                struct.fields[f"_{i}"] = self.eval(v, env)
            else:
                name = k.name if isinstance(k, Ident) else str(self.eval(k, env))
                field_type = fields.get(name)
                struct.fields[name] = self.eval(v, env, TypeExpr(field_type) if field_type else None)
        if struct.type in ("api.ScalarResource",):
            return (
                struct.fields.get("Name", struct.fields.get("_0")),
                struct.fields.get("Value", struct.fields.get("_1")),
            )
        if struct.type == "api.MemberConfig":
            f = struct.fields
            return {
                "Name": f.get("Name", f.get("_0")),
                "Type": f.get("Type", f.get("_1")),
                "Selector": f.get("Selector", f.get("_2")),
                "LabelSelector": f.get("LabelSelector", f.get("_3")),
            }
        return struct

    def call(self, e: Call, env: Mapping[str, Any]) -> Any:
        func = e.func
        if isinstance(func, Selector):  # a method: x.Name(), wrapper.Weight(1), or a func field
            recv = self.eval(func.base, env)
            args = [self.eval(a, env) for a in e.args]
            if isinstance(recv, GoStruct) and isinstance(recv.fields.get(func.name), Closure):
                return self.run(recv.fields[func.name], args)
            return call_method(recv, func.name, args)
        if isinstance(func, TypeExpr):  # []byte(x)
            return self.eval(e.args[0], env)
        if not isinstance(func, Ident):
            raise Unconvertible("call of an expression")
        name = func.name
        if name in env and isinstance(env[name], Opaque):
            raise Unconvertible(f"call of {name}, which was not read")
        args = [self.eval(a, env) for a in e.args]
        if name in env and isinstance(env[name], Closure):
            return self.run(env[name], args)
        if "." in name and name.split(".", 1)[0] in env:  # x.method(...) or a func field x.build(...)
            base_name, method = name.rsplit(".", 1)
            recv = self.resolve(base_name, env)
            if isinstance(recv, GoStruct) and isinstance(recv.fields.get(method), Closure):
                return self.run(recv.fields[method], args)
            return call_method(recv, method, args)
        if e.ellipsis and args:
            args = [*args[:-1], *args[-1]]
        canon = self.canonical(name)
        if name == "New" or name.endswith(".New"):  # an action package's constructor
            pkg = self.pkg_dir if name == "New" else self.package_of(name.split(".")[0])
            if pkg and "/actions/" in f"/{pkg}/":
                return Action(pkg.rsplit("/", 1)[-1])
        builder = BUILDERS.get(canon)
        if builder is not None:
            return builder(*args)
        if name in CONVERSIONS or canon in CONVERSIONS or canon.rsplit(".", 1)[-1] in CONVERSIONS:
            return args[0] if args else None
        if name in self.funcs:
            return self.local_call(self.funcs[name], args)
        raise Unconvertible(f"uses {name}, which the converter does not model")

    def local_call(self, fn: Func, args: list[Any]) -> Any:
        """Interpret a helper function of the test file."""
        return self.run(Closure(fn.params, fn.body, {}), args)

    def run(self, fn: Closure, args: list[Any]) -> Any:
        """Call a closure: its statements (assignments, ``if``, ``return``) in its own scope."""
        if self.depth > 8:
            raise Unconvertible("calls nested too deep")
        self.depth += 1
        try:
            env: dict[str, Any] = {**fn.env, **dict(zip(fn.params, args, strict=False))}
            done, value = self.exec_block(fn.body, env)
            return value if done else None
        finally:
            self.depth -= 1

    def exec_block(self, body: list[Statement], env: dict[str, Any]) -> tuple[bool, Any]:
        """Run statements; (True, value) once one returns."""
        for st in body:
            if st.value is not None:
                self.assign(st, env)
                continue
            toks = list(st.tokens)
            head = toks[0].text if toks else ""
            if head == "return":
                p = Parser([*toks[1:], Tok(";", ";", 0)])
                values = [] if p.peek().kind == ";" else [p.expr()]
                while p.at(","):
                    p.take()
                    values.append(p.expr())
                got = [self.eval(v, env) for v in values]
                return True, (got[0] if len(got) == 1 else tuple(got))
            if head == "if":
                done, value = self.exec_if(toks, env)
                if done:
                    return True, value
                continue
            if head in ("defer",) or (head == "t" and len(toks) > 1 and toks[1].text == "."):
                continue  # the test's own bookkeeping
            raise Unconvertible(f"statement {head!r} (line {st.line})")
        return False, None

    def exec_if(self, toks: list[Tok], env: dict[str, Any]) -> tuple[bool, Any]:
        """``if cond { ... } [else { ... }]`` (no init statement)."""
        i = 1
        depth = 0
        while i < len(toks) and not (toks[i].text == "{" and depth == 0):
            if toks[i].text in ("(", "["):
                depth += 1
            elif toks[i].text in (")", "]"):
                depth -= 1
            if toks[i].kind == ";" and depth == 0:
                raise Unconvertible("if with an init statement")
            i += 1
        cond = self.eval(Parser([*toks[1:i], Tok(";", ";", 0)]).expr(), env)
        p = Parser([*toks[i:], Tok(";", ";", 0)])
        then = p.balanced("{", "}")
        other: tuple[Tok, ...] = ()
        if p.at("else"):
            p.take()
            if not p.at("{"):
                raise Unconvertible("else if")
            other = p.balanced("{", "}")
        chosen = then if cond else other
        if not chosen:
            return False, None
        stmts = Parser([*chosen[1:-1], Tok(";", ";", 0)]).statements()
        return self.exec_block(stmts, env)

    def assign(self, st: Statement, env: dict[str, Any]) -> None:
        value = self.eval(st.value, env)
        if len(st.names) != 1:
            if not isinstance(value, tuple) or len(value) != len(st.names):
                raise Unconvertible("multiple assignment")
            for n, v in zip(st.names, value, strict=True):
                if n != "_":
                    env[n] = v
            return
        name = st.names[0]
        if st.index is not None:  # m[k] = v, m a variable or a field path
            parts = name.split(".")
            target = env[parts[0]]
            for p in parts[1:]:
                target = _go_field(target, p, create=True)
            if not isinstance(target, dict):
                raise Unconvertible(f"index assignment into {name}")
            target[self.eval(st.index, env)] = to_wire(value)
            return
        if "." not in name:
            env[name] = value
            return
        parts = name.split(".")
        target = env[parts[0]]
        for p in parts[1:-1]:
            target = _go_field(target, p, create=True)
        _set_go_field(target, parts[-1], value)


# Named map types of the tests, with their value type.
MAP_TYPES = {"v1.ResourceList": "resource.Quantity", "framework.Arguments": "interface{}"}


def closure_of(block: Block, env: Mapping[str, Any]) -> Closure:
    """A func literal's parameters and statements (it sees ``env``: Go closures share the
    variables, and the tests only read them)."""
    p = Parser([*block.tokens, Tok(";", ";", 0)])
    p.take("func")
    params = param_names(p.balanced("(", ")")[1:-1])
    while not p.at("{"):
        if p.at("("):
            p.balanced("(", ")")
        else:
            p.take()
    body = p.balanced("{", "}")
    return Closure(params, Parser([*body[1:-1], Tok(";", ";", 0)]).statements(), dict(env))


CONVERSIONS = {"int", "int32", "int64", "float64", "string", "JobID", "TaskID", "ResourceName", "PodGroupPhase",
               "QueueState", "MustParse", "PreemptionPolicy", "NetworkTopologyMode", "TaskStatus", "To",
               "QueueID"}  # fmt: skip


def _hashable(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


def _map_value_type(text: str) -> str:
    depth = 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                return text[i + 1 :]
    return ""


# -- object fields as builders set them --------------------------------------------------


_JSON_NAMES = {"ObjectMeta": "metadata", "UID": "uid", "TypeMeta": None}


def _json_name(go: str) -> str | None:
    if go in _JSON_NAMES:
        return _JSON_NAMES[go]
    return go[:1].lower() + go[1:]


# ObjectMeta's fields, promoted into the objects that embed it (node.Labels is metadata.labels).
_META_FIELDS = frozenset(
    {
        "Name",
        "Namespace",
        "Labels",
        "Annotations",
        "UID",
        "OwnerReferences",
        "Finalizers",
        "CreationTimestamp",
    }
)


def _go_field(obj: Any, name: str, create: bool = False) -> Any:
    if isinstance(obj, GoStruct):
        return obj.fields.setdefault(name, {}) if create else obj.fields.get(name)
    key = _json_name(name)
    if isinstance(obj, dict) and name in _META_FIELDS and isinstance(obj.get("metadata"), dict):
        obj = obj["metadata"]
    if isinstance(obj, dict) and key is not None:
        if create:
            return obj.setdefault(key, {})
        return obj.get(key)
    raise Unconvertible(f"field {name}")


def _set_go_field(obj: Any, name: str, value: Any) -> None:
    if isinstance(obj, GoStruct):
        obj.fields[name] = value
        return
    key = _json_name(name)
    if isinstance(obj, dict) and name in _META_FIELDS and isinstance(obj.get("metadata"), dict):
        obj = obj["metadata"]
    if not isinstance(obj, dict) or key is None:
        raise Unconvertible(f"field {name}")
    obj[key] = to_wire(value)


def to_wire(v: Any) -> Any:
    """A Go value as the JSON the apiserver would hold (struct fields by their json names)."""
    if isinstance(v, GoStruct):
        out: dict[str, Any] = {}
        for k, x in v.fields.items():
            if k.startswith("_"):
                raise Unconvertible(f"positional fields of {v.type}")
            key = _json_name(k)
            if key is None:
                continue
            if k in ("ObjectMeta",):
                out["metadata"] = to_wire(x)
            else:
                out[key] = to_wire(x)
        return out
    if isinstance(v, list):
        return [to_wire(x) for x in v]
    if isinstance(v, dict):
        return {k: to_wire(x) for k, x in v.items()}
    if isinstance(v, Opaque):
        raise Unconvertible(f"uses {v.name}, which the converter could not read")
    return v


class QueueWrapper:
    """util.MakeQueue's builder."""

    def __init__(self, name: str) -> None:
        self.queue = build_queue(name, 1, None)

    def call(self, method: str, args: list[Any]) -> Any:
        spec = self.queue["spec"]
        if method == "Obj":
            return self.queue
        if method == "Weight":
            spec["weight"] = args[0]
        elif method in ("Capability", "Deserved"):
            if args[0] is not None:
                spec[method.lower()] = dict(args[0])
        elif method == "Priority":
            spec["priority"] = args[0]
        elif method == "Parent":
            spec["parent"] = args[0]
        elif method == "Annotations":
            self.queue["metadata"].setdefault("annotations", {}).update(args[0] or {})
        elif method == "State":
            self.queue["status"]["state"] = args[0]
        elif method == "Affinity":
            if args[0] is not None:
                spec["affinity"] = to_wire(args[0])
        else:
            raise Unconvertible(f"QueueWrapper.{method}")
        return self


def call_method(recv: Any, method: str, args: list[Any]) -> Any:
    if isinstance(recv, QueueWrapper):
        return recv.call(method, args)
    if isinstance(recv, Action) and method == "Name":
        return recv.name
    raise Unconvertible(f"method {method} of {type(recv).__name__}")


# -- the builders of Volcano's test_utils.go, each writing what it writes ------------------


def resource_list(cpu: str, memory: str, *scalars: tuple[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    if cpu:
        out["cpu"] = cpu
    if memory:
        out["memory"] = memory
    for name, value in scalars:
        out[name] = value
    return out


def resource_list_gpu(cpu: str, memory: str, gpu: str, *scalars: tuple[str, str]) -> dict[str, str]:
    out = resource_list(cpu, memory, *scalars)
    if gpu:
        out["nvidia.com/gpu"] = gpu
    return out


def build_node(
    name: str, alloc: Mapping[str, str] | None, labels: Mapping[str, str] | None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": dict(labels or {}), "annotations": {}},
        "status": {"capacity": dict(alloc or {}), "allocatable": dict(alloc or {})},
    }


def build_pod(
    ns: str,
    name: str,
    node: str,
    phase: str,
    req: Mapping[str, str] | None,
    group: str,
    labels: Mapping[str, str] | None,
    selector: Mapping[str, str] | None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "", "resources": {"requests": dict(req or {})}}]}
    if node:
        spec["nodeName"] = node
    if selector:
        spec["nodeSelector"] = dict(selector)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "uid": f"{ns}-{name}",
            "name": name,
            "namespace": ns,
            "labels": dict(labels or {}),
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def build_pod_with_priority(*args: Any) -> dict[str, Any]:
    pod = build_pod(*args[:8])
    if args[8] is not None:
        pod["spec"]["priority"] = args[8]
    return pod


def build_pod_with_policy(*args: Any) -> dict[str, Any]:
    pod = build_pod(*args[:8])
    pod["spec"]["preemptionPolicy"] = args[8]
    return pod


def build_pod_with(field_name: str) -> Callable[..., dict[str, Any]]:
    def build(*args: Any) -> dict[str, Any]:
        pod = build_pod(*args[:8])
        value = to_wire(args[8])
        if field_name == "affinity":
            pod["spec"]["affinity"] = value
        else:
            pod["spec"][field_name] = value
        return pod

    return build


def build_best_effort_pod(
    ns: str, name: str, node: str, phase: str, group: str, labels: Any, selector: Any
) -> dict[str, Any]:
    return build_pod(ns, name, node, phase, {}, group, labels, selector)


def build_podgroup(
    name: str, ns: str, queue: str, min_member: int, task_min: Mapping[str, int] | None, phase: str
) -> dict[str, Any]:
    spec: dict[str, Any] = {"queue": queue, "minMember": min_member}
    if task_min:
        spec["minTaskMember"] = dict(task_min)
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
        "status": {"phase": phase} if phase else {},
    }


def build_podgroup_prio(
    name: str, ns: str, queue: str, mm: int, tm: Any, phase: str, prio: str
) -> dict[str, Any]:
    pg = build_podgroup(name, ns, queue, mm, tm, phase)
    if prio:
        pg["spec"]["priorityClassName"] = prio
    return pg


def build_podgroup_anno(
    name: str, ns: str, queue: str, mm: int, tm: Any, phase: str, annos: Any
) -> dict[str, Any]:
    pg = build_podgroup(name, ns, queue, mm, tm, phase)
    pg["metadata"]["annotations"] = dict(annos or {})
    return pg


def build_podgroup_min_resources(
    name: str, ns: str, queue: str, mm: int, tm: Any, res: Any, phase: str
) -> dict[str, Any]:
    pg = build_podgroup(name, ns, queue, mm, tm, phase)
    pg["spec"]["minResources"] = dict(res or {})
    return pg


def _with_topology(pg: dict[str, Any], hn: str, topology: dict[str, Any]) -> dict[str, Any]:
    pg["metadata"]["annotations"] = {"volcano.sh/allocated-hypernode": hn}
    pg["spec"]["networkTopology"] = topology
    return pg


def build_podgroup_topology(
    name: str, ns: str, hn: str, queue: str, mm: int, tm: Any, phase: str, mode: str, highest: int
) -> dict[str, Any]:
    pg = build_podgroup(name, ns, queue, mm, tm, phase)
    return _with_topology(pg, hn, {"mode": mode, "highestTierAllowed": highest})


def build_podgroup_topology_tier_name(
    name: str, ns: str, hn: str, queue: str, mm: int, tm: Any, phase: str, mode: str, tier_name: str
) -> dict[str, Any]:
    pg = build_podgroup(name, ns, queue, mm, tm, phase)
    return _with_topology(pg, hn, {"mode": mode, "highestTierName": tier_name})


def build_subgroup_policy(
    name: str, keys: list[str], mode: str, highest: int, size: int = 1, min_groups: int = 0
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "subGroupSize": size,
        "minSubGroups": min_groups,
        "matchLabelKeys": list(keys or []),
    }
    if mode:
        out["networkTopology"] = {"mode": mode, "highestTierAllowed": highest}
    return out


def build_podgroup_subgroups(
    name: str,
    ns: str,
    hn: str,
    queue: str,
    mm: int,
    tm: Any,
    phase: str,
    mode: str,
    highest: int,
    policy: Any,
) -> dict[str, Any]:
    if mode:
        pg = build_podgroup_topology(name, ns, hn, queue, mm, tm, phase, mode, highest)
    else:
        pg = build_podgroup(name, ns, queue, mm, tm, phase)
    pg["spec"]["subGroupPolicy"] = to_wire(policy)
    return pg


def build_queue(name: str, weight: int, cap: Mapping[str, str] | None, state: str = "Open") -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": weight}
    if cap:
        spec["capability"] = dict(cap)
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
        "status": {"state": state},
    }


def build_queue_annos(name: str, weight: int, cap: Any, annos: Any) -> dict[str, Any]:
    q = build_queue(name, weight, cap)
    q["metadata"]["annotations"] = dict(annos or {})
    return q


def build_queue_quantity(name: str, deserved: Any, cap: Any) -> dict[str, Any]:
    q = build_queue(name, 1, cap)
    if deserved:
        q["spec"]["deserved"] = dict(deserved)
    return q


def build_queue_priority_quantity(name: str, priority: int, deserved: Any, cap: Any) -> dict[str, Any]:
    q = build_queue_quantity(name, deserved, cap)
    q["spec"]["priority"] = priority
    return q


def build_priority_class(name: str, value: int, policy: str | None = None) -> dict[str, Any]:
    pc: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }
    if policy:
        pc["preemptionPolicy"] = policy
    return pc


def build_resource_quota(name: str, ns: str, hard: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"hard": dict(hard or {})},
        "status": {"hard": dict(hard or {})},
    }


def build_hypernode(
    name: str, tier: int, members: list[dict[str, Any]], tier_name: str = ""
) -> dict[str, Any]:
    specs: list[dict[str, Any]] = []
    for m in members or []:
        kind = m["Selector"]
        if kind == "exact":
            selector: dict[str, Any] = {"exactMatch": {"name": m["Name"]}}
        elif kind == "regex":
            selector = {"regexMatch": {"pattern": m["Name"]}}
        elif kind == "label":
            selector = {"labelMatch": to_wire(m["LabelSelector"])}
        else:
            raise Unconvertible(f"HyperNode member selector {kind!r} (BuildHyperNode returns nil)")
        specs.append({"type": m["Type"], "selector": selector})
    spec: dict[str, Any] = {"tier": tier, "members": specs}
    if tier_name:
        spec["tierName"] = tier_name
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": spec,
    }


def _hypernode_info(hn: dict[str, Any], opts: tuple[Any, ...]) -> dict[str, Any]:
    """``api.NewHyperNodeInfo``: the HyperNode, with the parent an option names kept aside
    (``_parent``) for :func:`hypernodes` to hold against the parent's members."""
    out = dict(hn)
    for opt in opts:
        if not (isinstance(opt, tuple) and opt[:1] == ("parent",)):
            raise Unconvertible(f"HyperNodeInfo option {opt!r}")
        out["_parent"] = opt[1]
    return out


def _set_new(*items: Any) -> list[Any]:
    return sorted(set(items), key=str)


BUILDERS: Mapping[str, Callable[..., Any]] = {
    "api.BuildResourceList": resource_list,
    "api.BuildResourceListWithGPU": resource_list_gpu,
    "util.BuildNode": build_node,
    "util.BuildPod": build_pod,
    "util.BuildPodWithPriority": build_pod_with_priority,
    "util.BuildPodWithPreemptionPolicy": build_pod_with_policy,
    "util.BuildPodWithAffinity": build_pod_with("affinity"),
    "util.BuildPodWithTolerations": build_pod_with("tolerations"),
    "util.BuildPodWithTopologySpreadConstraints": build_pod_with("topologySpreadConstraints"),
    "util.BuildBestEffortPod": build_best_effort_pod,
    "util.BuildPodGroup": build_podgroup,
    "util.BuildPodGroupWithPrio": build_podgroup_prio,
    "util.BuildPodGroupWithAnno": build_podgroup_anno,
    "util.BuildPodGroupWithMinResources": build_podgroup_min_resources,
    "util.BuildPodGroupWithNetWorkTopologies": build_podgroup_topology,
    "util.BuildPodGroupUsingNetWorkTopologiesWithTierName": build_podgroup_topology_tier_name,
    "util.BuildPodGroupWithSubGroupPolicy": build_podgroup_subgroups,
    "util.BuildSubGroupPolicy": build_subgroup_policy,
    "util.BuildSubGroupPolicyWithSubGroupSize": build_subgroup_policy,
    "util.BuildSubGroupPolicyWithMinSubGroups": build_subgroup_policy,
    "util.BuildQueue": build_queue,
    "util.BuildQueueWithState": build_queue,
    "util.BuildQueueWithAnnos": build_queue_annos,
    "util.BuildQueueWithResourcesQuantity": build_queue_quantity,
    "util.BuildQueueWithPriorityAndResourcesQuantity": build_queue_priority_quantity,
    "util.MakeQueue": QueueWrapper,
    "util.BuildPriorityClass": build_priority_class,
    "util.BuildPriorityClassWithPreemptionPolicy": build_priority_class,
    "util.BuildResourceQuota": build_resource_quota,
    "api.BuildHyperNode": build_hypernode,
    "api.BuildHyperNodeWithTierName": lambda n, t, tn, m: build_hypernode(n, t, m, tn),
    "api.NewHyperNodeInfo": lambda hn, *opts: _hypernode_info(hn, opts),
    "api.ParentOpt": lambda parent: ("parent", parent),
    "sets.New": _set_new,
    "append": lambda xs, *items: [*(xs or []), *items],
    "sets.NewString": _set_new,
    "make": lambda *a: {} if a and isinstance(a[0], Opaque) and a[0].name.startswith("map") else [],
}


# -- a test function into cases ------------------------------------------------------------


@dataclass
class Case:
    """One converted entry, or the reason it is not convertible (``reason``)."""

    file: str
    test: str
    name: str
    data: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


def convert_file(source: GoSource, path: str, tableless: list[str] | None = None) -> list[Case]:
    """Every table entry of every test function of ``path`` that runs sessions; the names of
    the test functions with no such table go to ``tableless``."""
    ev = Evaluator(source, path)
    out: list[Case] = []
    for fn in ev.funcs.values():
        if fn.name.startswith("Test") and fn.name != "TestMain":
            got = convert_function(ev, path, fn)
            if not got and tableless is not None:
                tableless.append(fn.name)
            out.extend(got)
    return out


def convert_function(ev: Evaluator, path: str, fn: Func) -> list[Case]:
    env: dict[str, Any] = dict(ev.file_vars())
    loop: Statement | None = None
    for st in fn.body:
        if st.value is not None and len(st.names) == 1:
            try:
                ev.assign(st, env)
            except (Unconvertible, KeyError, TypeError, IndexError) as exc:
                env[st.names[0].split(".")[0]] = Opaque(f"{st.names[0]}: {exc}")
        elif st.tokens and st.tokens[0].text == "for" and _ranges_over(st.tokens) in env and loop is None:
            loop = st
        elif st.tokens and st.tokens[0].text in ev.funcs and loop is None:
            _run_helper(ev, st, env)
    if loop is None or _find_call(loop.tokens, "RegisterSession") is None:
        return []  # not a session test (arguments parsed, a plugin's own function called)
    tests_var = _ranges_over(loop.tokens)
    table = env.get(tests_var)
    if not isinstance(table, list):
        reason = table.name if isinstance(table, Opaque) else f"{tests_var} is not a list"
        return [Case(path, fn.name, fn.name, reason=f"its test table could not be read ({reason})")]
    loop_var = _loop_var(loop.tokens)
    register = _find_call(loop.tokens, "RegisterSession")
    assert register is not None
    holder = _receiver(loop.tokens, "RegisterSession")
    run = _find_call(loop.tokens, "Run", receiver=holder)
    verdict = _enqueue_verdict_field(loop.tokens, loop_var) if run is None else None
    scored = _score_call(loop.tokens) if run is None and verdict is None else None
    if run is None and verdict is None and scored is None:
        asked = sorted(
            {
                loop.tokens[i + 2].text
                for i in range(len(loop.tokens) - 3)
                if loop.tokens[i].text == "ssn"
                and loop.tokens[i + 1].text == "."
                and loop.tokens[i + 3].text == "("
            }
        )
        why = (
            f"asks an opened session's {', '.join(asked) or 'functions'} (no action runs), an answer no "
            "output of ours shows (explain's scores show node and HyperNode scores and node fences)"
        )
        return [
            Case(path, fn.name, _entry_name(ev, e) or f"case {i}", reason=why) for i, e in enumerate(table)
        ]
    body = _loop_body(loop.tokens)
    cases: list[Case] = []
    for i, entry in enumerate(table):
        name = _entry_name(ev, entry) or f"case {i}"
        case = Case(path, fn.name, name)
        try:
            if not isinstance(entry, GoStruct):
                raise Unconvertible("table entry is not a struct literal")
            case_env: dict[str, Any] = {**env, loop_var: entry, "i": i}
            for st in body:
                try:
                    ev.assign(st, case_env)
                except (Unconvertible, KeyError, TypeError, IndexError, AttributeError) as exc:
                    if "." in st.names[0]:
                        raise
                    for n in st.names:
                        case_env[n] = Opaque(f"{n}: {exc}")
            test = ev.resolve(holder, case_env) if holder.split(".")[0] in case_env else None
            if not isinstance(test, GoStruct):
                raise Unconvertible(f"the test struct {holder} was not read: {test!r}")
            tiers = ev.eval(register.args[0], case_env)
            configurations = ev.eval(register.args[1], case_env) if len(register.args) > 1 else None
            if run is not None:
                case.data = case_data(ev, test, tiers, configurations, ev.eval(run.args[0], case_env))
                if any(t.text == "CheckBindInHyperNode" for t in loop.tokens):
                    # uthelper's CheckBindInHyperNode checks the number of binds and how many
                    # land in each lowest-tier HyperNode, not which pod goes to which node.
                    case.data["expect"].pop("binds", None)
            elif scored is not None:
                case.data = score_case(ev, test, tiers, configurations, scored, entry, case_env, loop.tokens)
            else:
                assert verdict is not None
                case.data = enqueue_vote_case(ev, test, tiers, configurations, bool(ev.field(entry, verdict)))
        except (Unconvertible, GoSyntaxError, KeyError, TypeError, IndexError, AttributeError) as exc:
            case.reason = str(exc) if isinstance(exc, Unconvertible) else f"{type(exc).__name__}: {exc}"
        cases.append(case)
    return cases


# Session functions a plugin test asks of an opened session, whose answers our
# ``scheduler_plugin.cycle.scores`` shows: Volcano's name -> what the case compares.
SCORE_CALLS = {"NodeOrderFn": "node", "BatchNodeOrderFn": "node", "HyperNodeOrderMapFn": "hypernode"}


def _score_call(toks: tuple[Tok, ...]) -> Call | None:
    """The ``ssn.<score function>(...)`` call of a loop that asks scores, if it does."""
    for name in SCORE_CALLS:
        got = _find_call(toks, name, receiver="ssn")
        if got is not None:
            return got
    return None


def score_case(
    ev: Evaluator,
    test: GoStruct,
    tiers: Any,
    configurations: Any,
    call: Call,
    entry: GoStruct,
    env: Mapping[str, Any],
    loop: tuple[Tok, ...],
) -> dict[str, Any]:
    """A test that asks an opened session for node or HyperNode scores: the session's objects
    and configuration (its actions are never run), and ``scores``: per scored task (or the
    SubJob's HyperNodes) the values Volcano's test expects, within the test's tolerance."""
    fn = call.func.name if isinstance(call.func, Selector) else str(getattr(call.func, "name", ""))
    fn = fn.rsplit(".", 1)[-1]
    data = case_data(ev, test, tiers, configurations, [Action("allocate")])
    data["actions"] = []
    expected = next((entry.fields[k] for k in ("expected", "expectedScores") if k in entry.fields), None)
    if expected is None and fn == "NodeOrderFn":
        expected = {}  # Go's nil map: every score 0
    if not isinstance(expected, dict):
        raise Unconvertible(f"the expected scores of {fn} were not read")
    if entry.fields.get("expectErr"):
        raise Unconvertible(f"expects {fn} to fail")
    texts = {t.text for t in loop}
    # A loop that compares with == asks the exact score.
    eps = ev.source.package_constants(ev.pkg_dir).get("eps") if "eps" in texts else 0
    if not isinstance(eps, int | float):
        raise Unconvertible("the test's tolerance (eps) was not read")
    pods = data["objects"]["pods"]
    pending = [
        f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods if not p["spec"].get("nodeName")
    ]
    scores: dict[str, Any] = {"tolerance": eps}
    if fn == "NodeOrderFn":
        # Every task of every job on every node, as the test's loop asks; what the table leaves
        # out is Go's zero value: score 0, status Success.
        tasks = [
            f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            for p in pods
            if (p["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name")
        ]
        nodes = [n["metadata"]["name"] for n in data["objects"]["nodes"]]
        scores["nodes"] = {t: {n: float((expected.get(t) or {}).get(n, 0.0)) for n in nodes} for t in tasks}
        if "PredicateFn" in texts:
            statuses = entry.fields.get("expectedStatus") or {}
            if not isinstance(statuses, dict):
                raise Unconvertible("the expected predicate statuses were not read")
            scores["predicates"] = {
                t: {n: str((statuses.get(t) or {}).get(n, "Success")) for n in nodes} for t in tasks
            }
    elif fn == "BatchNodeOrderFn":
        if len(pending) != 1:
            raise Unconvertible(f"scores the first pending task of Go's map order, of {len(pending)}")
        nodes_arg = call.args[1]
        if isinstance(nodes_arg, Ident) and nodes_arg.name == "ssn.NodeList":
            nodes = [n["metadata"]["name"] for n in data["objects"]["nodes"]]
        else:
            listed = ev.eval(nodes_arg, env)
            nodes = [ev.field(n, "Name") for n in listed or []]
        missing = sorted(set(expected) - set(nodes))
        if missing:
            raise Unconvertible(f"expects scores of nodes it does not score: {missing}")
        # An empty expectation: Volcano's plugin scores no node, which its sum reads as 0.
        by_node = expected or dict.fromkeys(nodes, 0.0)
        scores["nodes"] = {pending[0]: {str(n): float(v) for n, v in by_node.items()}}
        scores["scored_nodes"] = nodes
    else:
        jobs = {
            pg["metadata"]["namespace"] + "/" + pg["metadata"]["name"] for pg in data["objects"]["podgroups"]
        }
        if len(jobs) != 1:
            raise Unconvertible(f"scores a SubJob of the last job of Go's map order, of {len(jobs)}")
        scores["hypernodes"] = {str(h): float(v) for h, v in expected.items()}
        scores["plugin"] = ev.plugin_name(ev.pkg_dir.rsplit("/", 1)[-1])
    data["scores"] = scores
    return data


def _run_helper(ev: Evaluator, st: Statement, env: dict[str, Any]) -> None:
    """A call of a helper of the test file that changes the values it is given
    (``addResource(p3.Spec.Containers[0].Resources.Requests, GPU, "2")``). Should it not be
    read, the variables it was given are unread too, so no case uses them unchanged."""
    call = Parser([*st.tokens, Tok(";", ";", 0)]).expr()
    try:
        if not isinstance(call, Call):
            raise Unconvertible(f"statement {st.tokens[0].text!r} (line {st.line})")
        ev.eval(call, env)
    except (Unconvertible, KeyError, TypeError, IndexError) as exc:
        args = call.args if isinstance(call, Call) else []
        for a in args:
            while isinstance(a, Selector | Index | Unary):
                a = a.operand if isinstance(a, Unary) else a.base
            if isinstance(a, Ident):
                root = a.name.split(".")[0]
                env[root] = Opaque(f"{root}: {exc}")


def _enqueue_verdict_field(toks: tuple[Tok, ...], var: str) -> str | None:
    """The entry's field a loop compares ``ssn.JobEnqueueable(job)`` with, if it does."""
    texts = [t.text for t in toks]
    if "JobEnqueueable" not in texts:
        return None
    for i in range(len(texts) - 2):
        if (
            texts[i] == var
            and texts[i + 1] == "."
            and "nqueue" in texts[i + 2]
            and texts[i + 2].startswith("expect")
        ):
            return texts[i + 2]
    return None


def enqueue_vote_case(
    ev: Evaluator, test: GoStruct, tiers: Any, configurations: Any, admitted: bool
) -> dict[str, Any]:
    """A test that asks ``ssn.JobEnqueueable`` of every job, as one ``enqueue`` session: its
    PodGroups made Pending (enqueue asks only those), each expected Inqueue when the vote says
    yes and Pending when it says no."""
    data = case_data(ev, test, tiers, configurations, [Action("enqueue")])
    for pg in data["objects"]["podgroups"]:
        pg["status"] = {**pg.get("status", {}), "phase": "Pending"}
    data["expect"]["status"] = {
        f"{pg['metadata']['namespace']}/{pg['metadata']['name']}": "Inqueue" if admitted else "Pending"
        for pg in data["objects"]["podgroups"]
    }
    data["note"] = (
        "Volcano's test asks JobEnqueueable of each job; converted as one enqueue session over its "
        "PodGroups made Pending"
    )
    return data


def _loop_body(toks: tuple[Tok, ...]) -> list[Statement]:
    """The assignments of a ``for ... range`` loop's body, with those of the ``t.Run`` closure
    inside it, in order."""
    p = Parser([*toks, Tok(";", ";", 0)])
    while not p.at("{"):
        p.take()
    block = p.balanced("{", "}")
    return _assignments(Parser([*block[1:-1], Tok(";", ";", 0)]).statements())


def _assignments(stmts: list[Statement]) -> list[Statement]:
    out: list[Statement] = []
    for st in stmts:
        if st.value is not None:
            out.append(st)
            continue
        toks = st.tokens
        if len(toks) > 3 and toks[0].text == "t" and toks[2].text == "Run":
            texts = [t.text for t in toks]
            if "func" in texts:
                p = Parser([*toks[texts.index("func") :], Tok(";", ";", 0)])
                closure = p.primary()
                if isinstance(closure, Block):
                    inner = closure.tokens
                    q = Parser([*inner, Tok(";", ";", 0)])
                    while not q.at("{"):
                        if q.at("("):
                            q.balanced("(", ")")
                        else:
                            q.take()
                    body = q.balanced("{", "}")
                    out.extend(_assignments(Parser([*body[1:-1], Tok(";", ";", 0)]).statements()))
    return out


def _receiver(toks: tuple[Tok, ...], method: str) -> str:
    """The variable, or field path (``tt.testCommonStruct``), ``method`` is called on."""
    for i, t in enumerate(toks):
        if t.text == method and i >= 2 and toks[i - 1].text == "." and toks[i + 1].text == "(":
            if i >= 4 and toks[i - 3].text == ".":
                return f"{toks[i - 4].text}.{toks[i - 2].text}"
            return toks[i - 2].text
    return ""


def _entry_name(ev: Evaluator, entry: Any) -> str | None:
    if not isinstance(entry, GoStruct):
        return None
    for key in ("Name", "name"):
        try:
            v = ev.field(entry, key)
        except Unconvertible:
            continue
        if isinstance(v, str):
            return v
    return None


def _ranges_over(toks: tuple[Tok, ...]) -> str:
    texts = [t.text for t in toks]
    if "range" in texts:
        i = texts.index("range")
        if i + 1 < len(texts):
            return texts[i + 1]
    return ""


def _loop_var(toks: tuple[Tok, ...]) -> str:
    texts = [t.text for t in toks]
    i = texts.index(":=")
    return texts[i - 1]


def _find_call(toks: tuple[Tok, ...], method: str, receiver: str | None = None) -> Call | None:
    for i, t in enumerate(toks):
        if (
            t.text == method
            and i + 1 < len(toks)
            and toks[i + 1].text == "("
            and i >= 1
            and toks[i - 1].text == "."
        ):
            if receiver is not None and (i < 2 or toks[i - 2].text != receiver.rsplit(".", 1)[-1]):
                continue
            p = Parser([*toks[i - 2 : len(toks)], Tok(";", ";", 0)])
            e = p.expr()
            if isinstance(e, Call):
                return e
    return None


def case_data(
    ev: Evaluator, entry: GoStruct, tiers: Any, configurations: Any, actions: Any
) -> dict[str, Any]:
    """A case as data: objects in wire form, the configuration and the expectations."""

    def get(name: str) -> Any:
        return ev.field(entry, name)

    inner = entry.fields.get("TestCommonStruct")
    common = inner.fields if isinstance(inner, GoStruct) else entry.fields
    for key, what in UNMODELLED_FIELDS.items():
        if common.get(key):
            raise Unconvertible(f"uses {what}")
    if get("ExpectTaskStatusNums"):
        raise Unconvertible(
            "checks task status counts (ExpectTaskStatusNums), which our session does not expose"
        )
    for key, value in common.items():
        if isinstance(value, Opaque):
            raise Unconvertible(f"{key}: unresolved {value.name}")
    if not isinstance(actions, list) or not all(isinstance(a, Action) for a in actions):
        raise Unconvertible(f"actions not read: {actions!r}")
    objects: dict[str, Any] = {
        "nodes": to_wire(get("Nodes") or []),
        "pods": to_wire(get("Pods") or []),
        "podgroups": to_wire(get("PodGroups") or []),
        "queues": to_wire(get("Queues") or []),
        "priorityclasses": to_wire(get("PriClass") or []),
        "resourcequotas": to_wire(get("ResourceQuotas") or []),
        "hypernodes": hypernodes(get("HyperNodesMap"), get("HyperNodesSetByTier"), get("HyperNodes")),
    }
    for kind, items in objects.items():
        if any(x is None for x in items):
            raise Unconvertible(f"a nil entry in {kind}")
    faithful(objects)
    expect: dict[str, Any] = {}
    binds = get("ExpectBindMap") or {}
    minimal = bool(get("MinimalBindCheck"))
    expect["binds_num"] = int(get("ExpectBindsNum") or 0)
    if not minimal:
        expect["binds"] = dict(binds)
    per_leaf = get("ExpectBindNumsInHyperNode")
    if per_leaf and not minimal:
        # The binds counted per lowest-tier HyperNode of their node, sorted (uthelper's CheckBind).
        expect["binds_per_leaf"] = sorted(int(n) for n in per_leaf)
    expect["evict_num"] = int(get("ExpectEvictNum") or 0)
    expect["evicted"] = sorted(get("ExpectEvicted") or [])
    pipelined = get("ExpectPipeLined")
    if pipelined:
        expect["pipelined"] = {str(k): list(v or []) for k, v in pipelined.items()}
    status = get("ExpectStatus")
    if status:
        expect["status"] = {str(k): v for k, v in status.items()}
    registered = get("Plugins")
    if isinstance(registered, Opaque):
        raise Unconvertible(f"Plugins: unresolved {registered.name}")
    conf = scheduler_conf(ev, tiers, configurations, [a.name for a in actions])
    if registered:
        # A tier's plugin whose builder the case did not register is skipped by OpenSession.
        for tier in conf["tiers"]:
            tier["plugins"] = [p for p in tier["plugins"] if p["name"] in registered]
    return {
        "actions": [a.name for a in actions],
        "conf": conf,
        "objects": objects,
        "expect": expect,
    }


def faithful(objects: Mapping[str, list[dict[str, Any]]]) -> None:
    """Refuse objects no cluster holds, which Volcano's cache takes but ours (reading what the
    apiserver would admit) cannot be given."""
    for p in objects["pods"]:
        if p["status"]["phase"] == "Running" and not p["spec"].get("nodeName"):
            raise Unconvertible(f"pod {p['metadata']['name']} is Running on no node, which no cluster has")
    for pg in objects["podgroups"]:
        mode = (pg["spec"].get("networkTopology") or {}).get("mode", "hard")
        if mode not in ("hard", "soft"):
            raise Unconvertible(
                f"PodGroup {pg['metadata']['name']} has networkTopology mode {mode!r}, which the CRD refuses"
            )


def scheduler_conf(ev: Evaluator, tiers: Any, configurations: Any, actions: list[str]) -> dict[str, Any]:
    """The session's configuration: actions, tiers whose plugins list the switches the Go test
    turns on (``enabled``; a Go test leaves the others off), and per-action arguments."""
    out_tiers: list[dict[str, Any]] = []
    for tier in tiers or []:
        if not isinstance(tier, GoStruct):
            raise Unconvertible(f"tier not read: {tier!r}")
        plugins: list[dict[str, Any]] = []
        for opt in tier.fields.get("Plugins") or []:
            if not isinstance(opt, GoStruct):
                raise Unconvertible("plugin option not read")
            entry: dict[str, Any] = {"name": opt.fields.get("Name")}
            if not isinstance(entry["name"], str):
                raise Unconvertible(f"plugin name not read: {entry['name']!r}")
            entry["enabled"] = [key for go_name, key in PLUGIN_OPTION_KEYS.items() if opt.fields.get(go_name)]
            unknown = set(opt.fields) - set(PLUGIN_OPTION_KEYS) - {"Name", "Arguments"}
            if unknown:
                raise Unconvertible(f"plugin option fields {sorted(unknown)}")
            args = opt.fields.get("Arguments")
            if args:
                entry["arguments"] = to_wire(args)
            plugins.append(entry)
        out_tiers.append({"plugins": plugins})
    conf: dict[str, Any] = {"actions": ", ".join(actions), "tiers": out_tiers}
    confs = []
    for c in configurations or []:
        if not isinstance(c, GoStruct):
            raise Unconvertible("configuration not read")
        confs.append({"name": c.fields.get("Name"), "arguments": to_wire(c.fields.get("Arguments") or {})})
    if confs:
        conf["configurations"] = confs
    return conf


def hypernodes(by_map: Any, by_tier: Any, members: Any) -> list[dict[str, Any]]:
    """The HyperNodes of a case: the objects of HyperNodesMap, or else a tree rebuilt from
    the node sets per HyperNode and the HyperNode names per tier."""
    if by_map:
        out = []
        for key, hn in sorted(by_map.items()):
            obj = to_wire(hn)
            if obj is None:
                raise Unconvertible(f"HyperNodesMap[{key!r}] is nil")
            # Volcano's session knows a HyperNode by its key in the map (a few tests build the
            # object under another name).
            obj["metadata"] = {**obj["metadata"], "name": key}
            out.append(obj)
        # A parent set by ParentOpt is the one whose members list the child (our tree is made
        # from members only), or the case cannot be given to our session.
        children = {
            m["selector"]["exactMatch"]["name"]: hn["metadata"]["name"]
            for hn in out
            for m in hn["spec"]["members"]
            if m["type"] == "HyperNode" and "exactMatch" in m["selector"]
        }
        for hn in out:
            parent = hn.pop("_parent", None)
            if parent is not None and children.get(hn["metadata"]["name"]) != parent:
                raise Unconvertible(
                    f"HyperNode {hn['metadata']['name']} is given parent {parent}, whose members do not list it"
                )
        return out
    if not by_tier or not members:
        return []
    out: list[dict[str, Any]] = []
    tiers = sorted(by_tier)
    below: list[str] = []
    for tier in tiers:
        names = sorted(by_tier[tier])
        for name in names:
            nodes = set(members.get(name) or [])
            children = [c for c in below if set(members.get(c) or []) <= nodes and set(members.get(c) or [])]
            if children:
                specs = [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}} for c in children]
            else:
                specs = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in sorted(nodes)]
            out.append(
                {
                    "apiVersion": "topology.volcano.sh/v1alpha1",
                    "kind": "HyperNode",
                    "metadata": {"name": name},
                    "spec": {"tier": tier, "members": specs},
                }
            )
        below = names
    return out
