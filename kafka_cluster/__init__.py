"""The gateway's connection to its backing Kafka cluster: security settings (`security.py`), admin calls
(`admin.py`), the publisher of responses and dead letters (`publisher.py`), the start-up access check
(`access.py`), the client libraries' log (`client_log.py`) and the topic registry stored there
(`registry_store.py`)."""
