"""Name errors read exactly as Kubernetes' apimachinery writes them (Volcano embeds them)."""

from __future__ import annotations

from webhooks.names import go_list, is_dns1123_label, is_dns1123_subdomain, is_qualified_name, quote_go


def test_dns1123_label_texts():
    assert is_dns1123_label("worker-0") == []
    assert is_dns1123_label("Worker") == [
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
        "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
        "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
    ]
    assert is_dns1123_label("a" * 64)[0] == "must be no more than 63 characters"


def test_dns1123_subdomain_texts():
    assert is_dns1123_subdomain("node-1.rack-2") == []
    assert is_dns1123_subdomain("-x") == [
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
        "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
        "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    ]
    assert is_dns1123_subdomain("a" * 254) == ["must be no more than 253 characters"]


def test_qualified_name_texts():
    assert is_qualified_name("My.Name_1") == []
    assert is_qualified_name("") == ["name part must be non-empty"]
    assert is_qualified_name("x" * 64) == ["name part must be no more than 63 characters"]
    assert is_qualified_name("-x")[0].startswith("name part must consist of alphanumeric characters")


def test_go_formatting_helpers():
    assert go_list(["a b", "c"]) == "[a b c]"
    assert quote_go('say "hi"') == '"say \\"hi\\""'
    assert quote_go(None) == "null"
    assert quote_go(True) == "true"
