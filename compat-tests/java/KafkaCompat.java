/*
 * Compatibility harness: drives the stock Java client (kafka-clients) against a broker and prints what it saw.
 *
 * Usage: java -cp <classpath> KafkaCompat <scenarios> <bootstrap> <topic-prefix>
 *   <scenarios> is a comma-separated list so that one JVM start serves several scenarios:
 *     admin                     Admin createTopics/describeCluster/describeTopics/listOffsets/describeConfigs/deleteTopics
 *     produce-consume[:<codec>] idempotent KafkaProducer (Java defaults) + KafkaConsumer without group.id
 *                               (assign + seekToBeginning/seekToEnd/position + seek + poll, and a re-read from
 *                               the middle of a partition, as Spark's Kafka source does); codec defaults to lz4
 *     group                     two KafkaConsumers (classic group.protocol) subscribe to one 6-partition topic:
 *                               disjoint assignments covering every partition, commitSync, then a restarted
 *                               consumer resumes from the committed offsets (nothing lost, nothing repeated)
 *     cluster-describe          (a multi-broker cluster) describeCluster with racks, a 3-partition RF=3 topic and its
 *                               leaders, replicas and ISRs as describeTopics reports them
 *     cluster-produce           idempotent acks=all KafkaProducer over ~15 s, printing {"step":"ready"} first so the
 *                               caller can kill or stop a leader meanwhile; then every acknowledged record is read
 *                               back (assign + seekToBeginning) and checked: exactly once, in offset order
 *     cluster-group             one group consumer with commitSync after each poll while records arrive; prints the
 *                               group's coordinator in {"step":"ready"} so the caller can kill it; then counts what
 *                               it consumed (every record at least once, duplicates only around the failover)
 *     txn-basic                 transactional KafkaProducer: initTransactions, one transaction of 30 records over 3
 *                               partitions, commitTransaction; read back with read_committed and read_uncommitted
 *     txn-abort                 five transactions, the 2nd and 4th aborted: read_committed sees the committed records
 *                               only, in order, read_uncommitted sees every record
 *     txn-fence                 a second producer with the same transactional.id fences the first while its
 *                               transaction is open: the first's commitTransaction throws, its records are aborted
 *     txn-ctp                   consume-transform-produce: a read_committed group consumer feeds a transactional
 *                               producer that commits its offsets with sendOffsetsToTransaction(offsets,
 *                               groupMetadata); the 3rd transaction is aborted and replayed from the committed offsets
 *     txn-timeout[:<ms>]        a transaction left open past its transaction.timeout.ms (default 3000): the coordinator
 *                               aborts it (DescribeTransactions shows the bumped epoch); the producer's next send
 *                               fails, abortTransaction recovers it (KIP-588) and its next transaction commits; then
 *                               a new producer with the same transactional.id commits too. The topic has RF = the
 *                               number of brokers (at most 3), so it also runs on a cluster
 *   Each scenario uses its own topic: <topic-prefix>-<scenario with ':' replaced by '-'>.
 *
 * Output: one JSON object per line on stdout, always with "scenario" and "step". The pytest side asserts on them;
 * this harness only reports facts (plus a self-check of consumed records against what was sent). A scenario stops
 * when a step it cannot go on without fails, ending with {"step":"done","ok":false,"error":...}; other steps report
 * their own exception as {"step":<name>,"error":...} and the scenario goes on ("done" then has "ok":false).
 * Exit status: 0 when every scenario finished, 1 otherwise, 2 on bad usage.
 */
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class KafkaCompat {
    static final long TIMEOUT_S = 30;
    static final int N_RECORDS = 2000;
    static final long ADMIN_BASE_TS = 1_700_000_000_000L;

    public static void main(String[] args) {
        if (args.length != 3) {
            System.err.println("usage: KafkaCompat <scenario[,scenario...]> <bootstrap> <topic-prefix>");
            System.exit(2);
        }
        String bootstrap = args[1];
        int failures = 0;
        for (String scenario : args[0].split(",")) {
            Out out = new Out(scenario);
            String topic = args[2] + "-" + scenario.replace(':', '-');
            long t0 = System.nanoTime();
            try {
                String[] parts = scenario.split(":", 2);
                switch (parts[0]) {
                    case "admin":
                        admin(out, bootstrap, topic);
                        break;
                    case "produce-consume":
                        produceConsume(out, bootstrap, topic, parts.length > 1 ? parts[1] : "lz4");
                        break;
                    case "group":
                        group(out, bootstrap, topic);
                        break;
                    case "cluster-describe":
                        clusterDescribe(out, bootstrap, topic);
                        break;
                    case "cluster-produce":
                        clusterProduce(out, bootstrap, topic);
                        break;
                    case "cluster-group":
                        clusterGroup(out, bootstrap, topic);
                        break;
                    case "txn-basic":
                        txnBasic(out, bootstrap, topic);
                        break;
                    case "txn-abort":
                        txnAbort(out, bootstrap, topic);
                        break;
                    case "txn-fence":
                        txnFence(out, bootstrap, topic);
                        break;
                    case "txn-ctp":
                        txnConsumeTransformProduce(out, bootstrap, topic);
                        break;
                    case "txn-timeout":
                        txnTimeout(out, bootstrap, topic, parts.length > 1 ? Integer.parseInt(parts[1]) : 3000);
                        break;
                    default:
                        throw new IllegalArgumentException("unknown scenario " + scenario);
                }
                if (out.failedSteps > 0) {
                    failures++;
                }
                out.emit("done", "ok", out.failedSteps == 0, "failed_steps", out.failedSteps,
                    "elapsed_ms", (System.nanoTime() - t0) / 1_000_000);
            } catch (Throwable e) {
                failures++;
                out.emit("done", "ok", false, "error", describe(e), "elapsed_ms", (System.nanoTime() - t0) / 1_000_000);
            }
        }
        System.out.flush();
        System.exit(failures == 0 ? 0 : 1);
    }

    // ---------------------------------------------------------------- admin

    static void admin(Out out, String bootstrap, String topic) throws Exception {
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            Map<String, String> configs = new LinkedHashMap<>();
            configs.put("retention.ms", "3600000");
            configs.put("cleanup.policy", "delete");
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1).configs(configs)))
                .all().get(TIMEOUT_S, TimeUnit.SECONDS);
            out.emit("createTopics", "topic", topic);

            out.step("createTopicsAgain", () -> {
                String again;
                try {
                    admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get(10, TimeUnit.SECONDS);
                    again = null;
                } catch (ExecutionException e) {
                    again = e.getCause().getClass().getSimpleName();
                }
                out.emit("createTopicsAgain", "exception", again);
            });
            out.step("describeCluster", () -> describeCluster(out, admin));
            out.step("listTopics", () -> out.emit("listTopics", "names",
                new ArrayList<>(new java.util.TreeSet<>(admin.listTopics().names().get(TIMEOUT_S, TimeUnit.SECONDS)))));
            out.step("describeTopics", () -> describeTopic(out, admin, topic));
            out.step("produce", () -> produceTimestamped(out, bootstrap, topic));
            listOffsets(out, admin, topic);
            out.step("describeConfigs", () -> describeConfigs(out, admin, topic));
            out.step("deleteTopics", () -> deleteTopic(out, admin, topic));
        }
    }

    static void describeCluster(Out out, Admin admin) throws Exception {
        DescribeClusterResult dc = admin.describeCluster();
        List<Object> nodes = new ArrayList<>();
        for (Node n : dc.nodes().get(TIMEOUT_S, TimeUnit.SECONDS)) {
            nodes.add(map("id", n.id(), "host", n.host(), "port", n.port()));
        }
        Node controller = dc.controller().get(TIMEOUT_S, TimeUnit.SECONDS);
        out.emit("describeCluster", "clusterId", dc.clusterId().get(TIMEOUT_S, TimeUnit.SECONDS),
            "nodes", nodes, "controller", controller == null ? null : controller.id());
    }

    static void describeTopic(Out out, Admin admin, String topic) throws Exception {
        TopicDescription td = admin.describeTopics(List.of(topic)).allTopicNames()
            .get(TIMEOUT_S, TimeUnit.SECONDS).get(topic);
        List<Object> parts = new ArrayList<>();
        for (TopicPartitionInfo p : td.partitions()) {
            parts.add(map("partition", p.partition(), "leader", p.leader() == null ? null : p.leader().id(),
                "replicas", ids(p.replicas()), "isr", ids(p.isr())));
        }
        out.emit("describeTopics", "name", td.name(), "internal", td.isInternal(),
            "topicId", td.topicId() == null ? null : td.topicId().toString(), "partitions", parts);
    }

    /** Ten records in partition 0 with timestamps base, base+1000, ..., base+9000. */
    static void produceTimestamped(Out out, String bootstrap, String topic) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(producerProps(bootstrap, "none"))) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                fs.add(p.send(new ProducerRecord<>(topic, 0, ADMIN_BASE_TS + i * 1000L,
                    bytes("k" + i), bytes("v" + i))));
            }
            p.flush();
            List<Object> offsets = new ArrayList<>();
            for (Future<RecordMetadata> f : fs) {
                offsets.add(f.get(TIMEOUT_S, TimeUnit.SECONDS).offset());
            }
            out.emit("produce", "base_ts", ADMIN_BASE_TS, "offsets", offsets);
        }
    }

    static void listOffsets(Out out, Admin admin, String topic) {
        TopicPartition tp0 = new TopicPartition(topic, 0);
        Map<String, OffsetSpec> specs = new LinkedHashMap<>();
        specs.put("earliest", OffsetSpec.earliest());
        specs.put("latest", OffsetSpec.latest());
        specs.put("forTimestamp(base+3500)", OffsetSpec.forTimestamp(ADMIN_BASE_TS + 3500));
        specs.put("forTimestamp(base+4000)", OffsetSpec.forTimestamp(ADMIN_BASE_TS + 4000));
        specs.put("forTimestamp(base-1)", OffsetSpec.forTimestamp(ADMIN_BASE_TS - 1));
        specs.put("forTimestamp(base+100000)", OffsetSpec.forTimestamp(ADMIN_BASE_TS + 100_000));
        specs.put("maxTimestamp", OffsetSpec.maxTimestamp());
        TopicPartition tp1 = new TopicPartition(topic, 1);
        List<Object[]> queries = new ArrayList<>();
        for (Map.Entry<String, OffsetSpec> e : specs.entrySet()) {
            queries.add(new Object[] {tp0, e.getKey(), e.getValue()});
        }
        queries.add(new Object[] {tp1, "latest", OffsetSpec.latest()});
        for (Object[] q : queries) {
            TopicPartition tp = (TopicPartition) q[0];
            out.step("listOffsets", () -> {
                ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, (OffsetSpec) q[2]))
                    .partitionResult(tp).get(TIMEOUT_S, TimeUnit.SECONDS);
                out.emit("listOffsets", "partition", tp.partition(), "spec", q[1], "offset", info.offset(),
                    "timestamp", info.timestamp(), "leaderEpoch", info.leaderEpoch().orElse(null));
            }, "partition", tp.partition(), "spec", q[1]);
        }
    }

    static void describeConfigs(Out out, Admin admin, String topic) throws Exception {
        ConfigResource topicRes = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        ConfigResource brokerRes = new ConfigResource(ConfigResource.Type.BROKER, "0");
        Map<ConfigResource, Config> cfgs = admin.describeConfigs(List.of(topicRes, brokerRes))
            .all().get(TIMEOUT_S, TimeUnit.SECONDS);
        out.emit("describeConfigs", "resource", "topic", "entries", entries(cfgs.get(topicRes)));
        out.emit("describeConfigs", "resource", "broker", "entries", entries(cfgs.get(brokerRes)));
    }

    static void deleteTopic(Out out, Admin admin, String topic) throws Exception {
        admin.deleteTopics(List.of(topic)).all().get(TIMEOUT_S, TimeUnit.SECONDS);
        boolean gone = false;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        while (!gone && System.nanoTime() < deadline) {
            gone = !admin.listTopics().names().get(TIMEOUT_S, TimeUnit.SECONDS).contains(topic);
            if (!gone) {
                Thread.sleep(100);
            }
        }
        out.emit("deleteTopics", "gone", gone);
    }

    static Map<String, Object> entries(Config config) {
        Map<String, Object> m = new TreeMap<>();
        if (config == null) {
            return m;
        }
        for (ConfigEntry e : config.entries()) {
            m.put(e.name(), map("value", e.value(), "source", e.source().name(), "readOnly", e.isReadOnly(),
                "sensitive", e.isSensitive()));
        }
        return m;
    }

    // ---------------------------------------------------------------- produce-consume

    /** The canonical line of record i, hashed by both sides (pytest recomputes it) into the checksum. */
    static String canonical(int i, byte[] key, byte[] value, Iterable<Header> headers, long ts) {
        StringBuilder sb = new StringBuilder();
        sb.append(i).append('|').append(str(key)).append('|').append(value == null ? "<null>" : str(value)).append('|');
        for (Header h : headers) {
            sb.append(h.key()).append('=').append(h.value() == null ? "<null>" : str(h.value())).append(';');
        }
        return sb.append('|').append(ts).append('\n').toString();
    }

    static byte[] valueOf(int i) {
        return i % 97 == 0 ? null : bytes("value-" + i + "-" + "x".repeat(i % 50));
    }

    static List<Header> headersOf(int i) {
        if (i % 3 != 0) {
            return List.of();
        }
        return List.of(new RecordHeader("h1", bytes("v" + i)), new RecordHeader("empty", new byte[0]));
    }

    static void produceConsume(Out out, String bootstrap, String topic, String codec) throws Exception {
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all().get(TIMEOUT_S, TimeUnit.SECONDS);
        }
        out.emit("createTopics", "topic", topic);

        long baseTs = System.currentTimeMillis() - 100_000;
        Map<TopicPartition, Map<Long, Integer>> sent = new HashMap<>();
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(producerProps(bootstrap, codec))) {
            List<Future<RecordMetadata>> fs = new ArrayList<>(N_RECORDS);
            for (int i = 0; i < N_RECORDS; i++) {
                fs.add(p.send(new ProducerRecord<>(topic, null, baseTs + i, bytes("key-" + i), valueOf(i),
                    headersOf(i))));
            }
            p.flush();
            for (int i = 0; i < N_RECORDS; i++) {
                RecordMetadata md = fs.get(i).get(TIMEOUT_S, TimeUnit.SECONDS);
                sent.computeIfAbsent(new TopicPartition(topic, md.partition()), k -> new HashMap<>())
                    .put(md.offset(), i);
            }
        }
        Map<String, Object> perPartition = new TreeMap<>();
        for (Map.Entry<TopicPartition, Map<Long, Integer>> e : sent.entrySet()) {
            perPartition.put(String.valueOf(e.getKey().partition()), e.getValue().size());
        }
        out.emit("produce", "codec", codec, "count", N_RECORDS, "base_ts", baseTs, "per_partition", perPartition);

        Properties cp = secured();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");  // Spark's executors: every position is explicit
        cp.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        cp.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");

        List<TopicPartition> tps = new ArrayList<>();
        for (int p = 0; p < 3; p++) {
            tps.add(new TopicPartition(topic, p));
        }
        CRC32 crc = new CRC32();
        int consumed = 0;
        int mismatches = 0;
        int duplicates = 0;
        List<Object> samples = new ArrayList<>();
        String[] lines = new String[N_RECORDS];
        Map<Integer, Long> nextOffset = new TreeMap<>();
        boolean dense = true;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp)) {
            c.assign(tps);
            Map<String, Object> positions = new TreeMap<>();
            c.seekToBeginning(tps);
            for (TopicPartition tp : tps) {
                positions.put(tp.partition() + ":earliest", c.position(tp, java.time.Duration.ofSeconds(TIMEOUT_S)));
            }
            c.seekToEnd(tps);
            for (TopicPartition tp : tps) {
                positions.put(tp.partition() + ":latest", c.position(tp, java.time.Duration.ofSeconds(TIMEOUT_S)));
            }
            out.emit("positions", "positions", positions);
            for (TopicPartition tp : tps) {
                c.seek(tp, 0);
                nextOffset.put(tp.partition(), 0L);
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (consumed < N_RECORDS && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(java.time.Duration.ofMillis(500));
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    consumed++;
                    if (r.offset() != nextOffset.get(r.partition())) {
                        dense = false;
                    }
                    nextOffset.put(r.partition(), r.offset() + 1);
                    Integer i = sent.getOrDefault(new TopicPartition(topic, r.partition()), Map.of()).get(r.offset());
                    String problem = null;
                    if (i == null) {
                        problem = "unexpected offset";
                    } else if (lines[i] != null) {
                        duplicates++;
                        problem = "duplicate";
                    } else {
                        lines[i] = canonical(i, r.key(), r.value(), r.headers(), r.timestamp());
                        String want = canonical(i, bytes("key-" + i), valueOf(i), headersOf(i), baseTs + i);
                        if (!want.equals(lines[i])) {
                            problem = "content differs: want " + want.trim() + " got " + lines[i].trim();
                        } else if (r.timestampType() != TimestampType.CREATE_TIME) {
                            problem = "timestampType " + r.timestampType();
                        }
                    }
                    if (problem != null) {
                        mismatches++;
                        if (samples.size() < 5) {
                            samples.add(map("partition", r.partition(), "offset", r.offset(), "problem", problem));
                        }
                    }
                }
            }
            // A Spark task re-reads from an offset in the middle of a partition: seek there and poll.
            TopicPartition tp0 = tps.get(0);
            long middle = sent.get(tp0).size() / 2;
            out.step("seekMiddle", () -> {
                c.assign(List.of(tp0));
                c.seek(tp0, middle);
                ConsumerRecord<byte[], byte[]> first = null;
                long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (first == null && System.nanoTime() < until) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(java.time.Duration.ofMillis(500))) {
                        first = first == null ? r : first;
                    }
                }
                out.emit("seekMiddle", "partition", tp0.partition(), "requested", middle,
                    "first_offset", first == null ? null : first.offset(),
                    "first_key", first == null ? null : str(first.key()),
                    "expected_key", "key-" + sent.get(tp0).get(middle));
            });
        }
        int missing = 0;
        for (int i = 0; i < N_RECORDS; i++) {
            if (lines[i] == null) {
                missing++;
            } else {
                crc.update(lines[i].getBytes(StandardCharsets.UTF_8));
            }
        }
        out.emit("consume", "count", consumed, "missing", missing, "mismatches", mismatches,
            "duplicates", duplicates, "dense", dense, "crc32", crc.getValue(), "samples", samples,
            "next_offsets", nextOffset);
    }

    // ---------------------------------------------------------------- client configs

    // ---------------------------------------------------------------- consumer group (classic protocol)

    static Properties groupConsumerProps(String bootstrap, String groupId) {
        Properties cp = secured();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
        cp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        cp.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
        return cp;
    }

    static void produceValues(String bootstrap, String topic, int from, int to) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(producerProps(bootstrap, "lz4"))) {
            for (int i = from; i < to; i++) {
                p.send(new ProducerRecord<>(topic, bytes("k" + i), bytes(Integer.toString(i))));
            }
            p.flush();
        }
    }

    static void group(Out out, String bootstrap, String topic) throws Exception {
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, 6, (short) 1))).all().get(TIMEOUT_S, TimeUnit.SECONDS);
        }
        String groupId = topic + "-g";
        java.util.Set<Integer> seen = new java.util.HashSet<>();
        int duplicates = 0;
        try (KafkaConsumer<byte[], byte[]> c1 = new KafkaConsumer<>(groupConsumerProps(bootstrap, groupId));
             KafkaConsumer<byte[], byte[]> c2 = new KafkaConsumer<>(groupConsumerProps(bootstrap, groupId))) {
            c1.subscribe(List.of(topic));
            c2.subscribe(List.of(topic));
            // Join first: both members must hold partitions before any record exists.
            long joinDeadline = System.currentTimeMillis() + 60_000;
            while ((c1.assignment().isEmpty() || c2.assignment().isEmpty())
                   && System.currentTimeMillis() < joinDeadline) {
                c1.poll(java.time.Duration.ofMillis(100));
                c2.poll(java.time.Duration.ofMillis(100));
            }
            produceValues(bootstrap, topic, 0, 3000);
            long deadline = System.currentTimeMillis() + 60_000;
            while (seen.size() < 3000 && System.currentTimeMillis() < deadline) {
                for (KafkaConsumer<byte[], byte[]> c : List.of(c1, c2)) {
                    for (ConsumerRecord<byte[], byte[]> r : c.poll(java.time.Duration.ofMillis(100))) {
                        if (!seen.add(intOf(r.value()))) {
                            duplicates++;
                        }
                    }
                }
            }
            java.util.Set<TopicPartition> a1 = c1.assignment();
            java.util.Set<TopicPartition> a2 = c2.assignment();
            java.util.Set<TopicPartition> both = new java.util.HashSet<>(a1);
            both.retainAll(a2);
            java.util.Set<TopicPartition> union = new java.util.HashSet<>(a1);
            union.addAll(a2);
            out.emit("assignment", "c1", a1.size(), "c2", a2.size(), "overlap", both.size(), "union", union.size());
            c1.commitSync();
            c2.commitSync();
            out.emit("consumed", "distinct", seen.size(), "duplicates", duplicates);
        }
        produceValues(bootstrap, topic, 3000, 4000);
        int resumed = 0;
        int old = 0;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(groupConsumerProps(bootstrap, groupId))) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (resumed + old < 1000 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(java.time.Duration.ofMillis(200))) {
                    if (intOf(r.value()) < 3000) {
                        old++;
                    } else {
                        resumed++;
                    }
                }
            }
            c.commitSync();
        }
        out.emit("resume", "new_records", resumed, "old_records", old);
    }

    // ---------------------------------------------------------------- cluster (3 brokers)

    static void clusterDescribe(Out out, String bootstrap, String topic) throws Exception {
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            DescribeClusterResult dc = admin.describeCluster();
            List<Object> nodes = new ArrayList<>();
            for (Node n : dc.nodes().get(TIMEOUT_S, TimeUnit.SECONDS)) {
                nodes.add(map("id", n.id(), "host", n.host(), "port", n.port(), "rack", n.rack()));
            }
            out.emit("cluster", "nodes", nodes, "controller", dc.controller().get(TIMEOUT_S, TimeUnit.SECONDS).id());
            admin.createTopics(List.of(new NewTopic(topic, 3, (short) 3))).all().get(TIMEOUT_S, TimeUnit.SECONDS);
            TopicDescription d = describeOnceKnown(admin, topic);
            List<Object> parts = new ArrayList<>();
            for (TopicPartitionInfo p : d.partitions()) {
                parts.add(map("partition", p.partition(), "leader", p.leader() == null ? -1 : p.leader().id(),
                              "replicas", ids(p.replicas()), "isr", ids(p.isr())));
            }
            out.emit("topic", "partitions", parts);
        }
    }

    /**
     * describeTopics right after createTopics, as a Kafka user must write it for a ZooKeeper-mode cluster:
     * createTopics returns once the controller's own metadata has the leaders, while describeTopics goes to
     * the least loaded broker, whose UpdateMetadata may still be on its way (UNKNOWN_TOPIC_OR_PARTITION,
     * which the Admin client does not retry). Retried for TIMEOUT_S at most; other errors are not.
     */
    static TopicDescription describeOnceKnown(Admin admin, String topic) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
        while (true) {
            try {
                return admin.describeTopics(List.of(topic)).allTopicNames()
                    .get(TIMEOUT_S, TimeUnit.SECONDS).get(topic);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof org.apache.kafka.common.errors.UnknownTopicOrPartitionException)
                        || System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(100);
            }
        }
    }

    static void clusterProduce(Out out, String bootstrap, String topic) throws Exception {
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            NewTopic nt = new NewTopic(topic, 3, (short) 3).configs(Map.of("min.insync.replicas", "2"));
            admin.createTopics(List.of(nt)).all().get(TIMEOUT_S, TimeUnit.SECONDS);
        }
        Properties pp = producerProps(bootstrap, "lz4");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        int n = 6000;
        Map<Integer, TreeMap<Long, Integer>> acked = new HashMap<>();
        List<String> errors = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp)) {
            out.emit("ready");
            for (int i = 0; i < n; i++) {
                final int value = i;
                p.send(new ProducerRecord<>(topic, bytes("k" + i), bytes(Integer.toString(i))), (md, e) -> {
                    synchronized (acked) {
                        if (e != null) {
                            errors.add(describe(e));
                        } else {
                            acked.computeIfAbsent(md.partition(), k -> new TreeMap<>()).put(md.offset(), value);
                        }
                    }
                });
                Thread.sleep(2);
            }
            p.flush();
        }
        int ackedCount = 0;
        for (TreeMap<Long, Integer> m : acked.values()) {
            ackedCount += m.size();
        }
        out.emit("produced", "acked", ackedCount, "errors", errors.size(),
                 "first_error", errors.isEmpty() ? null : errors.get(0));
        // Read back everything: each acknowledged (partition, offset) must hold its value, each value once.
        int mismatched = 0;
        int duplicates = 0;
        int read = 0;
        java.util.Set<Integer> values = new java.util.HashSet<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(bootstrap))) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                tps.add(new TopicPartition(topic, i));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            long deadline = System.currentTimeMillis() + 60_000;
            while (System.currentTimeMillis() < deadline) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    done &= c.position(tp) >= end.get(tp);
                }
                if (done) {
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(java.time.Duration.ofMillis(200))) {
                    read++;
                    int v = intOf(r.value());
                    if (!values.add(v)) {
                        duplicates++;
                    }
                    Integer expect = acked.getOrDefault(r.partition(), new TreeMap<>()).get(r.offset());
                    if (expect != null && expect != v) {
                        mismatched++;
                    }
                }
            }
        }
        int missing = 0;
        for (TreeMap<Long, Integer> m : acked.values()) {
            for (int v : m.values()) {
                if (!values.contains(v)) {
                    missing++;
                }
            }
        }
        out.emit("verified", "read", read, "missing_acked", missing, "duplicates", duplicates, "mismatched", mismatched);
    }

    /** A consumer without group.id (assign + seek only), as the cluster scenarios read back. */
    static Properties consumerProps(String bootstrap) {
        Properties cp = secured();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        cp.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return cp;
    }

    static void clusterGroup(Out out, String bootstrap, String topic) throws Exception {
        String groupId = topic + "-g";
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, 6, (short) 3))).all().get(TIMEOUT_S, TimeUnit.SECONDS);
        }
        int n = 4000;
        Thread producer = new Thread(() -> {
            try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(producerProps(bootstrap, "lz4"))) {
                for (int i = 0; i < n; i++) {
                    p.send(new ProducerRecord<>(topic, bytes("k" + i), bytes(Integer.toString(i))));
                    Thread.sleep(3);
                }
                p.flush();
            } catch (Exception e) {
                out.emit("producer", "error", describe(e));
            }
        });
        java.util.Set<Integer> seen = new java.util.HashSet<>();
        int duplicates = 0;
        int commitErrors = 0;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(groupConsumerProps(bootstrap, groupId))) {
            c.subscribe(List.of(topic));
            long joinDeadline = System.currentTimeMillis() + 60_000;
            while (c.assignment().isEmpty() && System.currentTimeMillis() < joinDeadline) {
                c.poll(java.time.Duration.ofMillis(100));
            }
            int coordinator;
            try (Admin admin = Admin.create(adminProps(bootstrap))) {
                coordinator = admin.describeConsumerGroups(List.of(groupId)).all().get(TIMEOUT_S, TimeUnit.SECONDS)
                    .get(groupId).coordinator().id();
            }
            producer.start();
            out.emit("ready", "coordinator", coordinator, "assigned", c.assignment().size());
            long deadline = System.currentTimeMillis() + 120_000;
            while (seen.size() < n && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> rs = c.poll(java.time.Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    if (!seen.add(intOf(r.value()))) {
                        duplicates++;
                    }
                }
                if (!rs.isEmpty()) {
                    try {
                        c.commitSync(java.time.Duration.ofSeconds(30));
                    } catch (Exception e) {
                        commitErrors++;  // retriable or not, the next poll goes on from the last committed offsets
                    }
                }
            }
        }
        producer.join(60_000);
        out.emit("consumed", "distinct", seen.size(), "duplicates", duplicates, "commit_errors", commitErrors);
    }

    // ---------------------------------------------------------------- transactions

    static Properties txnProducerProps(String bootstrap, String transactionalId) {
        Properties p = producerProps(bootstrap, "lz4");
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
        return p;
    }

    /** A total of the producer's "producer-metrics" group (e.g. connection-close-total); -1 if it has none. */
    static double producerMetric(KafkaProducer<?, ?> p, String name) {
        for (Map.Entry<org.apache.kafka.common.MetricName, ? extends org.apache.kafka.common.Metric> e
                : p.metrics().entrySet()) {
            if (e.getKey().group().equals("producer-metrics") && e.getKey().name().equals(name)) {
                return ((Number) e.getValue().metricValue()).doubleValue();
            }
        }
        return -1;
    }

    static void createTopic(String bootstrap, String topic, int partitions) throws Exception {
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(TIMEOUT_S, TimeUnit.SECONDS);
        }
    }

    /**
     * Everything below the end offset (for read_committed: the last stable offset) of each partition, read with
     * assign + seekToBeginning at the given isolation level: partition -> values in offset order. Also emits the
     * end offsets and the positions reached, which for read_committed include the transaction markers.
     */
    static Map<Integer, List<String>> readAll(Out out, String step, String bootstrap, String topic, int partitions,
                                              String isolation) {
        Properties cp = consumerProps(bootstrap);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        Map<Integer, List<String>> got = new TreeMap<>();
        Map<String, Object> ends = new TreeMap<>();
        Map<String, Object> positions = new TreeMap<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(cp)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) {
                tps.add(new TopicPartition(topic, i));
                got.put(i, new ArrayList<>());
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            long deadline = System.currentTimeMillis() + 30_000;
            while (System.currentTimeMillis() < deadline) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    done &= c.position(tp) >= end.get(tp);
                }
                if (done) {
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(java.time.Duration.ofMillis(200))) {
                    got.get(r.partition()).add(str(r.value()));
                }
            }
            for (TopicPartition tp : tps) {
                ends.put(String.valueOf(tp.partition()), end.get(tp));
                positions.put(String.valueOf(tp.partition()), c.position(tp));
            }
        }
        out.emit(step, "isolation", isolation, "values", got, "end_offsets", ends, "positions", positions);
        return got;
    }

    static void txnBasic(Out out, String bootstrap, String topic) throws Exception {
        createTopic(bootstrap, topic, 3);
        Map<String, Object> sent = new TreeMap<>();
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(txnProducerProps(bootstrap, topic + "-tid"))) {
            long t0 = System.nanoTime();
            p.initTransactions();
            // a request the broker leaves unanswered times out and the client closes its connection
            out.emit("initTransactions", "elapsed_ms", (System.nanoTime() - t0) / 1_000_000,
                     "connection_close_total", producerMetric(p, "connection-close-total"));
            p.beginTransaction();
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < 30; i++) {
                fs.add(p.send(new ProducerRecord<>(topic, i % 3, null, bytes("c-" + i))));
            }
            p.flush();
            for (int i = 0; i < 30; i++) {
                RecordMetadata md = fs.get(i).get(TIMEOUT_S, TimeUnit.SECONDS);
                @SuppressWarnings("unchecked")
                List<Object> part = (List<Object>) sent.computeIfAbsent(String.valueOf(md.partition()),
                    k -> new ArrayList<>());
                part.add(map("value", "c-" + i, "offset", md.offset()));
            }
            p.commitTransaction();
        }
        out.emit("committed", "sent", sent);
        readAll(out, "readCommitted", bootstrap, topic, 3, "read_committed");
        readAll(out, "readUncommitted", bootstrap, topic, 3, "read_uncommitted");
    }

    static void txnAbort(Out out, String bootstrap, String topic) throws Exception {
        createTopic(bootstrap, topic, 3);
        List<Object> rounds = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(txnProducerProps(bootstrap, topic + "-tid"))) {
            p.initTransactions();
            for (int round = 0; round < 5; round++) {
                boolean commit = round % 2 == 0;
                p.beginTransaction();
                for (int i = 0; i < 9; i++) {
                    p.send(new ProducerRecord<>(topic, i % 3, null, bytes("r" + round + "-" + i)));
                }
                p.flush();
                if (commit) {
                    p.commitTransaction();
                } else {
                    p.abortTransaction();
                }
                rounds.add(map("round", round, "committed", commit));
            }
        }
        out.emit("transactions", "rounds", rounds);
        readAll(out, "readCommitted", bootstrap, topic, 3, "read_committed");
        readAll(out, "readUncommitted", bootstrap, topic, 3, "read_uncommitted");
    }

    static void txnFence(Out out, String bootstrap, String topic) throws Exception {
        createTopic(bootstrap, topic, 3);
        String tid = topic + "-tid";
        KafkaProducer<byte[], byte[]> first = new KafkaProducer<>(txnProducerProps(bootstrap, tid));
        try {
            first.initTransactions();
            first.beginTransaction();
            for (int i = 0; i < 6; i++) {
                first.send(new ProducerRecord<>(topic, i % 3, null, bytes("zombie-" + i)));
            }
            first.flush();
            out.emit("firstOpen");
            try (KafkaProducer<byte[], byte[]> second = new KafkaProducer<>(txnProducerProps(bootstrap, tid))) {
                second.initTransactions();
                out.emit("secondInit");
                String thrown = null;
                String detail = null;
                try {
                    first.commitTransaction();
                } catch (Exception e) {
                    thrown = e.getClass().getSimpleName();
                    detail = describe(e);
                }
                out.emit("firstCommit", "exception", thrown, "detail", detail);
                // a fenced producer can only be closed: any further transactional call fails the same way
                String again = null;
                try {
                    first.beginTransaction();
                } catch (Exception e) {
                    again = e.getClass().getSimpleName();
                }
                out.emit("firstBeginAgain", "exception", again);
                second.beginTransaction();
                for (int i = 0; i < 3; i++) {
                    second.send(new ProducerRecord<>(topic, i, null, bytes("live-" + i)));
                }
                second.commitTransaction();
                out.emit("secondCommit");
            }
        } finally {
            first.close(java.time.Duration.ofSeconds(5));
        }
        readAll(out, "readCommitted", bootstrap, topic, 3, "read_committed");
        readAll(out, "readUncommitted", bootstrap, topic, 3, "read_uncommitted");
    }

    static void txnConsumeTransformProduce(Out out, String bootstrap, String topic) throws Exception {
        String input = topic + "-in";
        String output = topic + "-out";
        String groupId = topic + "-g";
        int n = 300;
        createTopic(bootstrap, input, 3);
        createTopic(bootstrap, output, 3);
        // keyed input: the same default partitioner puts each output record in its input record's partition
        produceKeyed(bootstrap, input, n);
        Properties gp = groupConsumerProps(bootstrap, groupId);
        gp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        gp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "40");
        int processed = 0;
        int transactions = 0;
        int abortedCopies = 0;
        int rewinds = 0;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(gp);
             KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(txnProducerProps(bootstrap, topic + "-tid"))) {
            p.initTransactions();
            c.subscribe(List.of(input));
            long deadline = System.currentTimeMillis() + 120_000;
            while (processed < n && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(java.time.Duration.ofMillis(500));
                if (recs.isEmpty()) {
                    continue;
                }
                p.beginTransaction();
                Map<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    p.send(new ProducerRecord<>(output, r.key(), bytes("out-" + str(r.value()))));
                    offsets.put(new TopicPartition(r.topic(), r.partition()),
                        new org.apache.kafka.clients.consumer.OffsetAndMetadata(r.offset() + 1));
                }
                p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                if (transactions == 2) {
                    // abort one transaction, then rewind to the committed offsets and process it again; flush first:
                    // abortTransaction drops batches not yet sent, and the test counts the aborted copies in the log
                    p.flush();
                    p.abortTransaction();
                    abortedCopies += recs.count();
                    Map<TopicPartition, org.apache.kafka.clients.consumer.OffsetAndMetadata> committed =
                        c.committed(c.assignment(), java.time.Duration.ofSeconds(TIMEOUT_S));
                    for (TopicPartition tp : c.assignment()) {
                        org.apache.kafka.clients.consumer.OffsetAndMetadata om = committed.get(tp);
                        c.seek(tp, om == null ? 0 : om.offset());
                        rewinds++;
                    }
                } else {
                    p.commitTransaction();
                    processed += recs.count();
                }
                transactions++;
            }
        }
        out.emit("processed", "processed", processed, "transactions", transactions, "aborted_copies", abortedCopies,
            "rewinds", rewinds);
        readAll(out, "input", bootstrap, input, 3, "read_uncommitted");
        readAll(out, "readCommitted", bootstrap, output, 3, "read_committed");
        readAll(out, "readUncommitted", bootstrap, output, 3, "read_uncommitted");
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            Map<String, Object> committed = new TreeMap<>();
            admin.listConsumerGroupOffsets(groupId).partitionsToOffsetAndMetadata().get(TIMEOUT_S, TimeUnit.SECONDS)
                .forEach((tp, om) -> committed.put(String.valueOf(tp.partition()), om == null ? null : om.offset()));
            out.emit("groupOffsets", "committed", committed);
        }
    }

    static String exceptionName(Throwable e) {
        Throwable t = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        return t.getClass().getSimpleName();
    }

    static Map<String, Object> describeTxn(Admin admin, String tid) throws Exception {
        org.apache.kafka.clients.admin.TransactionDescription d = admin.describeTransactions(List.of(tid))
            .description(tid).get(TIMEOUT_S, TimeUnit.SECONDS);
        return map("state", d.state().toString(), "producerId", d.producerId(), "producerEpoch", d.producerEpoch(),
            "coordinator", d.coordinatorId(), "partitions", d.topicPartitions().size());
    }

    static void txnTimeout(Out out, String bootstrap, String topic, int timeoutMs) throws Exception {
        String tid = topic + "-tid";
        try (Admin admin = Admin.create(adminProps(bootstrap))) {
            int rf = Math.min(3, admin.describeCluster().nodes().get(TIMEOUT_S, TimeUnit.SECONDS).size());
            NewTopic nt = new NewTopic(topic, 3, (short) rf);
            if (rf > 1) {
                nt.configs(Map.of("min.insync.replicas", "2"));
            }
            admin.createTopics(List.of(nt)).all().get(TIMEOUT_S, TimeUnit.SECONDS);
            Properties pp = txnProducerProps(bootstrap, tid);
            pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, String.valueOf(timeoutMs));
            try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(pp)) {
                p.initTransactions();
                p.beginTransaction();
                for (int i = 0; i < 3; i++) {
                    p.send(new ProducerRecord<>(topic, i, null, bytes("expired-" + i)));
                }
                p.flush();
                out.emit("open", "describe", describeTxn(admin, tid));
                // the coordinator aborts the transaction once it is older than its timeout
                Map<String, Object> d = describeTxn(admin, tid);
                long deadline = System.currentTimeMillis() + timeoutMs + 30_000L;
                while (!"CompleteAbort".equals(d.get("state")) && System.currentTimeMillis() < deadline) {
                    Thread.sleep(200);
                    d = describeTxn(admin, tid);
                }
                out.emit("timedOut", "describe", d);
                // the producer does not know yet: a send to a partition of its (now aborted) transaction
                String sendError = null;
                try {
                    p.send(new ProducerRecord<>(topic, 0, null, bytes("late-0"))).get(TIMEOUT_S, TimeUnit.SECONDS);
                } catch (Exception e) {
                    sendError = exceptionName(e);
                }
                String commitError = null;
                try {
                    p.commitTransaction();
                } catch (Exception e) {
                    commitError = exceptionName(e);
                }
                out.emit("afterTimeout", "sendError", sendError, "commitError", commitError);
                String abortError = null;
                try {
                    p.abortTransaction();
                } catch (Exception e) {
                    abortError = describe(e);
                }
                out.emit("abort", "error", abortError, "describe", describeTxn(admin, tid));
                if (abortError == null) {
                    out.step("recovered", () -> {
                        p.beginTransaction();
                        for (int i = 0; i < 3; i++) {
                            p.send(new ProducerRecord<>(topic, i, null, bytes("recovered-" + i)));
                        }
                        p.commitTransaction();
                        out.emit("recovered", "describe", describeTxn(admin, tid));
                    });
                }
            }
            out.step("newProducer", () -> {
                try (KafkaProducer<byte[], byte[]> q = new KafkaProducer<>(txnProducerProps(bootstrap, tid))) {
                    q.initTransactions();
                    q.beginTransaction();
                    for (int i = 0; i < 3; i++) {
                        q.send(new ProducerRecord<>(topic, i, null, bytes("new-" + i)));
                    }
                    q.commitTransaction();
                    out.emit("newProducer", "describe", describeTxn(admin, tid));
                }
            });
        }
        readAll(out, "readCommitted", bootstrap, topic, 3, "read_committed");
        readAll(out, "readUncommitted", bootstrap, topic, 3, "read_uncommitted");
    }

    static void produceKeyed(String bootstrap, String topic, int n) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(producerProps(bootstrap, "lz4"))) {
            for (int i = 0; i < n; i++) {
                p.send(new ProducerRecord<>(topic, bytes("k" + (i % 7)), bytes("in-" + i)));
            }
            p.flush();
        }
    }

    static int intOf(byte[] v) {
        return Integer.parseInt(new String(v, StandardCharsets.UTF_8));
    }

    /**
     * New client properties, preloaded with the file named by COMPAT_CLIENT_CONFIG when set (security.protocol,
     * sasl.*, ssl.* for secured listeners), so every scenario runs unchanged over TLS or SASL.
     */
    static Properties secured() {
        Properties p = new Properties();
        String path = System.getenv("COMPAT_CLIENT_CONFIG");
        if (path != null && !path.isEmpty()) {
            try (java.io.FileInputStream in = new java.io.FileInputStream(path)) {
                p.load(in);
            } catch (java.io.IOException e) {
                throw new RuntimeException("cannot read COMPAT_CLIENT_CONFIG " + path + ": " + e, e);
            }
        }
        return p;
    }

    static Properties adminProps(String bootstrap) {
        Properties p = secured();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return p;
    }

    /** Java defaults kept on purpose: acks=all, enable.idempotence=true, max.in.flight=5. */
    static Properties producerProps(String bootstrap, String codec) {
        Properties p = secured();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        return p;
    }

    // ---------------------------------------------------------------- helpers

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String str(byte[] b) {
        return b == null ? "<null>" : new String(b, StandardCharsets.UTF_8);
    }

    static List<Object> ids(Collection<Node> nodes) {
        List<Object> out = new ArrayList<>();
        for (Node n : nodes) {
            out.add(n.id());
        }
        return out;
    }

    static String describe(Throwable e) {
        StringBuilder sb = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (sb.length() > 0) {
                sb.append(" <- ");
            }
            sb.append(t.getClass().getName()).append(": ").append(t.getMessage());
        }
        return sb.toString();
    }

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    /** Prints one JSON object per event; stdout is line-buffered by println + flush. */
    interface Body {
        void run() throws Exception;
    }

    static final class Out {
        final String scenario;
        int failedSteps;

        /** Runs one step; a failure is reported as {"step":name,"error":...} and the scenario goes on. */
        void step(String name, Body body, Object... context) {
            try {
                body.run();
            } catch (Throwable e) {
                failedSteps++;
                Object[] kv = Arrays.copyOf(context, context.length + 2);
                kv[context.length] = "error";
                kv[context.length + 1] = describe(e);
                emit(name, kv);
            }
        }

        Out(String scenario) {
            this.scenario = scenario;
        }

        void emit(String step, Object... kv) {
            Map<String, Object> m = map("scenario", scenario, "step", step);
            m.putAll(map(kv));
            System.out.println(json(m));
            System.out.flush();
        }
    }

    static String json(Object o) {
        StringBuilder sb = new StringBuilder();
        writeJson(sb, o);
        return sb.toString();
    }

    static void writeJson(StringBuilder sb, Object o) {
        if (o == null) {
            sb.append("null");
        } else if (o instanceof Boolean || o instanceof Integer || o instanceof Long || o instanceof Short) {
            sb.append(o);
        } else if (o instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                writeString(sb, String.valueOf(e.getKey()));
                sb.append(':');
                writeJson(sb, e.getValue());
            }
            sb.append('}');
        } else if (o instanceof Iterable) {
            sb.append('[');
            boolean first = true;
            for (Object x : (Iterable<?>) o) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                writeJson(sb, x);
            }
            sb.append(']');
        } else if (o instanceof Object[]) {
            writeJson(sb, Arrays.asList((Object[]) o));
        } else {
            writeString(sb, o.toString());
        }
    }

    static void writeString(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            switch (ch) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (ch < 0x20) {
                        sb.append(String.format("\\u%04x", (int) ch));
                    } else {
                        sb.append(ch);
                    }
            }
        }
        sb.append('"');
    }
}
