"""Deprecated alias of :mod:`mledger.codec.proto.PulsarApi_pb2` (kept for one release; import from there)."""

from ..codec.proto.PulsarApi_pb2 import *  # noqa: F403
