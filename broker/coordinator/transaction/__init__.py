"""Transaction coordinator (exactly-once producers).

``records`` owns the ``__transaction_state`` record formats, ``metadata`` one transactional id's states and
transitions, ``state`` the pure coordinator of one ``__transaction_state`` partition, ``marker_channel`` the
WriteTxnMarkers sender, and ``service`` routes transactional ids to partitions and does the I/O.
"""
