"""An operator reads ``--help`` and ``--version`` of every process and finds the same flag names,
the manifests' namespace as the default, and every default spelled out."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from certs.__main__ import main as certs_main
from controller.__main__ import parse_args as controller_args
from hyperplace.runtime.fakeapi import FakeApi
from hyperplace.runtime.flags import duration, version
from hyperplace.runtime.serving import MetricsServing, is_loopback, leader_elector, parse_bind_address
from scheduler_plugin.__main__ import parse_args as scheduler_args
from webhooks.__main__ import main as webhooks_main

LEADER_PROCESSES: dict[str, Callable[[list[str]], Any]] = {
    "hyperplace-controller": controller_args,
    "hyperplace-scheduler": scheduler_args,
}
ALL_PROCESSES: dict[str, Callable[[list[str]], Any]] = {
    **LEADER_PROCESSES,
    "hyperplace-webhooks": webhooks_main,
    "hyperplace-certs": certs_main,
}


@pytest.fixture(autouse=True)
def _no_deployment_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "POD_NAMESPACE",
        "KUBE_POD_NAMESPACE",
        "HYPERPLACE_LEADER_ELECTION_NAMESPACE",
        "HYPERPLACE_LEADER_ELECTION_LEASE",
        "HYPERPLACE_LEADER_ELECT",
        "HYPERPLACE_METRICS_BIND_ADDRESS",
        "HYPERPLACE_METRICS_TLS_CERT_FILE",
        "HYPERPLACE_METRICS_TLS_PRIVATE_KEY_FILE",
        "KUBECONFIG",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "100")


def _output(fn: Callable[[list[str]], Any], argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        fn(argv)
    assert exc.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("prog", sorted(ALL_PROCESSES))
def test_every_process_answers_version(prog: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _output(ALL_PROCESSES[prog], ["--version"], capsys).strip() == f"{prog} {version()}"


@pytest.mark.parametrize("prog", sorted(ALL_PROCESSES))
def test_help_has_no_raw_markup_and_a_metavar_for_every_value(
    prog: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _output(ALL_PROCESSES[prog], ["--help"], capsys)
    assert "``" not in text and ":class:" not in text
    assert any(line.startswith(f"{prog}: ") for line in text.splitlines()), "a plain-text summary"
    # argparse's fallback metavar is the destination in capitals (e.g. --lease-name LEASE_NAME).
    assert not re.search(r"--[a-z-]+ [A-Z]+_[A-Z_]+", text), text


@pytest.mark.parametrize("prog", sorted(LEADER_PROCESSES))
def test_the_lease_lives_in_the_manifests_namespace_by_default(prog: str) -> None:
    args = LEADER_PROCESSES[prog]([])
    assert args.lease_namespace == "hyperplace-system"
    assert (args.lease_duration, args.renew_deadline, args.retry_period) == (15.0, 10.0, 2.0)


@pytest.mark.parametrize("prog", sorted(LEADER_PROCESSES))
@pytest.mark.parametrize("flag", ["--lease-namespace", "--namespace", "--leader-elect-resource-namespace"])
def test_both_processes_accept_every_spelling_of_the_lease_namespace(prog: str, flag: str) -> None:
    assert LEADER_PROCESSES[prog]([flag, "ops"]).lease_namespace == "ops"


@pytest.mark.parametrize("prog", sorted(LEADER_PROCESSES))
def test_the_pods_namespace_is_the_default_inside_a_cluster(
    prog: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "team-a")
    assert LEADER_PROCESSES[prog]([]).lease_namespace == "team-a"


@pytest.mark.parametrize("prog", sorted(LEADER_PROCESSES))
def test_help_shows_every_default(prog: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(_output(LEADER_PROCESSES[prog], ["--help"], capsys).split())
    for shown in (
        "--lease-namespace NAMESPACE",
        "(default: hyperplace-system)",
        f"(default: {prog})",
        "Lease over (default: 15s)",
        "stops leading (default: 10s)",
        "renew the Lease (default: 2s)",
        "(default: on)",
        "(default: 8080)",
        "(default: INFO)",
    ):
        assert shown in text, f"{shown!r} missing from {prog} --help"


@pytest.mark.parametrize("prog", sorted(LEADER_PROCESSES))
def test_leader_election_timings_take_go_durations_and_are_checked(
    prog: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = LEADER_PROCESSES[prog](
        [
            "--leader-elect-lease-duration",
            "1m",
            "--leader-elect-renew-deadline",
            "45s",
            "--leader-elect-retry-period",
            "500ms",
        ]
    )
    assert (args.lease_duration, args.renew_deadline, args.retry_period) == (60.0, 45.0, 0.5)
    with pytest.raises(SystemExit) as exc:
        LEADER_PROCESSES[prog](["--leader-elect-lease-duration", "5s"])
    assert exc.value.code == 2
    assert "--leader-elect-lease-duration must be greater than" in capsys.readouterr().err


def test_durations_read_as_go_writes_them() -> None:
    assert duration("1m30s") == 90.0
    assert duration("1.5") == 1.5
    assert duration("250ms") == 0.25
    assert duration("2h") == 7200.0
    for bad in ("", "15 s", "s", "-1s", "0", "1d"):
        with pytest.raises(Exception, match=r"invalid duration|must be positive"):
            duration(bad)


@pytest.mark.parametrize("prog", sorted(LEADER_PROCESSES))
def test_metrics_stay_inside_the_pod_unless_served_over_https(
    prog: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parse = LEADER_PROCESSES[prog]
    assert MetricsServing.from_args(parse([])) == MetricsServing("127.0.0.1", 9090)
    assert MetricsServing.from_args(parse(["--metrics-port", "9100"])) == MetricsServing("127.0.0.1", 9100)
    assert MetricsServing.from_args(parse(["--metrics-bind-address", "0"])) is None
    tls = ["--metrics-tls-cert-file", "c.pem", "--metrics-tls-private-key-file", "k.pem"]
    served = MetricsServing.from_args(parse(["--metrics-bind-address", ":8443", *tls]))
    assert served == MetricsServing("0.0.0.0", 8443, "c.pem", "k.pem") and served.tls
    for argv, says in (
        (["--metrics-bind-address", ":9090"], "plain HTTP beyond this pod"),
        (["--metrics-bind-address", "10.0.0.1:9090"], "plain HTTP beyond this pod"),
        (["--metrics-bind-address", "localhost"], "needs a port"),
        (["--metrics-bind-address", "127.0.0.1:http"], "is not a number"),
        (["--metrics-tls-cert-file", "c.pem"], "go together"),
        (["--health-port", "9090"], "cannot share port 9090"),
    ):
        with pytest.raises(SystemExit):
            parse(argv)
        assert says in capsys.readouterr().err, argv


def test_bind_addresses_read_as_controller_runtime_writes_them() -> None:
    assert parse_bind_address(":8443") == ("0.0.0.0", 8443)
    assert parse_bind_address("[::1]:9090") == ("::1", 9090)
    assert parse_bind_address("0") is None
    assert is_loopback("127.0.0.2") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.com")
    with pytest.raises(ValueError, match="out of range"):
        parse_bind_address("127.0.0.1:70000")


@pytest.mark.parametrize("prog", sorted(LEADER_PROCESSES))
def test_both_processes_build_the_same_elector_from_the_flags(prog: str) -> None:
    args = LEADER_PROCESSES[prog](
        ["--lease-name", "l", "--namespace", "ns", "--leader-elect-lease-duration", "20s"]
    )
    elector = leader_elector(FakeApi(), args, "me_1")
    assert elector is not None
    assert (elector.namespace, elector.name, elector.identity, elector.lease_duration) == (
        "ns",
        "l",
        "me_1",
        20.0,
    )
    assert leader_elector(FakeApi(), LEADER_PROCESSES[prog](["--no-leader-elect"]), "me_1") is None
