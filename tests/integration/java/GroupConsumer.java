import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A group consumer of the Java client for the tests: subscribes to one topic and polls until told to
 * stop, committing synchronously after every poll that returned records. One JSON line per event on
 * stdout: {"event":"assigned"|"revoked"|"lost","partitions":[...]}, {"event":"record","partition":p,
 * "offset":o,"value":"..."}, {"event":"committed"}, {"event":"error","message":"..."}, {"event":"closed"}.
 * A line "close" (or the end of stdin) closes the consumer (it leaves the group); a kill -9 is a crash.
 *
 * Arguments: bootstrap group topic assignor instance-id|- [key=value consumer settings...]
 */
public final class GroupConsumer {
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

    private static String partitions(Collection<TopicPartition> tps) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : tps) out.add(Integer.toString(tp.partition()));
        return "[" + String.join(",", out) + "]";
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[1]);
        props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, args[3]);
        if (!args[4].equals("-")) props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, args[4]);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        for (int i = 5; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            props.put(kv[0], kv[1]);
        }
        AtomicBoolean stop = new AtomicBoolean(false);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            Thread stdin = new Thread(() -> {
                try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = in.readLine()) != null && !line.trim().equals("close")) { }
                } catch (Exception e) {
                    emit("{\"event\":\"error\",\"message\":" + quote(e.toString()) + "}");
                }
                stop.set(true);
                consumer.wakeup();
            });
            stdin.setDaemon(true);
            stdin.start();
            consumer.subscribe(List.of(args[2]), new ConsumerRebalanceListener() {
                @Override public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                    emit("{\"event\":\"revoked\",\"partitions\":" + partitions(tps) + "}");
                }
                @Override public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                    emit("{\"event\":\"assigned\",\"partitions\":" + partitions(tps) + "}");
                }
                @Override public void onPartitionsLost(Collection<TopicPartition> tps) {
                    emit("{\"event\":\"lost\",\"partitions\":" + partitions(tps) + "}");
                }
            });
            while (!stop.get()) {
                try {
                    ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                    for (ConsumerRecord<String, String> r : records) {
                        emit("{\"event\":\"record\",\"partition\":" + r.partition() + ",\"offset\":" + r.offset()
                             + ",\"value\":" + quote(r.value()) + "}");
                    }
                    if (!records.isEmpty()) {
                        consumer.commitSync();
                        emit("{\"event\":\"committed\"}");
                    }
                } catch (WakeupException e) {
                    break;
                } catch (Exception e) {
                    emit("{\"event\":\"error\",\"message\":" + quote(e.toString()) + "}");
                }
            }
        }
        emit("{\"event\":\"closed\"}");
    }
}
