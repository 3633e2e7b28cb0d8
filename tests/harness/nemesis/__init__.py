"""The nemesis (issue 21): seeded random faults against a real ZooKeeper and 3 brokers, with a ledger audit.

Every node runs in its own network namespace on a bridge (:mod:`.netns`), every broker's log dir is a small tmpfs
of its own (:mod:`.disk`), the processes are started from ``bin/`` or from Kafka 3.9.1's jars (:mod:`.nodes`).
An idempotent acks=all producer (tests.harness.faults.ProduceLoad) and a read_committed consumer group
(:mod:`.ledger`) run throughout, and a transactional producer in a namespace of its own (:mod:`.txn_client`);
:mod:`.schedule` draws the faults from the seed, :mod:`.runner` injects, heals
and times them, :mod:`.audit` checks the ledgers against the log and prints the summary.

    python -m tests.harness.nemesis --seed 7 --duration 600 [--target ours|kafka]

Needs root (namespaces, veths, mounts), ``ip``, ``tc`` (tbf) and ``mount``; no netem, iptables or nft.
"""
