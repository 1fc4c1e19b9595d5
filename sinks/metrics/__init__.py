"""Prometheus metrics of the gateway (DESIGN §4.6): the metric definitions (`gateway_metrics`), custom
collectors (`collectors`), the micro-batch observer (`observer`) and the HTTP endpoint (`server`).
"""
