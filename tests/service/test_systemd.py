"""The systemd units: every process is bounded and keeps what it writes to itself."""

import configparser

import pytest
from conftest import ROOT

UNITS = ROOT / "deploy" / "systemd"


def service(name):
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # systemd's keys are case-sensitive
    unit.read(UNITS / f"{name}.service")
    return unit["Service"]


@pytest.mark.parametrize("name", ["docshift-web", "docshift-worker", "docshift-objects"])
def test_each_unit_is_bounded_and_private(name):
    found = service(name)
    assert found["UMask"] == "0077"
    assert int(found["TasksMax"]) > 0
    assert found["MemoryMax"].endswith("%") and 0 < int(found["MemoryMax"][:-1]) <= 100

