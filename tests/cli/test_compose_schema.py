"""docker-compose.yml is valid against the Compose Specification's JSON schema.

The schema is the one the docker-compose 1.x wheel on PyPI ships (compose/config/compose_spec.json,
Apache-2.0); it is downloaded with pip into a temporary directory, not vendored.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
WHEEL = "docker-compose==1.29.2"
SCHEMA_IN_WHEEL = "compose/config/compose_spec.json"


@pytest.fixture(scope="module")
def compose_schema(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("compose-spec")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "--disable-pip-version-check", "-q", "-d", str(where), WHEEL],
        capture_output=True, text=True, timeout=180, check=False)
    wheels = list(where.glob("*.whl"))
    # CI reaches PyPI; without the schema this check must fail, not quietly pass.
    assert proc.returncode == 0 and wheels, f"cannot download {WHEEL}: {proc.stderr[-500:]}"
    with zipfile.ZipFile(wheels[0]) as wheel:
        schema: dict[str, Any] = json.loads(wheel.read(SCHEMA_IN_WHEEL))
    return schema


def _errors(schema: dict[str, Any], document: Any) -> list[str]:
    # The schema declares draft 2019-09 (spelled with a trailing '#' that jsonschema's lookup
    # does not know), so name the validator directly.
    jsonschema.Draft201909Validator.check_schema(schema)
    validator = jsonschema.Draft201909Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
            for e in validator.iter_errors(document)]


def test_compose_file_matches_the_compose_specification(compose_schema: dict[str, Any]) -> None:
    document = yaml.safe_load(COMPOSE.read_text())
    errors = _errors(compose_schema, document)
    assert not errors, "\n".join(errors)


def test_the_schema_does_reject_bad_files(compose_schema: dict[str, Any]) -> None:
    bad = [
        {"services": {"broker": {"image": "bmq", "ports": {"not": "a list"}}}},
        {"services": {"broker": {"image": "bmq", "restart_policy": "always"}}},
        {"servics": {}},
    ]
    for document in bad:
        assert _errors(compose_schema, document), document
