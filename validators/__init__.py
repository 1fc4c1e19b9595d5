"""Pure core of the gateway: what a Kafka partition leader decides about a produce batch.

No pyspark, no I/O. See ../shared/reference/kafka-broker-semantics.md §1-§4.
"""
