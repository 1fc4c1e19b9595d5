"""The dead-letter topic (docs/design.md: dead-letter topic): writing dead letters (`dead_letters`, in the sink's tasks), reading
them back (`format`, `reader`), selecting and summarising (`report`), replaying (`replay`), output
(`render`, `times`) and the `dlq` command (`cli`).
"""
