"""The record codec, like Kafka's `org.apache.kafka.common.record`: v2 record batches (`record_batch`)
and their records (`records`), legacy magic 0/1 message sets (`legacy_records`), the compression codecs
(`compression`), and the C record walk (`_record_walk.c`, loaded by `native_walk`). Pure: no I/O."""
