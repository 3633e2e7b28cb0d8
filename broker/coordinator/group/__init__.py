"""Group coordinator for the classic consumer-group protocol.

``state`` is the pure state machine (no asyncio, no I/O, clock passed in), ``records`` owns the
``__consumer_offsets`` record formats, ``service`` routes groups to partitions and does the I/O.
"""
