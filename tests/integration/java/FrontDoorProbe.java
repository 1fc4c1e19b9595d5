import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The real Apache Kafka Java client against the gateway's front door, driven by the Python tests
 * (tests/integration/test_front_door_java.py). Prints one JSON object per line on stdout.
 *
 * <pre>
 * produce BOOTSTRAP [NAME=VALUE...]
 *                        stdin: "send\tTOPIC\tPARTITION\tTIMESTAMP\tKEY\tVALUE" lines and "flush" lines.
 *                        Default producer settings (idempotence on, acks=all) but for timeouts and a long
 *                        linger, so each flush() sends exactly the records sent since the previous one, one
 *                        batch per partition (as far as batch.size allows); NAME=VALUE are further producer
 *                        settings (max.request.size, batch.size, ...). After each flush, one line per record of
 *                        the group, in send order:
 *                        {"i":N,"topic":..,"partition":..,"offset":..,"timestamp":..} or
 *                        {"i":N,"error":"exception class","message":".."}
 * consume BOOTSTRAP TOPIC:PARTITION:COUNT...
 *                        assign() + seekToBeginning() of those partitions, poll until each gave COUNT records
 *                        (or a minute passed), one line per record:
 *                        {"topic":..,"partition":..,"offset":..,"timestamp":..,"timestampType":..,
 *                         "leaderEpoch":..,"key":..,"value":..}
 * leaders BOOTSTRAP TOPIC
 *                        the client's metadata of TOPIC (partitionsFor), one line per partition:
 *                        {"partition":..,"leader":..,"host":..,"port":..,"replicas":[..],"isr":[..]}
 * </pre>
 */
public final class FrontDoorProbe {
    private FrontDoorProbe() {
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "produce" -> produce(args[1], Arrays.copyOfRange(args, 2, args.length));
            case "consume" -> consume(args[1], Arrays.copyOfRange(args, 2, args.length));
            case "leaders" -> leaders(args[1], args[2]);
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    private static void produce(String bootstrap, String[] settings) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.CLIENT_ID_CONFIG, "front-door-probe");
        // Batches leave on flush() only. The gateway's first micro-batch can take half a minute on a busy
        // machine (Spark warming up): a minute per request, then a send fails (TimeoutException).
        props.put(ProducerConfig.LINGER_MS_CONFIG, "10000");
        props.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "60000");
        props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "30000");
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        for (String setting : settings) {
            String[] kv = setting.split("=", 2);
            props.put(kv[0], kv[1]);
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> group = new ArrayList<>();
            int index = 0;
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isEmpty()) {
                    continue;
                }
                String[] f = line.split("\t", -1);
                if (f[0].equals("flush")) {
                    producer.flush();
                    for (Future<RecordMetadata> future : group) {
                        System.out.println(outcome(index++, future));
                    }
                    System.out.flush();
                    group.clear();
                } else if (f[0].equals("send")) {
                    group.add(producer.send(new ProducerRecord<>(f[1], Integer.parseInt(f[2]), Long.parseLong(f[3]),
                                                                 f[4], f[5])));
                } else {
                    throw new IllegalArgumentException("unknown command " + line);
                }
            }
            if (!group.isEmpty()) {
                throw new IllegalStateException(group.size() + " sends without a flush after them");
            }
        }
    }

    private static String outcome(int index, Future<RecordMetadata> future) throws InterruptedException {
        try {
            RecordMetadata m = future.get();
            return "{\"i\":" + index + ",\"topic\":" + json(m.topic()) + ",\"partition\":" + m.partition()
                + ",\"offset\":" + m.offset() + ",\"timestamp\":" + m.timestamp() + "}";
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            return "{\"i\":" + index + ",\"error\":" + json(cause.getClass().getName()) + ",\"message\":"
                + json(cause.getMessage()) + "}";
        }
    }

    private static void consume(String bootstrap, String[] wanted) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "front-door-probe");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        Map<TopicPartition, Integer> remaining = new HashMap<>();
        for (String w : wanted) {
            String[] f = w.split(":");
            remaining.put(new TopicPartition(f[0], Integer.parseInt(f[1])), Integer.parseInt(f[2]));
        }
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.assign(remaining.keySet());
            consumer.seekToBeginning(remaining.keySet());
            long deadline = System.currentTimeMillis() + 60_000;
            while (remaining.values().stream().anyMatch(n -> n > 0) && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    System.out.println("{\"topic\":" + json(r.topic()) + ",\"partition\":" + r.partition()
                        + ",\"offset\":" + r.offset() + ",\"timestamp\":" + r.timestamp()
                        + ",\"timestampType\":" + json(r.timestampType().name) + ",\"leaderEpoch\":"
                        + r.leaderEpoch().orElse(-1) + ",\"key\":" + json(r.key()) + ",\"value\":"
                        + json(r.value()) + "}");
                    remaining.merge(new TopicPartition(r.topic(), r.partition()), -1, Integer::sum);
                }
            }
            System.out.flush();
        }
    }

    private static void leaders(String bootstrap, String topic) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "front-door-probe");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            for (PartitionInfo p : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                Node leader = p.leader();
                System.out.println("{\"partition\":" + p.partition() + ",\"leader\":" + leader.id() + ",\"host\":"
                    + json(leader.host()) + ",\"port\":" + leader.port() + ",\"replicas\":" + ids(p.replicas())
                    + ",\"isr\":" + ids(p.inSyncReplicas()) + "}");
            }
            System.out.flush();
        }
    }

    private static String ids(Node[] nodes) {
        StringBuilder out = new StringBuilder("[");
        for (int i = 0; i < nodes.length; i++) {
            out.append(i == 0 ? "" : ",").append(nodes[i].id());
        }
        return out.append(']').toString();
    }

    private static String json(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.append('"').toString();
    }
}
