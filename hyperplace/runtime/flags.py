"""Command-line flags shared by the hyperplace processes, so every process spells a setting the
same way, shows its default in ``--help`` and answers ``--version``.

* The Lease namespace is ``--lease-namespace`` everywhere (``--namespace`` and Kubernetes'
  ``--leader-elect-resource-namespace`` are accepted too). Its default is the namespace the pod
  runs in (``POD_NAMESPACE``), else the namespace the manifests create, ``hyperplace-system``.
* Leader-election timing uses kube-scheduler's flag names and client-go's defaults:
  ``--leader-elect-lease-duration 15s``, ``--leader-elect-renew-deadline 10s``,
  ``--leader-elect-retry-period 2s``. Durations take Go's notation (``15s``, ``1m30s``,
  ``500ms``) or plain seconds.
* Probes are plain HTTP on ``--health-port``; ``/metrics`` is on ``--metrics-bind-address``,
  localhost unless a serving certificate makes it HTTPS (:mod:`hyperplace.runtime.serving`).
"""

from __future__ import annotations

import argparse
import os
from importlib import metadata

import hyperplace
from hyperplace.api.times import parse_go_duration

from .leader import JITTER_FACTOR
from .serving import DEFAULT_METRICS_BIND_ADDRESS

# The namespace manifests/namespace.yaml creates; every Deployment runs there.
SYSTEM_NAMESPACE = "hyperplace-system"

LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0


def version() -> str:
    """The installed distribution's version (the source tree's when not installed)."""
    try:
        return metadata.version("hyperplace")
    except metadata.PackageNotFoundError:
        return hyperplace.__version__


def duration(text: str) -> float:
    """Seconds from a Go duration (``15s``, ``1m30s``, ``250ms``) or a plain number of seconds."""
    s = text.strip()
    try:
        seconds = float(s)
    except ValueError:
        try:
            seconds = parse_go_duration(s)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"invalid duration {text!r} (use e.g. 15s, 1m30s, 500ms or seconds)"
            ) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return seconds


def duration_or_off(text: str) -> float | None:
    """A :func:`duration`, or None for ``off`` (also ``0``): a setting that can be turned off."""
    if text.strip().lower() in ("off", "0", "0s"):
        return None
    return duration(text)


def format_duration(seconds: float) -> str:
    """``15s``, ``1m30s``, ``0.5s``: how ``--help`` shows a duration default."""
    if seconds >= 60 and float(seconds).is_integer():
        m, s = divmod(int(seconds), 60)
        return f"{m}m{s}s" if s else f"{m}m"
    return f"{seconds:g}s"


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows every flag's default (also for flags whose help text does not mention it), keeps
    the description's line breaks and shows a metavar instead of the destination's name."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = (action.help or "").replace(" (default: %(default)s)", "")
        if "%(default)" in text or action.default in (None, argparse.SUPPRESS, [], ""):
            return text
        if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
            return text
        if isinstance(action, argparse.BooleanOptionalAction):
            return f"{text} (default: {'on' if action.default else 'off'})".strip()
        default = action.default
        if isinstance(default, float) and action.type in (duration, duration_or_off):
            shown = format_duration(default)
        elif isinstance(default, list):
            shown = ", ".join(str(d) for d in default)
        else:
            shown = str(default)
        return f"{text} (default: {shown})".strip()


def parser(prog: str, description: str, epilog: str | None = None) -> argparse.ArgumentParser:
    """An ArgumentParser with the shared formatter and ``--version``."""
    p = argparse.ArgumentParser(
        prog=prog, description=description, epilog=epilog, formatter_class=HelpFormatter
    )
    p.add_argument("--version", action="version", version=f"{prog} {version()}")
    return p


def env_bool(name: str, default: bool) -> bool:
    """A boolean from the environment: 1/true/yes/on are true, anything else set is false."""
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() in ("1", "true", "yes", "on")


def pod_namespace() -> str:
    """The namespace this process runs in (``POD_NAMESPACE`` from the downward API), else
    ``hyperplace-system``."""
    return os.environ.get("POD_NAMESPACE") or SYSTEM_NAMESPACE


def add_kubeconfig(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kubeconfig",
        metavar="FILE",
        default=os.environ.get("KUBECONFIG"),
        help="kubeconfig file (env KUBECONFIG); without one, the in-cluster service account",
    )


def add_log_level(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--log-level",
        metavar="LEVEL",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        default=(os.environ.get("HYPERPLACE_LOG_LEVEL") or "INFO").upper(),
        help="DEBUG, INFO, WARNING or ERROR (env HYPERPLACE_LOG_LEVEL)",
    )


def add_leader_election(p: argparse.ArgumentParser, lease_name: str, what: str) -> None:
    """``--leader-elect``, the Lease's namespace and name, and client-go's three timings."""
    g = p.add_argument_group("leader election")
    g.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=env_bool("HYPERPLACE_LEADER_ELECT", True),
        help=f"{what} only while holding the Lease (env HYPERPLACE_LEADER_ELECT)",
    )
    g.add_argument(
        "--lease-namespace",
        "--leader-elect-resource-namespace",
        "--namespace",
        dest="lease_namespace",
        metavar="NAMESPACE",
        default=os.environ.get("HYPERPLACE_LEADER_ELECTION_NAMESPACE") or pod_namespace(),
        help="namespace of the Lease (env HYPERPLACE_LEADER_ELECTION_NAMESPACE, else POD_NAMESPACE)",
    )
    g.add_argument(
        "--lease-name",
        "--leader-elect-resource-name",
        dest="lease_name",
        metavar="NAME",
        default=os.environ.get("HYPERPLACE_LEADER_ELECTION_LEASE") or lease_name,
        help="name of the Lease (env HYPERPLACE_LEADER_ELECTION_LEASE)",
    )
    g.add_argument(
        "--leader-elect-lease-duration",
        dest="lease_duration",
        metavar="DURATION",
        type=duration,
        default=LEASE_DURATION,
        help="how long a standby waits after the last renewal before it takes the Lease over",
    )
    g.add_argument(
        "--leader-elect-renew-deadline",
        dest="renew_deadline",
        metavar="DURATION",
        type=duration,
        default=RENEW_DEADLINE,
        help="how long the leader keeps trying to renew before it stops leading",
    )
    g.add_argument(
        "--leader-elect-retry-period",
        dest="retry_period",
        metavar="DURATION",
        type=duration,
        default=RETRY_PERIOD,
        help="time between attempts to acquire or renew the Lease",
    )


def check_leader_election(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse timings client-go would refuse (lease > renew deadline > 1.2 x retry period)."""
    if not args.lease_duration > args.renew_deadline:
        p.error("--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline")
    if not args.renew_deadline > JITTER_FACTOR * args.retry_period:
        p.error(
            f"--leader-elect-renew-deadline must be greater than {JITTER_FACTOR} x --leader-elect-retry-period"
        )


def add_metrics_serving(p: argparse.ArgumentParser) -> None:
    """``--metrics-bind-address`` (localhost by default), ``--metrics-port`` and the optional
    serving certificate that makes ``/metrics`` HTTPS (see :mod:`hyperplace.runtime.serving`)."""
    g = p.add_argument_group("metrics")
    g.add_argument(
        "--metrics-bind-address",
        metavar="HOST:PORT",
        default=os.environ.get("HYPERPLACE_METRICS_BIND_ADDRESS") or DEFAULT_METRICS_BIND_ADDRESS,
        help="where /metrics listens; ':PORT' is every interface (needs the TLS flags); "
        "0 disables (env HYPERPLACE_METRICS_BIND_ADDRESS)",
    )
    g.add_argument(
        "--metrics-port",
        metavar="PORT",
        type=int,
        default=None,
        help="the port of --metrics-bind-address (default: the address's own)",
    )
    g.add_argument(
        "--metrics-tls-cert-file",
        metavar="FILE",
        default=os.environ.get("HYPERPLACE_METRICS_TLS_CERT_FILE") or None,
        help="serving certificate (PEM): /metrics is then HTTPS; reloaded when the file changes "
        "(env HYPERPLACE_METRICS_TLS_CERT_FILE)",
    )
    g.add_argument(
        "--metrics-tls-private-key-file",
        metavar="FILE",
        default=os.environ.get("HYPERPLACE_METRICS_TLS_PRIVATE_KEY_FILE") or None,
        help="its private key (PEM) (env HYPERPLACE_METRICS_TLS_PRIVATE_KEY_FILE)",
    )
