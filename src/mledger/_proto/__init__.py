"""Deprecated alias of :mod:`mledger.codec.proto`, the generated protobuf modules (kept for one release)."""
