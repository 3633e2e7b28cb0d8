/*
 * A small Kafka Streams application (Kafka Streams 3.9.1) with processing.guarantee=exactly_once_v2, run by
 * compat-tests/test_streams_eos.py against the project's broker.
 *
 * Usage: java -cp <kafka libs> StreamsEos <bootstrap> <application.id> <input> <output> <state.dir> <sleep-ms>
 *
 * Topology: per key, a running (count, sum) of the input values (decimal longs), written to <output> as
 * "<count>,<sum>" on every update. The record cache is off (statestore.cache.max.bytes=0), so every input record
 * yields exactly one update: an exact output has, per key, the counts 1..n in order and the sums as the prefix
 * sums of that key's inputs. <sleep-ms> slows each record down so that the caller can kill -9 the JVM while it is
 * processing.
 *
 * Output: one JSON object per line on stdout: {"event":"state","from":...,"to":...} on each state change,
 * {"event":"error",...} on an uncaught exception. SIGTERM closes the application cleanly (the shutdown hook),
 * which commits what it processed; the JVM then exits.
 */
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

public final class StreamsEos {
    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: StreamsEos <bootstrap> <application.id> <input> <output> <state.dir> <sleep-ms>");
            System.exit(2);
        }
        String bootstrap = args[0];
        String input = args[2];
        String output = args[3];
        long sleepMs = Long.parseLong(args[5]);

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        // transactions of about half a second whose records reach the broker quickly (Streams' EOS default linger
        // is 100 ms): a kill -9 then finds data of the open transaction in the log, which must stay invisible
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 500);
        p.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), 5);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
        // a killed instance leaves the group quickly, so its restarted successor is not held up for 45 s
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
            .peek((k, v) -> pause(sleepMs))
            .groupByKey()
            .aggregate(() -> "0,0", (key, value, agg) -> {
                String[] cs = agg.split(",");
                long count = Long.parseLong(cs[0]) + 1;
                long sum = Long.parseLong(cs[1]) + Long.parseLong(value);
                return count + "," + sum;
            }, Materialized.with(Serdes.String(), Serdes.String()))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener((to, from) -> emit("state", "from", from.name(), "to", to.name()));
        streams.setUncaughtExceptionHandler(e -> {
            emit("error", "error", e.toString());
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            boolean clean = streams.close(Duration.ofSeconds(30));
            emit("closed", "clean", String.valueOf(clean));
            closed.countDown();
        }));
        streams.start();
        closed.await();
    }

    static void pause(long ms) {
        if (ms <= 0) {
            return;
        }
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static synchronized void emit(String event, String... kv) {
        StringBuilder sb = new StringBuilder("{\"event\":\"").append(event).append('"');
        for (int i = 0; i < kv.length; i += 2) {
            sb.append(",\"").append(kv[i]).append("\":\"").append(kv[i + 1].replace("\\", "\\\\")
                .replace("\"", "\\\"").replace("\n", " ")).append('"');
        }
        System.out.println(sb.append('}'));
        System.out.flush();
    }
}
