#!/usr/bin/env bash
# Regenerate src/mledger/codec/proto/*_pb2.py(i) from proto/mledger/*.proto.
# This is the one place the protoc command lives: tests/test_proto_generated.py runs this script
# into a temporary directory and fails when a committed module differs from what it produces.
# Usage: [PYTHON=python] scripts/gen_proto.sh [OUT_DIR]   (default OUT_DIR: src/mledger/codec/proto)
# PYTHON must have grpcio-tools and mypy-protobuf (the [test] extra pins the versions the committed
# files came from). The type stubs (*_pb2.pyi) come from mypy-protobuf, not protoc's --pyi_out: protoc
# writes an enum value named after a Python keyword as an attribute (PulsarApi's Schema.Type.None),
# which is a syntax error in a stub, and resolves a nested enum value that shadows a message
# (Schema.Type.KeyValue vs the KeyValue message) to the wrong one; mypy-protobuf leaves keyword names
# out (they are reachable only through Value("None")) and qualifies every message reference.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
# protoc runs plugins as executables: mypy-protobuf's, installed beside the interpreter.
PLUGIN="$(dirname "$PYTHON")/protoc-gen-mypy"
[ -x "$PLUGIN" ] || PLUGIN="$(command -v protoc-gen-mypy)" || {
    echo "gen_proto.sh: protoc-gen-mypy not found (pip install mypy-protobuf)" >&2
    exit 1
}
OUT="${1:-src/mledger/codec/proto}"
mkdir -p "$OUT"

for proto in proto/mledger/*.proto; do
    # Paths relative to -Iproto/mledger keep the descriptor's file name bare ("X.proto").
    "$PYTHON" -m grpc_tools.protoc -Iproto/mledger --plugin=protoc-gen-mypy="$PLUGIN" \
        --python_out="$OUT" --mypy_out="$OUT" "$proto"
done
