"""Segment storage in Apache Kafka's format, shaped like Kafka's storage module (docs/design.md: segment storage).

- `file_names` (Kafka's `LogFileUtils`), `errors` (`KafkaStorageError`);
- `index` (`AbstractIndex`), `offset_index`, `time_index`, and the gateway's `append_time_index`;
- `log_config` (segment settings), `file_records` (batches in a `.log` and their writes), `segment` (`LogSegment`), `commit_record` (the per-partition commit), `partition_lock`, `crash_point`;
- `recovery` (Kafka's `LogLoader`: it opens the files, the log never calls back), `segment_recovery`
  (one segment's `LogSegment.recover` and `truncateTo`), `partition_log`
  (`UnifiedLog` for one target partition: append, roll, commit, close), `batch_appender` (one micro-batch's
  appends, exactly once), `open_logs` (logs kept open between micro-batches), `retention`;
- `segment_reader` (a committed segment, checked), `log_reader` (records and ListOffsets), `verify`,
  and the `segments` command (`cli`).
"""
