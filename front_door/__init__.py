"""The Kafka front door (docs/kafka-compatibility.md): a Kafka-protocol listener in front of the gateway, so any Kafka
client produces to it and consumes from its segment storage unchanged. The protocol types come from
`kio` (Apache Kafka's own message JSON, generated); this package holds only what the gateway answers.
"""
