"""Device selectors in CEL, with Kubernetes' DRA environment, evaluated by Google's CEL runtime
(``cel-expr-python``).

The variable is ``device``: ``driver``, ``allowMultipleAllocations`` (false: consumable capacity
is not allocated here), ``attributes`` (domain -> name -> value) and ``capacity`` (domain -> name
-> quantity); a name without a domain is the driver's. As in Go, a domain the device has nothing
under reads as an empty map, and a name missing under a domain is a runtime error ("no such
key"). Quantities and semantic versions are values of their own: ``quantity()``,
``isQuantity()``, ``semver()``, ``isSemver()``, and the members ``compareTo``, ``isGreaterThan``,
``isLessThan``, ``add``, ``sub``, ``asInteger``, ``asApproximateFloat``, ``isInteger``, ``sign``
(quantities) and ``major``, ``minor``, ``patch``, ``compareTo``, ``isGreaterThan``,
``isLessThan`` (versions). Optional chaining, the strings library and ``cel.bind`` are there, as in Kubernetes'
base environment. Each expression is compiled once."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from hyperplace.kube.quantity import QuantityError, milli_value

if TYPE_CHECKING:  # dra.py reads this module's Version and compiles its selectors here
    from .dra import DeviceInfo


_T = cel.Type
_Q, _V = "__quantity", "__semver"  # the map keys that make a quantity or a version value
# Domains an expression indexes literally: given as empty maps when the device has none.
_DOMAIN = re.compile(r"""(?:attributes|capacity)\s*\[\s*(['"])(.*?)\1\s*\]""")


@dataclass(frozen=True)
class Version:
    """A semantic version attribute (``version``), comparable as semver orders versions."""

    text: str
    key: tuple[Any, ...] = field(compare=False, hash=False, default=())

    def __str__(self) -> str:
        return self.text


def parse_semver(text: str) -> tuple[Any, ...] | None:
    """The sort key of a semantic version (major, minor, patch, pre-release), or None."""
    core, _, _build = text.partition("+")
    main, dash, pre = core.partition("-")
    parts = main.split(".")
    if len(parts) != 3 or not all(p.isdigit() and (p == "0" or not p.startswith("0")) for p in parts):
        return None
    if dash and not pre:
        return None
    pre_key: tuple[Any, ...]
    if pre:
        ids = pre.split(".")
        if any(not i for i in ids):
            return None
        # A release sorts after its pre-releases; numeric identifiers before alphanumeric ones.
        pre_key = (0, tuple((0, int(i), "") if i.isdigit() else (1, 0, i) for i in ids))
    else:
        pre_key = (1, ())
    return (int(parts[0]), int(parts[1]), int(parts[2]), pre_key)


def _q(milli: int) -> dict[str, int]:
    return {_Q: milli}


def _quantity(text: str) -> dict[str, int]:
    try:
        return _q(milli_value(text))
    except QuantityError as exc:
        raise ValueError(str(exc)) from None


def _is_quantity(text: str) -> bool:
    try:
        milli_value(text)
    except QuantityError:
        return False
    return True


def _v(text: str) -> dict[str, str]:
    return {_V: text}


def _semver(text: str) -> dict[str, str]:
    if parse_semver(text) is None:
        raise ValueError(f"{text!r} is not a valid semantic version")
    return _v(text)


def _cmp(a: Mapping[str, Any], b: Mapping[str, Any]) -> int:
    if _Q in a and _Q in b:
        x, y = a[_Q], b[_Q]
    elif _V in a and _V in b:
        x, y = parse_semver(a[_V]), parse_semver(b[_V])
    else:
        raise ValueError("compareTo: a quantity compares with a quantity, a version with a version")
    return (x > y) - (x < y)


def _qv(a: Mapping[str, Any]) -> int:
    if _Q not in a:
        raise ValueError("not a quantity")
    return int(a[_Q])


def _part(i: int) -> Any:
    def get(a: Mapping[str, Any]) -> int:
        key = parse_semver(str(a.get(_V, "")))
        if key is None:
            raise ValueError("not a semantic version")
        return int(key[i])

    return get


def _as_integer(a: Mapping[str, Any]) -> int:
    m = _qv(a)
    if m % 1000:
        raise ValueError("cannot convert value to integer")
    return m // 1000


def _functions() -> list[Any]:
    M, S, N, B, D, F = _T.MAP, _T.STRING, _T.INT, _T.BOOL, _T.DYN, _T.DOUBLE

    def decl(name: str, *overloads: tuple[str, Any, list[Any], bool, Any]) -> Any:
        return cel.FunctionDecl(
            name,
            [
                cel.Overload(oid, ret, args, is_member=member, impl=impl)
                for oid, ret, args, member, impl in overloads
            ],
        )

    return [
        decl("quantity", ("dra_quantity_string", D, [S], False, _quantity)),
        decl("isQuantity", ("dra_is_quantity_string", B, [S], False, _is_quantity)),
        decl("semver", ("dra_semver_string", D, [S], False, _semver)),
        decl("isSemver", ("dra_is_semver_string", B, [S], False, lambda s: parse_semver(s) is not None)),
        decl("compareTo", ("dra_compare_to", N, [M, M], True, _cmp)),
        decl("isGreaterThan", ("dra_is_greater_than", B, [M, M], True, lambda a, b: _cmp(a, b) > 0)),
        decl("isLessThan", ("dra_is_less_than", B, [M, M], True, lambda a, b: _cmp(a, b) < 0)),
        decl(
            "add",
            ("dra_add_quantity", D, [M, M], True, lambda a, b: _q(_qv(a) + _qv(b))),
            ("dra_add_int", D, [M, N], True, lambda a, n: _q(_qv(a) + 1000 * n)),
        ),
        decl(
            "sub",
            ("dra_sub_quantity", D, [M, M], True, lambda a, b: _q(_qv(a) - _qv(b))),
            ("dra_sub_int", D, [M, N], True, lambda a, n: _q(_qv(a) - 1000 * n)),
        ),
        decl("asInteger", ("dra_as_integer", N, [M], True, _as_integer)),
        decl("asApproximateFloat", ("dra_as_float", F, [M], True, lambda a: float(Fraction(_qv(a), 1000)))),
        decl("isInteger", ("dra_is_integer", B, [M], True, lambda a: _qv(a) % 1000 == 0)),
        decl("sign", ("dra_sign", N, [M], True, lambda a: (_qv(a) > 0) - (_qv(a) < 0))),
        decl("major", ("dra_major", N, [M], True, _part(0))),
        decl("minor", ("dra_minor", N, [M], True, _part(1))),
        decl("patch", ("dra_patch", N, [M], True, _part(2))),
    ]


@functools.cache
def _env() -> Any:
    # Kubernetes' base environment has optional types (``.?x.orValue(...)``, which its own
    # "no such key" hint recommends), the strings library and ``cel.bind``.
    extensions = [ext_optional.ExtOptional(), ext_strings.ExtStrings(), ext_bindings.ExtBindings()]
    return cel.NewEnv(variables={"device": _T.DYN}, extensions=extensions, functions=_functions())


def _value(v: object) -> object:
    if isinstance(v, Version):
        return _v(v.text)
    return v


@dataclass(frozen=True)
class CompiledSelector:
    """A compiled selector expression."""

    expression: str
    program: Any
    domains: tuple[str, ...]

    def matches(self, device: DeviceInfo) -> bool | str:
        """Whether ``device`` passes; a string is the runtime error."""
        attrs: dict[str, dict[str, object]] = {d: {} for d in self.domains}
        for name, value in device.attributes.items():
            dom, _, key = name.rpartition("/")
            attrs.setdefault(dom, {})[key] = _value(value)
        caps: dict[str, dict[str, object]] = {d: {} for d in self.domains}
        for name, milli in device.capacity.items():
            dom, _, key = name.rpartition("/")
            caps.setdefault(dom, {})[key] = _q(milli)
        data = {
            "device": {
                "driver": device.driver,
                "allowMultipleAllocations": False,
                "attributes": attrs,
                "capacity": caps,
            }
        }
        try:
            got = self.program.eval(data=data)
        except Exception as exc:  # the runtime's own failure, as a CEL error
            return str(exc)
        if got.type() == _T.ERROR:
            return _go_words(str(got.value()))
        out = got.value()
        if not isinstance(out, bool):
            return f"CEL result of type {got.type().name()} could not be converted to bool"
        return out


def _go_words(message: str) -> str:
    """cel-go's wording of a missing key, with Kubernetes' hint."""
    m = re.search(r'Key not found in map\s*:\s*"?([^"]*)"?', message)
    if m:
        return (
            f"no such key: {m.group(1)}. consider using CEL optional chaining (.? followed by orValue()) "
            "or guarding the check with has() for optional fields"
        )
    return message


@functools.lru_cache(maxsize=4096)
def compile_selector(expression: str) -> CompiledSelector | str:
    """The expression compiled (once), or the compiler's message."""
    try:
        program = _env().compile(expression)
    except RuntimeError as exc:
        return str(exc).removeprefix("INVALID_ARGUMENT: ")
    rt = program.return_type()
    if rt not in (_T.BOOL, _T.DYN):
        return f"must evaluate to bool, not {rt.name()}"
    domains = tuple(sorted({m.group(2) for m in _DOMAIN.finditer(expression)}))
    return CompiledSelector(expression, program, domains)


def selector_matches(expression: str, device: DeviceInfo) -> bool | str:
    """Whether ``device`` passes the selector; a string is why it cannot be told (a compile
    or runtime error)."""
    got = compile_selector(expression)
    if isinstance(got, str):
        return f"CEL compile error: {got}"
    out = got.matches(device)
    if isinstance(out, str):
        return f"CEL runtime error: {out}"
    return out
