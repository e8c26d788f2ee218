"""Thin asyncio runtime: informers, work queues, Lease leader election."""
