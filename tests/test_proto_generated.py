"""The committed generated protobuf modules match proto/, and encode exactly as Pulsar does."""

from __future__ import annotations

import ast
import keyword
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mledger.codec.proto import MLDataFormats_pb2 as ml, PulsarApi_pb2 as api

ROOT = Path(__file__).resolve().parents[1]
PROTO_DIR = ROOT / "proto" / "mledger"
GENERATED_DIR = ROOT / "src" / "mledger" / "codec" / "proto"


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import grpc_tools  # noqa: F401  grpcio-tools (the [test] extra) regenerates the protos
    out = tmp_path_factory.mktemp("proto")
    env = {**os.environ, "PYTHON": sys.executable}
    result = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gen_proto.sh"), str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, f"scripts/gen_proto.sh failed:\n{result.stderr}"
    return out


def _expected_modules() -> list[str]:
    return sorted(
        f"{p.stem}_pb2{suffix}" for p in PROTO_DIR.glob("*.proto") for suffix in (".py", ".pyi")
    )


def test_every_proto_has_committed_modules_and_nothing_stale() -> None:
    committed = sorted(p.name for p in GENERATED_DIR.glob("*_pb2.py*"))
    assert committed == _expected_modules(), (
        "src/mledger/codec/proto does not hold exactly one _pb2.py/.pyi pair per proto/mledger/*.proto;"
        " run scripts/gen_proto.sh"
    )


@pytest.mark.parametrize("name", _expected_modules())
def test_committed_module_matches_regenerated(regenerated: Path, name: str) -> None:
    fresh = (regenerated / name).read_bytes()
    committed = (GENERATED_DIR / name).read_bytes()
    assert committed == fresh, (
        f"src/mledger/codec/proto/{name} differs from what scripts/gen_proto.sh generates from"
        f" proto/mledger; run scripts/gen_proto.sh and commit the result"
    )


@pytest.mark.parametrize("name", [n for n in _expected_modules() if n.endswith(".pyi")])
def test_stubs_are_valid_python_mypy_reads_as_committed(name: str) -> None:
    # protoc's own --pyi_out wrote `None: ...` for Schema.Type's value None (a syntax error, so
    # `make lint` had to feed mypy a patched copy); the stubs must parse as they are.
    tree = ast.parse((GENERATED_DIR / name).read_text(encoding="utf-8"), filename=name)
    assigned = {
        node.target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }
    assert not assigned & set(keyword.kwlist), f"{name} declares a Python keyword as an attribute"


def test_enum_values_named_after_keywords_stay_reachable() -> None:
    # Left out of the stubs, still there at run time: Pulsar's Schema.Type.None is 0.
    assert api.Schema.Type.Value("None") == 0
    assert api.Schema.Type.Name(0) == "None"


# -- exact bytes of hand-built messages ------------------------------------------------------


def _npi(ledger: int, entry: int) -> ml.NestedPositionInfo:
    return ml.NestedPositionInfo(ledgerId=ledger, entryId=entry)


def test_position_info_with_one_range_bytes() -> None:
    info = ml.PositionInfo(
        ledgerId=3,
        entryId=5,
        individualDeletedMessages=[
            ml.MessageRange(lowerEndpoint=_npi(3, 5), upperEndpoint=_npi(3, 7))
        ],
    )
    assert info.SerializeToString() == bytes.fromhex("080310051a0c0a0408031005120408031007")


def test_long_list_map_values_are_unpacked() -> None:
    # proto2 repeated int64 without [packed=true]: one tag 0x10 per element, never 0x12.
    entry = ml.LongListMap(key=3, values=[1, 2, -1])
    assert entry.SerializeToString() == bytes.fromhex("08031001100210ffffffffffffffffff01")
    info = ml.PositionInfo(ledgerId=1, entryId=2, individualDeletedMessageRanges=[entry])
    assert info.SerializeToString() == bytes.fromhex(
        "08011002321108031001100210ffffffffffffffffff01"
    )


def test_batch_deletion_index_and_long_property_bytes() -> None:
    info = ml.PositionInfo(
        ledgerId=1,
        entryId=2,
        properties=[ml.LongProperty(name="a", value=-1)],
        batchedEntryDeletionIndexInfo=[
            ml.BatchedEntryDeletionIndexInfo(position=_npi(1, 3), deleteSet=[5, 6])
        ],
    )
    assert info.SerializeToString() == bytes.fromhex(
        "08011002220e0a016110ffffffffffffffffff012a0a0a040801100310051006"
    )


def test_message_id_data_bytes() -> None:
    plain = api.MessageIdData(ledgerId=12345, entryId=4)
    assert plain.SerializeToString() == bytes.fromhex("08b9601004")
    java = api.MessageIdData(ledgerId=12345, entryId=4, batch_size=0)
    assert java.SerializeToString() == bytes.fromhex("08b96010043000")
    acks = api.MessageIdData(ledgerId=1, entryId=2, partition=-2, ack_set=[7, 8])
    assert acks.SerializeToString() == bytes.fromhex("0801100218feffffffffffffffff0128072808")


def test_message_metadata_bytes() -> None:
    md = api.MessageMetadata(
        producer_name="p",
        sequence_id=1,
        publish_time=2,
        properties=[api.KeyValue(key="k", value="v")],
        partition_key="x",
        num_messages_in_batch=3,
        event_time=4,
        deliver_at_time=5,
        highest_sequence_id=6,
        uuid="u",
        num_chunks_from_msg=7,
        total_chunk_msg_size=8,
        chunk_id=9,
    )
    assert md.SerializeToString() == bytes.fromhex(
        "0a01701001180222060a016b12017632017858036004980105c00106d2010175d80107e00108e80109"
    )


# -- the schema is Pulsar's -------------------------------------------------------------------


def _schema(message: type) -> dict[str, tuple[int, str, int, object]]:
    out = {}
    for fd in message.DESCRIPTOR.fields:  # type: ignore[attr-defined]
        label = "required" if fd.is_required else "repeated" if fd.is_repeated else "optional"
        default = fd.default_value if fd.has_default_value else None
        out[fd.name] = (fd.number, label, fd.type, default)
    return out


def test_pulsar_api_schema_matches_pulsar() -> None:
    from google.protobuf.descriptor import FieldDescriptor as F

    assert api.DESCRIPTOR.package == "pulsar.proto"
    assert _schema(api.MessageIdData) == {
        "ledgerId": (1, "required", F.TYPE_UINT64, None),
        "entryId": (2, "required", F.TYPE_UINT64, None),
        "partition": (3, "optional", F.TYPE_INT32, -1),
        "batch_index": (4, "optional", F.TYPE_INT32, -1),
        "ack_set": (5, "repeated", F.TYPE_INT64, None),
        "batch_size": (6, "optional", F.TYPE_INT32, None),
        "first_chunk_message_id": (7, "optional", F.TYPE_MESSAGE, None),
    }
    assert not api.MessageIdData.DESCRIPTOR.fields_by_name["ack_set"].is_packed
    assert _schema(api.KeyValue) == {
        "key": (1, "required", F.TYPE_STRING, None),
        "value": (2, "required", F.TYPE_STRING, None),
    }
    metadata = _schema(api.MessageMetadata)
    expected_metadata = {
        "producer_name": (1, "required", F.TYPE_STRING, None),
        "sequence_id": (2, "required", F.TYPE_UINT64, None),
        "publish_time": (3, "required", F.TYPE_UINT64, None),
        "properties": (4, "repeated", F.TYPE_MESSAGE, None),
        "partition_key": (6, "optional", F.TYPE_STRING, None),
        "num_messages_in_batch": (11, "optional", F.TYPE_INT32, 1),
        "event_time": (12, "optional", F.TYPE_UINT64, 0),
        "deliver_at_time": (19, "optional", F.TYPE_INT64, None),
        "highest_sequence_id": (24, "optional", F.TYPE_UINT64, 0),
        "uuid": (26, "optional", F.TYPE_STRING, None),
        "num_chunks_from_msg": (27, "optional", F.TYPE_INT32, None),
        "total_chunk_msg_size": (28, "optional", F.TYPE_INT32, None),
        "chunk_id": (29, "optional", F.TYPE_INT32, None),
        "compression": (8, "optional", F.TYPE_ENUM, 0),
        "uncompressed_size": (9, "optional", F.TYPE_UINT32, 0),
        "schema_version": (16, "optional", F.TYPE_BYTES, None),
        "ordering_key": (18, "optional", F.TYPE_BYTES, None),
        "null_value": (25, "optional", F.TYPE_BOOL, False),
    }
    assert {name: metadata[name] for name in expected_metadata} == expected_metadata


def test_base_command_types_are_pulsars() -> None:
    from google.protobuf.descriptor import FieldDescriptor as F

    types = api.BaseCommand.Type
    assert types.Value("CONNECT") == 2 and types.Value("SEND") == 6 and types.Value("MESSAGE") == 9
    assert types.Value("ACK_RESPONSE") == 38 and types.Value("TOPIC_MIGRATED") == 68
    # Every type but the first has its command message in the BaseCommand field of that number.
    fields = {fd.number: fd for fd in api.BaseCommand.DESCRIPTOR.fields}
    for value in api.BaseCommand.Type.DESCRIPTOR.values:
        assert fields[value.number].type == F.TYPE_MESSAGE, value.name
    assert _schema(api.CommandSend)["highest_sequence_id"] == (6, "optional", F.TYPE_UINT64, 0)
    assert _schema(api.CommandFlow)["messagePermits"] == (2, "required", F.TYPE_UINT32, None)
    assert _schema(api.CommandMessage)["ack_set"] == (4, "repeated", F.TYPE_INT64, None)
    assert not api.CommandMessage.DESCRIPTOR.fields_by_name["ack_set"].is_packed
