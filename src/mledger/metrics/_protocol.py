"""Prometheus metrics of a Pulsar protocol server (:class:`~mledger.protocol.ProtocolServer`).

Pulsar's broker-level names, each with the ``cluster`` label:

=====================================  =======  ============================================
name                                   type     what
=====================================  =======  ============================================
``pulsar_active_connections``          gauge    client connections open now
``pulsar_connection_created_total``    counter  connections accepted since the start
``pulsar_producers_count``             gauge    producers open now
``pulsar_consumers_count``             gauge    consumers open now
``pulsar_in_messages_total``           counter  messages received from producers
``pulsar_in_bytes_total``              counter  bytes of those messages (metadata and payload)
``pulsar_out_messages_total``          counter  messages delivered to consumers
``pulsar_out_bytes_total``             counter  bytes of the entries delivered
``pulsar_checksum_errors_total``       counter  SEND frames refused with ChecksumError
``pulsar_protocol_errors_total``       counter  connections closed for breaking the protocol
``mledger_tls_handshakes_in_progress``  gauge    TLS handshakes in progress now
``mledger_tls_handshakes_failed_total`` counter  TLS handshakes that failed or timed out
``mledger_connections_refused_total``  counter  connections over ``brokerMaxConnections(PerIp)``
``mledger_connections_timed_out_total`` counter connections closed for sending nothing in time
``mledger_accept_pauses_total``        counter  times a port stopped accepting (descriptors)
=====================================  =======  ============================================
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..protocol import ProtocolServer

__all__ = ["ProtocolCollector"]


class ProtocolCollector(Collector):
    """The counters of one protocol server, read when scraped (from any thread)."""

    def __init__(self, server: ProtocolServer, cluster: str = "standalone") -> None:
        self.server = server
        self.cluster = cluster

    def collect(self) -> Iterator[Metric]:
        s = self.server.stats()
        yield from _families(
            GaugeMetricFamily,
            self.cluster,
            ("pulsar_active_connections", "client connections open now", s.connections),
            ("pulsar_producers_count", "producers open now", s.producers),
            ("pulsar_consumers_count", "consumers open now", s.consumers),
            ("mledger_tls_handshakes_in_progress", "TLS handshakes in progress now", s.tls_handshakes_in_progress),
        )
        yield from _families(
            CounterMetricFamily,
            self.cluster,
            ("pulsar_connection_created", "connections accepted", s.connections_opened),
            ("pulsar_in_messages", "messages received from producers", s.messages_in),
            ("pulsar_in_bytes", "bytes received from producers", s.bytes_in),
            ("pulsar_out_messages", "messages delivered to consumers", s.messages_out),
            ("pulsar_out_bytes", "bytes delivered to consumers", s.bytes_out),
            ("pulsar_checksum_errors", "SEND frames refused with ChecksumError", s.checksum_errors),
            ("pulsar_protocol_errors", "connections closed for breaking the protocol", s.protocol_errors),
            ("mledger_tls_handshakes_failed", "TLS handshakes that failed or timed out", s.tls_handshakes_failed),
            ("mledger_connections_refused", "connections over brokerMaxConnections(PerIp)", s.connections_refused),
            ("mledger_connections_timed_out", "connections closed for sending nothing", s.connections_timed_out),
            ("mledger_accept_pauses", "times a port stopped accepting for want of descriptors", s.accept_pauses),
        )


def _families(
    family: type[GaugeMetricFamily | CounterMetricFamily], cluster: str, *rows: tuple[str, str, float]
) -> Iterator[Metric]:
    """One metric family of kind ``family`` per ``(name, help text, value)`` row, each with the
    ``cluster`` label."""
    for name, text, number in rows:
        metric = family(name, text, labels=["cluster"])
        metric.add_metric([cluster], number)
        yield metric
