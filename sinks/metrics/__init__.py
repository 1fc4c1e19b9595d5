"""Prometheus metrics of the gateway (docs/operations.md: metrics): the metric definitions (`gateway_metrics`), custom
collectors (`collectors`), the micro-batch observer (`observer`) and its log lines (`log_summary`,
`metrics_log_file`), and the HTTP endpoint (`server`).
"""
