"""The supervisor's pure part: which query failures a restart can fix, and the backoff between restarts."""

from __future__ import annotations

from streaming.supervisor import Backoff, FailureKind, classify, first_line


def test_infrastructure_failures_are_retried() -> None:
    for error in (
        "org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 4 times, "
        "most recent failure: ... ExecutorLostFailure (executor 1 exited caused by one of the running tasks)",
        "KafkaException: 10 messages to gateway.responses not delivered within 120 s",
        "java.io.IOException: No space left on device",
        "org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms expired before the position could be "
        "determined",
    ):
        assert classify(error) == (FailureKind.RETRYABLE, "")


def test_failures_a_restart_cannot_fix_stop_with_advice() -> None:
    kind, advice = classify("pyspark.errors.exceptions.captured.StreamingQueryException: [FOREACH_BATCH_USER_FUNC"
                            "TION_ERROR] ... storage.recovery.LogStateMismatchError: t-0: segment storage is "
                            "behind the Spark state")
    assert kind is FailureKind.FATAL and "restore" in advice
    kind, advice = classify("SharedStorageError: /mnt/segments is not visible from executor host w2")
    assert kind is FailureKind.FATAL and "every host" in advice
    assert classify("[STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE] ...")[0] is FailureKind.FATAL
    # a state store lock held by a lost executor's task is transient: restart
    assert classify("[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] ... RocksDB lock acquire timed out")[0] is FailureKind.RETRYABLE


def test_backoff_doubles_to_its_cap_and_resets() -> None:
    backoff = Backoff(initial_s=1.0, max_s=10.0)
    assert [backoff.next_delay() for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    backoff.reset()
    assert backoff.next_delay() == 1.0


def test_first_line_is_the_headline() -> None:
    assert first_line("\n  KafkaException: broker down\n\tat org.apache...\n") == "KafkaException: broker down"
    assert len(first_line("x" * 1000, limit=50)) == 50


def test_restart_causes_are_bounded_labels() -> None:
    from sinks.metrics.gateway_metrics import RESTART_CAUSES
    from streaming.supervisor import restart_cause

    assert restart_cause("Task failed ... ExecutorLostFailure (executor 1 exited)") == "executor_lost"
    assert restart_cause("KafkaException: 10 messages to r not delivered within 120 s") == "kafka"
    assert restart_cause("java.io.IOException: Read-only file system") == "storage_io"
    assert restart_cause("something else") == "other"
    assert {restart_cause(e) for e in ("ExecutorLost", "KafkaException", "OSError", "x")} == set(RESTART_CAUSES)


def test_first_line_finds_the_reason_in_a_python_proxy_trace() -> None:
    error = ("[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: An exception was raised by the "
             "Python Proxy. Return Message: Traceback (most recent call last):\n"
             '  File "x.py", line 1, in call\n'
             "pyspark.errors.exceptions.captured.PythonException: \n"
             "  An exception was thrown from the Python worker. Please see the stack trace below.\n"
             "Traceback (most recent call last):\n"
             "confluent_kafka.error.KafkaException: KafkaError{code=_MSG_TIMED_OUT,val=-192,str=\"Local: Message timed out\"}\n"
             "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:665)\n")
    assert first_line(error).startswith("confluent_kafka.error.KafkaException: KafkaError{code=_MSG_TIMED_OUT")


def test_refused_credentials_tls_and_missing_acls_stop_with_advice() -> None:
    """The Kafka source's Java exceptions and the sink's librdkafka errors (a revoked ACL, a rotated password)."""
    for error, advice in (
        ("org.apache.kafka.common.errors.SaslAuthenticationException: Authentication failed during authentication "
         "due to invalid credentials with SASL mechanism SCRAM-SHA-512", "kafka.sasl.password"),
        ("javax.net.ssl.SSLHandshakeException: PKIX path building failed", "kafka.ssl.ca.location"),
        ("org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access topics: [gw.ingress]",
         "`gateway acls`"),
        ('KafkaException: 3 deliveries to gateway.dlq failed, first: KafkaError{code=TOPIC_AUTHORIZATION_FAILED,'
         'val=29,str="Broker: Topic authorization failed"}', "`gateway acls`"),
    ):
        kind, text = classify(error)
        assert kind is FailureKind.FATAL and advice in text, (error, text)
