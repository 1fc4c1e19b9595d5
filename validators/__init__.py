"""Pure core of the gateway: what a Kafka partition leader decides about a produce batch.

No pyspark, no I/O. What it follows: Kafka 4.x's `LogValidator` and record format, KIP-32 and KIP-937 (docs/design.md).
"""
