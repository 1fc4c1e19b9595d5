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
                            "TION_ERROR] ... sinks.storage.recovery.LogStateMismatchError: t-0: segment storage is "
                            "behind the Spark state")
    assert kind is FailureKind.FATAL and "restore" in advice
    kind, advice = classify("SharedStorageError: /mnt/segments is not visible from executor host w2")
    assert kind is FailureKind.FATAL and "every host" in advice
    assert classify("[STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE] ...")[0] is FailureKind.FATAL


def test_backoff_doubles_to_its_cap_and_resets() -> None:
    backoff = Backoff(initial_s=1.0, max_s=10.0)
    assert [backoff.next_delay() for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    backoff.reset()
    assert backoff.next_delay() == 1.0


def test_first_line_is_the_headline() -> None:
    assert first_line("\n  KafkaException: broker down\n\tat org.apache...\n") == "KafkaException: broker down"
    assert len(first_line("x" * 1000, limit=50)) == 50
