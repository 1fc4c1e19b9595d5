import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A steady producer of the Java client for the tests (idempotent, Kafka's default): one record every
 * few milliseconds, value "PREFIX-NNNNNN" to partition N % PARTITIONS, until a line "stop" (or the end of
 * stdin); then it flushes for at most the flush timeout and exits. One JSON line per event on stdout:
 * {"event":"acked","value":v,"sent_ms":t,"acked_ms":t}, {"event":"error","value":v,"message":m},
 * {"event":"closed","sent":n} (times: the wall clock, in ms).
 *
 * Arguments: bootstrap topic prefix partitions interval-ms flush-timeout-ms [key=value producer settings...]
 */
public final class SteadyProducer {
    private static final Object OUT = new Object();

    private static void emit(String json) {
        synchronized (OUT) {
            System.out.println(json);
            System.out.flush();
        }
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    public static void main(String[] args) throws Exception {
        String topic = args[1];
        String prefix = args[2];
        int partitions = Integer.parseInt(args[3]);
        long intervalMs = Long.parseLong(args[4]);
        long flushTimeoutMs = Long.parseLong(args[5]);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        for (int i = 6; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("stop")) { }
            } catch (Exception e) {
                emit("{\"event\":\"error\",\"value\":null,\"message\":" + quote(e.toString()) + "}");
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        int sent = 0;
        KafkaProducer<String, String> producer = new KafkaProducer<>(props);
        try {
            while (!stop.get()) {
                String value = String.format("%s-%06d", prefix, sent);
                long sentMs = System.currentTimeMillis();
                producer.send(new ProducerRecord<>(topic, sent % partitions, null, value), (metadata, error) -> {
                    if (error == null) {
                        emit("{\"event\":\"acked\",\"value\":" + quote(value) + ",\"sent_ms\":" + sentMs
                             + ",\"acked_ms\":" + System.currentTimeMillis() + "}");
                    } else {
                        emit("{\"event\":\"error\",\"value\":" + quote(value) + ",\"message\":"
                             + quote(error.toString()) + "}");
                    }
                });
                sent++;
                Thread.sleep(intervalMs);
            }
        } finally {
            // close() waits for every record sent to be acknowledged or to fail, within the timeout
            producer.close(Duration.ofMillis(flushTimeoutMs));
        }
        emit("{\"event\":\"closed\",\"sent\":" + sent + "}");
    }
}
