"""The Kafka APIs the front door answers, one file per API named for it (Kafka's `KafkaApis`, franz-go's
`kfake`): each declares its key, versions and access (`registry.py`) beside its handler."""
