"""Kubernetes name checks with apimachinery's exact error texts.

``is_dns1123_label`` and friends return the list of problems Go's
``k8s.io/apimachinery/pkg/util/validation`` returns (empty when the value is valid),
because Volcano embeds those lists verbatim in its admission messages.
"""

from __future__ import annotations

import re

from hyperplace.kube.labels import DNS1123_LABEL, DNS1123_SUBDOMAIN

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63

_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = rf"{_LABEL_FMT}(\.{_LABEL_FMT})*"
_QUALIFIED_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_PART = re.compile(f"^{_QUALIFIED_FMT}$")

DNS1123_LABEL_ERROR = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
    f"regex used for validation is '{_LABEL_FMT}')"
)
DNS1123_SUBDOMAIN_ERROR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', "
    f"regex used for validation is '{_SUBDOMAIN_FMT}')"
)
QUALIFIED_NAME_ERROR = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
    f"regex used for validation is '{_QUALIFIED_FMT}')"
)


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def is_dns1123_label(value: str) -> list[str]:
    """apimachinery ``IsDNS1123Label``: problems with ``value``, empty when valid."""
    errs = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(_max_len(DNS1123_LABEL_MAX))
    if not DNS1123_LABEL.match(value):
        errs.append(DNS1123_LABEL_ERROR)
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """apimachinery ``IsDNS1123Subdomain``: problems with ``value``, empty when valid."""
    errs = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len(DNS1123_SUBDOMAIN_MAX))
    if not DNS1123_SUBDOMAIN.match(value):
        errs.append(DNS1123_SUBDOMAIN_ERROR)
    return errs


def is_qualified_name(value: str) -> list[str]:
    """apimachinery ``IsQualifiedName`` (name part only: object names carry no prefix)."""
    name = value.rsplit("/", 1)[-1]
    if not name:
        return ["name part must be non-empty"]
    errs = []
    if len(name) > QUALIFIED_NAME_MAX:
        errs.append("name part " + _max_len(QUALIFIED_NAME_MAX))
    if not _QUALIFIED_NAME_PART.match(name):
        errs.append(QUALIFIED_NAME_ERROR)
    return errs


def go_list(errs: list[str]) -> str:
    """Format a string slice the way Go's ``%v`` does: ``[a b]``."""
    return "[" + " ".join(errs) + "]"


def quote_go(value: object) -> str:
    """A value as field.Invalid shows it: strings in double quotes, others bare."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)
