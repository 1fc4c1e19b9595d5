"""The gateway's wire contract, one definition each, pure (no Spark, no Kafka client, no I/O):
what producers put on the ingress topic (`ingress`) and the default topic names (`topics`).
Every side — the stage, the sinks, the clients, the demo and the DLQ tool — imports it from here.
"""
