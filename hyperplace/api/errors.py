"""Turn pydantic validation errors into Kubernetes-style field errors."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError
from pydantic.alias_generators import to_camel


def field_path(loc: Sequence[int | str], prefix: str = "") -> str:
    """``("spec", "members", 0, "selector")`` -> ``spec.members[0].selector``."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            # Union branches show up as loc parts like "str" or "function-after[...]"; skip them.
            if "[" in part or part in {"int", "float", "str", "bool"}:
                continue
            name = part if any(c.isupper() for c in part) or "_" not in part else to_camel(part)
            out = f"{out}.{name}" if out else name
    return out


def format_validation_error(err: ValidationError, prefix: str = "") -> list[str]:
    """One ``<field path>: <message>`` line per error, deduplicated, in order."""
    lines: list[str] = []
    for e in err.errors(include_url=False):
        path = field_path(e["loc"], prefix)
        msg = e["msg"]
        if e["type"] == "missing":
            msg = "Required value"
        line = f"{path}: {msg}" if path else msg
        if line not in lines:
            lines.append(line)
    return lines
