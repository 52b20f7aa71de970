"""Prometheus metrics of one service process (text format at GET /metrics)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("context_editor_requests", "HTTP requests by route template and status",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("context_editor_request_seconds", "HTTP request latency by route template",
                                 ["method", "route"], buckets=_BUCKETS, registry=self.registry)
        self.ingest = Histogram("context_editor_ingest_seconds", "Time to process one message (extract to commit)",
                                buckets=_BUCKETS, registry=self.registry)
        self.render = Histogram("context_editor_render_seconds", "Time to render one action context",
                                buckets=_BUCKETS, registry=self.registry)
        self.messages = Counter("context_editor_messages", "Messages added (retried duplicates not counted)",
                                registry=self.registry)

    def text(self) -> bytes:
        return generate_latest(self.registry)
