"""kafka-run-class.sh: run a tool by Kafka's class name, as Kafka's script runs a Java main class.

    kafka-run-class.sh kafka.admin.ConfigCommand --bootstrap-server localhost:9092 --describe --entity-type brokers
    kafka-run-class.sh org.apache.kafka.tools.GetOffsetShell --bootstrap-server localhost:9092 --topic t

Kafka 3.9's class names (and their older ``kafka.tools``/``kafka.admin`` names) of the tools this project has map
to its modules (``CLASSES``); ``kafka.Kafka`` starts the broker. Kafka's launcher options ``-name <n>`` and
``-loggc`` before the class are accepted and ignored (no JVM here); ``-daemon`` is refused with its reason. Any
other class prints one line naming the classes available and exits 1.
"""
from __future__ import annotations

import importlib
import sys
from typing import Dict, List, Optional, Sequence

from tools import invoked_as, missing_module_line

#: Kafka class name -> module whose main(argv) runs it
CLASSES: Dict[str, str] = {
    "org.apache.kafka.tools.TopicCommand": "tools.cli.topics",
    "kafka.admin.TopicCommand": "tools.cli.topics",
    "kafka.tools.ConsoleProducer": "tools.cli.console_producer",
    "org.apache.kafka.tools.consumer.ConsoleConsumer": "tools.cli.console_consumer",
    "kafka.tools.ConsoleConsumer": "tools.cli.console_consumer",
    "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand": "tools.cli.consumer_groups",
    "kafka.admin.ConsumerGroupCommand": "tools.cli.consumer_groups",
    "kafka.admin.ConfigCommand": "tools.cli.configs",
    "org.apache.kafka.tools.GetOffsetShell": "tools.cli.get_offsets",
    "kafka.tools.GetOffsetShell": "tools.cli.get_offsets",
    "org.apache.kafka.tools.DeleteRecordsCommand": "tools.cli.delete_records",
    "kafka.admin.DeleteRecordsCommand": "tools.cli.delete_records",
    "kafka.admin.BrokerApiVersionsCommand": "tools.cli.broker_api_versions",
    "org.apache.kafka.tools.ProducerPerformance": "tools.cli.producer_perf_test",
    "kafka.tools.ProducerPerformance": "tools.cli.producer_perf_test",
    "org.apache.kafka.tools.ConsumerPerformance": "tools.cli.consumer_perf_test",
    "kafka.tools.ConsumerPerformance": "tools.cli.consumer_perf_test",
    "kafka.Kafka": "broker.__main__",
}
#: Kafka's usage line, naming the script as invoked ($0): kafka-run-class.sh, or the console script kafka-run-class
USAGE = "USAGE: {prog} [-daemon] [-name servicename] [-loggc] classname [opts]"


def main(argv: Optional[Sequence[str]] = None) -> int:
    args: List[str] = list(sys.argv[1:] if argv is None else argv)
    while args and args[0] in ("-name", "-loggc", "-daemon"):
        flag = args.pop(0)
        if flag == "-daemon":
            print("-daemon is not supported by this broker's tools: kafka-run-class.sh runs tools in the foreground "
                  "(start the broker in the background with bin/kafka-server-start.sh -daemon)", file=sys.stderr)
            return 1
        if flag == "-name" and args:
            args.pop(0)
    if not args:
        print(USAGE.format(prog=invoked_as("tools.cli.run_class")), file=sys.stderr)
        return 1
    cls, rest = args[0], args[1:]
    module = CLASSES.get(cls)
    if module is None:
        known = ", ".join(sorted(CLASSES))
        print(f"{cls} is not available in this broker's tools (Java classes cannot run here); the classes "
              f"kafka-run-class.sh runs are: {known}", file=sys.stderr)
        return 1
    try:
        return int(importlib.import_module(module).main(rest) or 0)
    except ModuleNotFoundError as e:
        print(missing_module_line(e, invoked_as("tools.cli.run_class")), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
