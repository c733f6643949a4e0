"""docs/protocol-coverage.md is generated from the server's command table and is up to date."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _generator():  # the script is not a package module
    spec = importlib.util.spec_from_file_location("gen_protocol_coverage", ROOT / "scripts" / "gen_protocol_coverage.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_coverage_table_is_fresh() -> None:
    committed = (ROOT / "docs" / "protocol-coverage.md").read_text(encoding="utf-8")
    assert committed == _generator().render(), (
        "docs/protocol-coverage.md is stale: run python scripts/gen_protocol_coverage.py and commit it"
    )


def test_table_lists_every_command_once() -> None:
    from mledger.codec.proto import PulsarApi_pb2 as api

    text = _generator().render()
    for value in api.BaseCommand.Type.DESCRIPTOR.values:
        assert text.count(f"| `{value.name}` |") == 1, value.name
