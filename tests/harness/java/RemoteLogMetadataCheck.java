// Kafka 3.9.1's own serde run on this project's __remote_log_metadata values (the oracle of
// tests/integration/storage/test_remote_log_metadata_kafka.py). Launched as a single-file Java program with the jars
// of .cache/kafka-3.9.1/libs on the class path. For each argument:
//   value:<hex>                       -> "value <toString of RemoteLogMetadataSerde.deserialize> reserialized:<hex>"
//   partition:<topic id>:<p>:<count>  -> "partition <RemoteLogMetadataTopicPartitioner.metadataPartition>"
//   murmur2:<hex>                     -> "murmur2 <Utils.murmur2>"
// A value Kafka cannot decode prints "error <exception>" and the program exits 1 at the end.
import java.util.HexFormat;

import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.server.log.remote.metadata.storage.RemoteLogMetadataTopicPartitioner;
import org.apache.kafka.server.log.remote.metadata.storage.serialization.RemoteLogMetadataSerde;
import org.apache.kafka.server.log.remote.storage.RemoteLogMetadata;

public class RemoteLogMetadataCheck {
    public static void main(String[] args) {
        RemoteLogMetadataSerde serde = new RemoteLogMetadataSerde();
        HexFormat hex = HexFormat.of();
        boolean failed = false;
        for (String arg : args) {
            try {
                if (arg.startsWith("value:")) {
                    RemoteLogMetadata md = serde.deserialize(hex.parseHex(arg.substring(6)));
                    System.out.println("value " + md + " reserialized:" + hex.formatHex(serde.serialize(md)));
                } else if (arg.startsWith("partition:")) {
                    String[] p = arg.split(":");
                    TopicIdPartition tip = new TopicIdPartition(Uuid.fromString(p[1]),
                            new TopicPartition("t", Integer.parseInt(p[2])));
                    System.out.println("partition " + new RemoteLogMetadataTopicPartitioner(Integer.parseInt(p[3]))
                            .metadataPartition(tip));
                } else if (arg.startsWith("murmur2:")) {
                    System.out.println("murmur2 " + Utils.murmur2(hex.parseHex(arg.substring(8))));
                } else {
                    throw new IllegalArgumentException("unknown argument " + arg);
                }
            } catch (Exception e) {
                System.out.println("error " + e);
                failed = true;
            }
        }
        System.exit(failed ? 1 : 0);
    }
}
