"""kafka-dump-log.sh: print the contents of log segments and their index files, as Kafka 3.9's DumpLogSegments.

    kafka-dump-log.sh --files 00000000000000000000.log[,00000000000000000000.index,...] [--print-data-log]
        [--deep-iteration] [--offsets-decoder | --transaction-log-decoder] [--skip-record-metadata]
        [--verify-index-only | --index-sanity-check] [--max-message-size N] [--max-bytes N]

Each file is dumped by its suffix: ``.log`` (and KRaft ``.checkpoint``) batch by batch (record by record with
``--deep-iteration``, which ``--print-data-log`` and every decoder option imply), ``.index`` and ``.timeindex``
entry by entry (checked against the segment's ``.log``), ``.snapshot`` (producer state) and ``.txnindex``
(aborted transactions) entry by entry; any other file is ignored with a line on stderr. Index mismatches,
time-index errors and non-consecutive offsets are summed up on stderr at the end, as Kafka does.

The batches, records, indexes, producer snapshots and transaction indexes are read with the broker's own code
(``broker.accel.record_batch``, ``broker.storage``); pre-0.11 (magic 0/1) entries, which old Kafka brokers
wrote, are read as Kafka reads them (a compressed wrapper's inner messages at absolute offsets).
``--remote-log-metadata-decoder`` prints ``__remote_log_metadata`` values as Kafka's RemoteLogMetadataSerde
decodes them (their toString()). ``--cluster-metadata-decoder`` is refused (this broker runs in ZooKeeper mode), as
are decoder classes other than Kafka's String/Integer/Long decoders. Where
Kafka's tool dies of an exception (a decoder meeting bytes it cannot read, a missing file), this one prints the
exception line the JVM prints and exits 1.
"""
from __future__ import annotations

import re
import struct
import sys
from pathlib import Path
from typing import Any, List, Optional, Sequence

from . import dump_log_decoders as decoders
from .command import tool_main
from .dump_log_batches import (INT_MAX, Batch, base_offset, batch_line, batches, control_text, java_bool,
                               read_file)
from .dump_log_indexes import (Problems, dump_index, dump_producer_snapshot, dump_time_index,
                               dump_txn_index)
from .options import OptionParser, Options

SUMMARY = ("This tool helps to parse a log file and dump its contents to the console, useful for debugging a "
           "seemingly corrupt log segment.")
_NO_REASON_KRAFT = "this broker runs in ZooKeeper mode and has no cluster metadata log"


def build_parser() -> OptionParser:
    p = OptionParser(SUMMARY)
    p.flag("print-data-log", "If set, printing the messages content when dumping data logs. Automatically set if "
                             "any decoder option is specified.")
    p.flag("verify-index-only", "If set, just verify the index log without printing its content.")
    p.flag("index-sanity-check", "If set, just checks the index sanity without printing its content. This is the "
                                 "same check that is executed on broker startup to determine if an index needs "
                                 "rebuilding or not.")
    p.arg("files", "REQUIRED: The comma separated list of data and index log files to be dumped.",
          "file1, file2, ...")
    p.arg("max-message-size", "Size of largest message.", "size", "Integer", default=5 * 1024 * 1024)
    p.arg("max-bytes", "Limit the amount of total batches read in bytes avoiding reading the whole .log file(s).",
          "size", "Integer", default=INT_MAX)
    p.flag("deep-iteration", "If set, uses deep instead of shallow iteration. Automatically set if print-data-log "
                             "is enabled.")
    p.arg("value-decoder-class", "If set, used to deserialize the messages. This class should implement "
                                 "org.apache.kafka.tools.api.Decoder trait. Custom jar should be available in "
                                 "kafka/libs directory.", default=decoders.STRING_DECODER, optional=True)
    p.arg("key-decoder-class", "If set, used to deserialize the keys. This class should implement "
                               "org.apache.kafka.tools.api.Decoder trait. Custom jar should be available in "
                               "kafka/libs directory.", default=decoders.STRING_DECODER, optional=True)
    p.flag("offsets-decoder", "If set, log data will be parsed as offset data from the __consumer_offsets topic.")
    p.flag("transaction-log-decoder", "If set, log data will be parsed as transaction metadata from the "
                                      "__transaction_state topic.")
    p.refuse("cluster-metadata-decoder", _NO_REASON_KRAFT,
             "If set, log data will be parsed as cluster metadata records.", argument="none")
    p.flag("remote-log-metadata-decoder", "If set, log data will be parsed as TopicBasedRemoteLogMetadataManager "
                                          "(RLMM) metadata records. Instead, the value-decoder-class option can be "
                                          "used if a custom RLMM implementation is configured.")
    p.flag("skip-record-metadata", "Whether to skip printing metadata for each record.")
    return p


class Settings:
    """The parsed options, with Kafka's implications (decoders imply printing, printing implies deep)."""

    def __init__(self, o: Options) -> None:
        self.opts = o
        self.print_data = any(o.has(n) for n in ("print-data-log", "offsets-decoder", "transaction-log-decoder",
                                                 "remote-log-metadata-decoder", "value-decoder-class",
                                                 "key-decoder-class"))
        self.deep = o.has("deep-iteration") or self.print_data
        self.skip_metadata = o.has("skip-record-metadata")
        self.verify_only = o.has("verify-index-only")
        self.sanity_only = o.has("index-sanity-check")
        self.files: List[str] = _java_split(o.value("files"))
        self.max_message_size: int = o.value("max-message-size")
        self.max_bytes: int = o.value("max-bytes")

    def message_parser(self) -> decoders.Parser:
        """Built anew for each log file, as Kafka's ``opts.messageParser`` (a def) is."""
        if self.opts.has("offsets-decoder"):
            return decoders.offsets_parser
        if self.opts.has("transaction-log-decoder"):
            return decoders.transaction_log_parser
        if self.opts.has("remote-log-metadata-decoder"):
            return decoders.remote_log_metadata_parser
        value = decoders.decoder(self.opts.value("value-decoder-class"))
        key = decoders.decoder(self.opts.value("key-decoder-class"))
        return decoders.decoder_parser(key, value)


def _java_split(text: str) -> List[str]:
    """String.split(","): trailing empty strings dropped."""
    parts = text.split(",")
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def _java_file_text(arg: str) -> str:
    """java.io.File's toString of a path: repeated and trailing separators dropped."""
    text = re.sub("/+", "/", arg)
    return text[:-1] if len(text) > 1 and text.endswith("/") else text


def print_record(b: Batch, record: Any, settings: Settings, parser: decoders.Parser) -> None:
    """One record's line, written piece by piece as Kafka prints it (a decoder that fails leaves the metadata
    printed)."""
    out = sys.stdout
    prefix = "| "
    is_control = b.info is not None and b.info.is_control
    if not settings.skip_metadata:
        key_size = -1 if record.key is None else len(record.key)
        value_size = -1 if record.value is None else len(record.value)
        out.write(f"{prefix}offset: {record.offset} {b.timestamp_type}: {record.timestamp} keySize: {key_size} "
                  f"valueSize: {value_size}")
        prefix = " "
        if b.info is not None:
            out.write(f" sequence: {record.sequence} headerKeys: [{','.join(k for k, _ in record.headers)}]")
        else:  # a legacy record: Kafka prints its validity and CRC (with a stray brace)
            out.write(f" isValid: {java_bool(record.valid)} crc: {record.crc}}}")
        if is_control:
            out.write(control_text(record))
    if settings.print_data and not is_control:
        try:
            key, payload = parser(record)
        except (struct.error, ValueError):
            out.flush()
            raise decoders.java_crash("java.nio.BufferUnderflowException") from None
        if key is not None:
            out.write(f"{prefix}key: {key}")
            prefix = " "
        if payload is not None:
            out.write(f" payload: {payload}")
    out.write("\n")


def dump_log(path: Path, settings: Settings, problems: Problems) -> None:
    parser = settings.message_parser()  # built (and deprecation lines printed) before the header, as Kafka does
    if path.name.endswith(".log"):
        print(f"Log starting offset: {base_offset(path)}")
    elif path.name == "bootstrap.checkpoint":
        print("KRaft bootstrap snapshot")
    else:
        m = re.fullmatch(r"(\d{20})-(\d{10})\.checkpoint", path.name)  # Kafka's Snapshots.parse
        if m is None:
            n = len(path.name)
            raise decoders.java_crash(f"java.lang.StringIndexOutOfBoundsException: begin 0, end 20, length {n}"
                                      if n < 20 else "java.util.NoSuchElementException: No value present")
        print(f"Snapshot end offset: {int(m.group(1))}, epoch: {int(m.group(2))}")
    data = read_file(path)
    end = min(len(data), settings.max_bytes)
    valid = 0
    last_offset = -1
    gaps = problems.non_consecutive
    for b in batches(data, 0, end, str(path)):
        print(batch_line(b, valid))
        if settings.deep:
            for record in b.records():
                if last_offset != -1 and record.offset != last_offset + 1:
                    gaps.setdefault(str(path.absolute()), []).append((last_offset, record.offset))
                last_offset = record.offset
                print_record(b, record, settings, parser)
        valid += b.size
    trailing = end - valid
    if trailing > 0 and settings.max_bytes == INT_MAX:
        print(f"Found {trailing} invalid bytes at the end of {path.name}")


def dump_file(arg: str, settings: Settings, problems: Problems) -> None:
    path = Path(arg)
    print(f"Dumping {_java_file_text(arg)}")
    if "." not in path.name:
        n = len(path.name)
        raise decoders.java_crash(f"java.lang.StringIndexOutOfBoundsException: begin -1, end {n}, length {n}")
    suffix = path.name[path.name.rfind("."):]
    if suffix in (".log", ".checkpoint"):
        dump_log(path, settings, problems)
    elif suffix == ".index":
        dump_index(path, settings, problems)
    elif suffix == ".timeindex":
        dump_time_index(path, settings, problems)
    elif suffix == ".snapshot":
        dump_producer_snapshot(path)
    elif suffix == ".txnindex":
        dump_txn_index(path)
    else:
        print(f"Ignoring unknown file {arg}", file=sys.stderr)


def _run(argv: Sequence[str], parser: OptionParser) -> int:
    o = parser.parse(argv)
    parser.check_required(o, "files")
    settings = Settings(o)
    problems = Problems()
    for arg in settings.files:
        try:
            dump_file(arg, settings, problems)
        except FileNotFoundError as e:
            raise decoders.java_crash(f"java.nio.file.NoSuchFileException: {e.filename}") from None
    sys.stdout.flush()
    problems.print()  # only when every file was dumped: Kafka's tool prints them after its loop
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    return tool_main(build_parser, _run, argv)


if __name__ == "__main__":
    sys.exit(main())
