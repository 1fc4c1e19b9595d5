"""The embedded default of `make run` and the tests, outside the query package (no Spark here): a local
Apache Kafka broker (`local_kafka`) and demo traffic with a live summary (`demo`).
"""
