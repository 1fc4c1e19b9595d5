import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * Kafka Streams' word count, as its quickstart writes it, for the tests of Streams through the front door:
 * lines of an input topic split into lowercase words, re-keyed by word (through the repartition topic
 * {application.id}-words-repartition), counted in a RocksDB store backed by the changelog topic
 * {application.id}-counts-changelog, and every new count written to the output topic (key: the word as a
 * string, value: the count as an 8-byte long).
 *
 * One line per state change of the client on stdout ("STATE RUNNING", "STATE ERROR", ...), so a test can wait
 * for it. SIGTERM closes the client (its tasks commit their offsets) before the JVM exits; "CLOSED" is its last
 * line then.
 *
 * Arguments: bootstrap application-id input-topic output-topic state-dir [key=value Streams settings...]
 */
public final class StreamsWordCount {
    private static void emit(String line) {
        synchronized (System.out) {
            System.out.println(line);
            System.out.flush();
        }
    }

    public static void main(String[] args) throws InterruptedException {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        for (int i = 5; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> lines = builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()));
        lines.flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
            .toStream()
            .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> emit("STATE " + now));
        streams.setUncaughtExceptionHandler(e -> {
            emit("UNCAUGHT " + e);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse
                .SHUTDOWN_CLIENT;
        });
        // the JVM's SIGTERM handler runs the hooks: close() commits the tasks' offsets and flushes the stores
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(60));
            emit("CLOSED");
            closed.countDown();
        }, "word-count-shutdown"));
        streams.start();
        closed.await();
    }
}
