"""Stories of device selectors: the CEL expressions Kubernetes documents for DeviceClasses and
claims select the devices they select in kube-scheduler, and a broken one is named."""

from __future__ import annotations

import pytest

from scheduler_plugin.filters.dra import parse_claim_spec, parse_device_class
from scheduler_plugin.filters.dra_cel import compile_selector, selector_matches

from .builders import DRIVER, device

A100 = device(
    attrs={"model": "A100", "index": 3, "nvlink": True, "driverVersion": "v1.2.3", "other.io/zone": "z1"},
    caps={"memory": "40Gi", "cores": "1500m"},
)


def matches(expr: str) -> bool | str:
    return selector_matches(expr, A100)


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        (f"device.driver == '{DRIVER}'", True),
        ("device.driver == 'other.example.com'", False),
        (f"device.attributes['{DRIVER}'].model == 'A100'", True),
        (f"device.attributes['{DRIVER}'].index >= 3 && device.attributes['{DRIVER}'].nvlink", True),
        (f"device.attributes['{DRIVER}'].index < 3", False),
        ("device.attributes['other.io'].zone == 'z1'", True),
        (f"device.capacity['{DRIVER}'].memory.compareTo(quantity('32Gi')) >= 0", True),
        (f"device.capacity['{DRIVER}'].memory.isGreaterThan(quantity('80Gi'))", False),
        (f"device.capacity['{DRIVER}'].memory.isLessThan(quantity('41Gi'))", True),
        (f"device.capacity['{DRIVER}'].cores.isInteger()", False),
        (f"device.capacity['{DRIVER}'].memory.asInteger() == 42949672960", True),
        (f"device.capacity['{DRIVER}'].cores.add(quantity('500m')) == quantity('2')", True),
        (f"device.capacity['{DRIVER}'].cores.sub(1).sign() == 1", True),
        (f"device.capacity['{DRIVER}'].cores.asApproximateFloat() == 1.5", True),
        (f"device.attributes['{DRIVER}'].driverVersion.isGreaterThan(semver('1.2.0'))", True),
        (f"device.attributes['{DRIVER}'].driverVersion.compareTo(semver('1.10.0')) < 0", True),
        (f"device.attributes['{DRIVER}'].driverVersion.major() == 1", True),
        (f"device.attributes['{DRIVER}'].driverVersion.minor() == 2", True),
        (f"device.attributes['{DRIVER}'].driverVersion.patch() == 3", True),
        ("isQuantity('10Gi') && !isQuantity('ten') && isSemver('1.0.0') && !isSemver('1.0')", True),
        (f"'model' in device.attributes['{DRIVER}']", True),
        (f"has(device.attributes['{DRIVER}'].missing)", False),
        ("device.attributes['nothing.example.com'].size() == 0", True),
    ],
)
def test_a_documented_selector_selects_as_in_kubernetes(expr: str, want: bool) -> None:
    assert matches(expr) is want


def test_an_attribute_without_a_domain_belongs_to_the_driver() -> None:
    assert set(A100.attributes) >= {f"{DRIVER}/model", f"{DRIVER}/index", "other.io/zone"}
    assert A100.capacity[f"{DRIVER}/memory"] == 40 * 1024**3 * 1000  # milli-units


def test_a_missing_attribute_is_a_runtime_error_with_kubernetes_hint() -> None:
    got = matches(f"device.attributes['{DRIVER}'].missing == 'x'")
    assert isinstance(got, str)
    assert got.startswith("CEL runtime error: no such key: missing")
    assert "optional chaining" in got


def test_an_optional_lookup_of_a_missing_attribute_takes_the_default() -> None:
    assert matches(f"device.attributes['{DRIVER}'].?missing.orValue('none') == 'none'") is True


def test_an_expression_is_compiled_once() -> None:
    expr = f"device.driver == '{DRIVER}' && true"
    assert compile_selector(expr) is compile_selector(expr)


def test_a_compile_error_is_the_compilers_message() -> None:
    got = compile_selector("device.driver ==")
    assert isinstance(got, str) and got


def test_a_selector_that_is_not_boolean_is_refused() -> None:
    got = compile_selector("'gpu'")
    assert isinstance(got, str) and "bool" in got
    # ``device`` is dynamic here, so a field's type is known only when it is read.
    late = matches("device.driver")
    assert isinstance(late, str) and "bool" in late


def test_a_device_class_with_a_broken_selector_names_the_field() -> None:
    cls = parse_device_class(
        {"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": "device.driver =="}}]}}
    )
    assert cls.bad is not None
    assert cls.bad.startswith("deviceclass gpu: spec.selectors[0].cel.expression: ")


def test_a_claim_with_a_broken_selector_names_the_field() -> None:
    spec = parse_claim_spec(
        {
            "devices": {
                "requests": [
                    {
                        "name": "gpus",
                        "exactly": {"deviceClassName": "gpu", "selectors": [{"cel": {"expression": "1 +"}}]},
                    }
                ]
            }
        },
        "resourceclaim default/c",
    )
    assert spec.bad is not None
    assert spec.bad.startswith(
        "resourceclaim default/c: spec.devices.requests[0].exactly.selectors[0].cel.expression: "
    )
