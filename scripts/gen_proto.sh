#!/usr/bin/env bash
# Regenerate src/mledger/codec/proto/*_pb2.py(i) from proto/mledger/*.proto.
# This is the one place the protoc command lives: tests/test_proto_generated.py runs this script
# into a temporary directory and fails when a committed module differs from what it produces.
# Usage: [PYTHON=python] scripts/gen_proto.sh [OUT_DIR]   (default OUT_DIR: src/mledger/codec/proto)
# PYTHON must have grpcio-tools (the [test] extra pins the version the committed files came from).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PYTHON" ] || PYTHON=python3
OUT="${1:-src/mledger/codec/proto}"
mkdir -p "$OUT"

for proto in proto/mledger/*.proto; do
    # Paths relative to -Iproto/mledger keep the descriptor's file name bare ("X.proto").
    "$PYTHON" -m grpc_tools.protoc -Iproto/mledger --python_out="$OUT" --pyi_out="$OUT" "$proto"
done
