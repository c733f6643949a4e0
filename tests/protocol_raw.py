"""A hand-driven Pulsar protocol client over a socket, for the protocol tests."""

from __future__ import annotations

import socket

from mledger.codec.proto import PulsarApi_pb2 as api
from mledger.protocol._codec import decode_command
from mledger.protocol._framing import FrameDecoder, encode_frame, encode_payload_frame

_T = api.BaseCommand


class RawClient:
    """A hand-driven protocol client over a socket."""

    def __init__(self, port: int, connect: bool = True, source: str | None = None, timeout: float = 5) -> None:
        """``source``: the local address to connect from (``127.0.0.2``: another loopback client)."""
        where = (source, 0) if source is not None else None
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=where)
        self.decoder = FrameDecoder()
        self.frames: list[tuple[api.BaseCommand, bytes | None]] = []
        if connect:
            self.send(_T(type=_T.CONNECT, connect=api.CommandConnect(client_version="raw", protocol_version=20)))
            assert self.next_command().type == _T.CONNECTED

    def send(self, cmd: api.BaseCommand, payload: bytes | None = None) -> None:
        data = cmd.SerializeToString()
        self.sock.sendall(encode_frame(data) if payload is None else encode_payload_frame(data, payload))

    def next_command(self) -> api.BaseCommand:
        while not self.frames:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by the server")
            self.frames += [(decode_command(c), p) for c, p in self.decoder.feed(data)]
        return self.frames.pop(0)[0]

    def next_command_with_payload(self) -> tuple[api.BaseCommand, bytes | None]:
        while not self.frames:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by the server")
            self.frames += [(decode_command(c), p) for c, p in self.decoder.feed(data)]
        return self.frames.pop(0)

    def is_closed_by_server(self) -> bool:
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()


def producer_command(topic: str, producer_id: int, request_id: int, mode: int = api.Shared) -> api.BaseCommand:
    """A PRODUCER command (access mode ``mode``)."""
    body = api.CommandProducer(topic=topic, producer_id=producer_id, request_id=request_id, producer_access_mode=mode)
    return _T(type=_T.PRODUCER, producer=body)


def subscribe_command(topic: str, subscription: str, consumer_id: int, request_id: int) -> api.BaseCommand:
    """A SUBSCRIBE command of a Shared subscription (creating the topic if missing)."""
    body = api.CommandSubscribe(
        topic=topic,
        subscription=subscription,
        subType=api.CommandSubscribe.Shared,
        consumer_id=consumer_id,
        request_id=request_id,
        force_topic_creation=True,
    )
    return _T(type=_T.SUBSCRIBE, subscribe=body)
