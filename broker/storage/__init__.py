"""Kafka's on-disk log: segments, indexes, checkpoints, producer state and the LogManager.

Storage knows nothing about requests. It never imports broker.protocol (except
broker.protocol.records), broker.api or broker.network, and never uses asyncio: callers run
its methods on worker threads, and each Log guards its state with one lock.
"""
