"""The Spark side of the gateway: session, ingress source, stateful stage, query lifecycle, CLI."""
