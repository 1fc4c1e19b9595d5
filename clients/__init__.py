"""Clients of the ingest gateway: a producer that speaks the ingress/response contract (docs/design.md: ingress topic; docs/design.md: response topic)
and a consumer over its segment storage, both shaped like Kafka's own clients."""

from clients.consumer import ConsumerRecord, GatewayConsumer, OffsetAndTimestamp, TopicPartition
from clients.errors import GatewayError, KafkaTimeoutError, RecordError, RecordTooLargeError, TransportError
from clients.producer import GatewayProducer, ProducerConfig
from clients.record_metadata import RecordMetadata

__all__ = [
    "ConsumerRecord",
    "GatewayConsumer",
    "GatewayError",
    "GatewayProducer",
    "KafkaTimeoutError",
    "OffsetAndTimestamp",
    "ProducerConfig",
    "RecordError",
    "RecordMetadata",
    "RecordTooLargeError",
    "TopicPartition",
    "TransportError",
]
