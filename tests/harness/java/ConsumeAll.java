// Kafka 3.9.1's own consumer (kafka-clients) reading one partition from offset 0: the Java side of the tiered-storage
// process tests (tests/integration/cluster/test_tiered_storage_s3.py). Launched as a single-file Java program with the
// jars of .cache/kafka-3.9.1/libs on the class path:
//   ConsumeAll <bootstrap> <topic> <expected records> <timeout s>
// Each record's value starts with its 8-digit sequence number (the tests' producers write "%08d" + padding). Prints
// "consumed <n> first <seq> last <seq> in_order <true|false>" and exits 0 when exactly <expected> records were read,
// offset i holding sequence number i; otherwise prints the first problem and exits 1.
import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ConsumeAll {
    public static void main(String[] args) {
        String bootstrap = args[0];
        TopicPartition tp = new TopicPartition(args[1], 0);
        long expected = Long.parseLong(args[2]);
        long deadline = System.nanoTime() + Long.parseLong(args[3]) * 1_000_000_000L;
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "1048576");
        long next = 0;
        boolean ok = true;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(props, new ByteArrayDeserializer(),
                                                                   new ByteArrayDeserializer())) {
            c.assign(List.of(tp));
            c.seek(tp, 0);
            while (next < expected && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    long seq = Long.parseLong(new String(r.value(), 0, 8));
                    if (r.offset() != next || seq != next) {
                        System.out.println("out_of_order offset " + r.offset() + " seq " + seq + " expected " + next);
                        ok = false;
                    }
                    next++;
                }
            }
            // nothing beyond the expected records
            if (next == expected && !c.poll(Duration.ofMillis(500)).isEmpty()) {
                System.out.println("extra records after " + expected);
                ok = false;
            }
        }
        System.out.println("consumed " + next + " in_order " + ok);
        System.exit(ok && next == expected ? 0 : 1);
    }
}
