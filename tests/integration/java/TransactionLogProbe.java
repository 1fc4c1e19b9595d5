import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Properties;
import kafka.coordinator.transaction.TransactionLog;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.MessageFormatter;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.coordinator.transaction.TransactionMetadata;
import org.apache.kafka.coordinator.transaction.TransactionState;
import org.apache.kafka.coordinator.transaction.TxnTransitMetadata;
import org.apache.kafka.coordinator.transaction.generated.TransactionLogKey;
import org.apache.kafka.coordinator.transaction.generated.TransactionLogValue;
import org.apache.kafka.coordinator.transaction.generated.TransactionLogValueJsonConverter;
import org.apache.kafka.server.common.TransactionVersion;

/**
 * The records of __transaction_state as Kafka's own code reads and writes them, one JSON line per input line.
 *
 * read      stdin: "KEYHEX VALUEHEX" per line; prints what the generated TransactionLogKey/TransactionLogValue,
 *           the broker's TransactionLog.readTxnRecordKey/readTxnRecordValue and kafka-console-consumer's
 *           TransactionLogMessageFormatter (when kafka-tools is on the classpath) make of them.
 * write     stdin: one JSON object per line; "via": "message" builds a TransactionLogValue of "version" from
 *           Kafka's own JSON form of it ("value", TransactionLogValueJsonConverter) and serializes it;
 *           "via": "broker" has TransactionLog.valueToBytes serialize a TxnTransitMetadata at the cluster's
 *           transaction.version "tv", as the transaction coordinator does. Prints {"key": hex, "value": hex}.
 * produce   BOOTSTRAP TRANSACTIONAL_ID TOPIC_A TOPIC_B: one committed transaction (TOPIC_A 0 and 1, TOPIC_B 0)
 *           and one aborted one (TOPIC_A 0) of a transactional KafkaProducer; prints {"event": ...} lines.
 */
public final class TransactionLogProbe {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final HexFormat HEX = HexFormat.of();
    private static final String FORMATTER = "org.apache.kafka.tools.consumer.TransactionLogMessageFormatter";

    private TransactionLogProbe() {
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "read" -> {
                for (String line : stdinLines()) {
                    String[] parts = line.trim().split(" ");
                    System.out.println(read(HEX.parseHex(parts[0]), HEX.parseHex(parts[1])));
                }
            }
            case "write" -> {
                for (String line : stdinLines()) {
                    System.out.println(write(JSON.readTree(line)));
                }
            }
            case "produce" -> produce(args[1], args[2], args[3], args[4]);
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
        }
        System.out.flush();
    }

    private static List<String> stdinLines() throws Exception {
        List<String> lines = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (!line.isBlank()) {
                lines.add(line);
            }
        }
        return lines;
    }

    private static String error(Throwable e) {
        return e.getClass().getName() + ": " + e.getMessage();
    }

    private static ObjectNode read(byte[] key, byte[] value) {
        ObjectNode out = JSON.createObjectNode();

        // the generated message classes, as CoordinatorRecordSerde uses them
        ObjectNode message = out.putObject("message");
        try {
            ByteBuffer k = ByteBuffer.wrap(key);
            message.put("keyType", k.getShort());
            message.put("transactionalId", new TransactionLogKey(new ByteBufferAccessor(k), (short) 0).transactionalId());
            message.put("keyRemaining", k.remaining());
            ByteBuffer v = ByteBuffer.wrap(value);
            short version = v.getShort();
            TransactionLogValue m = new TransactionLogValue(new ByteBufferAccessor(v), version);
            message.put("version", version);
            message.put("producerId", m.producerId());
            message.put("previousProducerId", m.previousProducerId());
            message.put("nextProducerId", m.nextProducerId());
            message.put("producerEpoch", m.producerEpoch());
            message.put("nextProducerEpoch", m.nextProducerEpoch());
            message.put("transactionTimeoutMs", m.transactionTimeoutMs());
            message.put("transactionStatus", m.transactionStatus());
            if (m.transactionPartitions() == null) {
                message.putNull("transactionPartitions");
            } else {
                ArrayNode partitions = message.putArray("transactionPartitions");
                for (TransactionLogValue.PartitionsSchema p : m.transactionPartitions()) {
                    ArrayNode entry = partitions.addArray();
                    entry.add(p.topic());
                    ArrayNode ids = entry.addArray();
                    p.partitionIds().forEach(ids::add);
                }
            }
            message.put("transactionLastUpdateTimestampMs", m.transactionLastUpdateTimestampMs());
            message.put("transactionStartTimestampMs", m.transactionStartTimestampMs());
            message.put("clientTransactionVersion", m.clientTransactionVersion());
            message.put("unknownTaggedFields", m.unknownTaggedFields().size());
            message.put("valueRemaining", v.remaining());
        } catch (RuntimeException e) {
            message.put("error", error(e));
        }

        // the broker's loader (TransactionStateManager reads the partition with these)
        ObjectNode broker = out.putObject("broker");
        try {
            scala.util.Either<Object, String> id = TransactionLog.readTxnRecordKey(ByteBuffer.wrap(key));
            if (id.isLeft()) {
                broker.put("unknownKeyVersion", ((Number) id.left().toOption().get()).intValue());
            } else {
                String transactionalId = id.toOption().get();
                broker.put("transactionalId", transactionalId);
                scala.Option<TransactionMetadata> read = TransactionLog.readTxnRecordValue(transactionalId,
                    ByteBuffer.wrap(value));
                TransactionMetadata t = read.get();
                broker.put("producerId", t.producerId());
                broker.put("prevProducerId", t.prevProducerId());
                broker.put("producerEpoch", t.producerEpoch());
                broker.put("lastProducerEpoch", t.lastProducerEpoch());
                broker.put("txnTimeoutMs", t.txnTimeoutMs());
                broker.put("state", t.state().id());
                broker.put("stateName", t.state().stateName());
                List<TopicPartition> sorted = new ArrayList<>(t.topicPartitions());
                sorted.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
                ArrayNode partitions = broker.putArray("topicPartitions");
                for (TopicPartition tp : sorted) {
                    partitions.addArray().add(tp.topic()).add(tp.partition());
                }
                broker.put("txnStartTimestamp", t.txnStartTimestamp());
                broker.put("txnLastUpdateTimestamp", t.txnLastUpdateTimestamp());
                broker.put("clientTransactionVersion", t.clientTransactionVersion().featureLevel());
            }
        } catch (RuntimeException e) {
            broker.put("error", error(e));
        }

        // kafka-console-consumer --formatter org.apache.kafka.tools.consumer.TransactionLogMessageFormatter
        try {
            MessageFormatter formatter = (MessageFormatter) Class.forName(FORMATTER).getDeclaredConstructor().newInstance();
            ByteArrayOutputStream printed = new ByteArrayOutputStream();
            try (PrintStream ps = new PrintStream(printed, true, StandardCharsets.UTF_8)) {
                formatter.writeTo(new ConsumerRecord<>("__transaction_state", 0, 0L, key, value), ps);
            }
            out.set("formatter", JSON.readTree(printed.toString(StandardCharsets.UTF_8)));
        } catch (ClassNotFoundException e) {
            out.putNull("formatter");
        } catch (Exception e) {
            out.putObject("formatter").put("error", error(e));
        }
        return out;
    }

    private static ObjectNode write(JsonNode in) {
        ObjectNode out = JSON.createObjectNode();
        String transactionalId = in.get("transactionalId").asText();
        out.put("key", HEX.formatHex(TransactionLog.keyToBytes(transactionalId)));
        byte[] value;
        if (in.get("via").asText().equals("message")) {
            short version = (short) in.get("version").asInt();
            TransactionLogValue m = TransactionLogValueJsonConverter.read(in.get("value"), version);
            value = MessageUtil.toVersionPrefixedBytes(version, m);
        } else {
            HashSet<TopicPartition> partitions = new HashSet<>();
            for (JsonNode tp : in.get("partitions")) {
                partitions.add(new TopicPartition(tp.get(0).asText(), tp.get(1).asInt()));
            }
            TxnTransitMetadata t = new TxnTransitMetadata(
                in.get("producerId").asLong(), in.get("prevProducerId").asLong(), in.get("nextProducerId").asLong(),
                (short) in.get("producerEpoch").asInt(), (short) in.get("lastProducerEpoch").asInt(),
                in.get("txnTimeoutMs").asInt(), TransactionState.fromId((byte) in.get("state").asInt()), partitions,
                in.get("txnStartTimestamp").asLong(), in.get("txnLastUpdateTimestamp").asLong(),
                TransactionVersion.fromFeatureLevel((short) in.get("clientTransactionVersion").asInt()));
            value = TransactionLog.valueToBytes(t, TransactionVersion.fromFeatureLevel((short) in.get("tv").asInt()));
        }
        out.put("value", HEX.formatHex(value));
        return out;
    }

    private static void produce(String bootstrap, String transactionalId, String topicA, String topicB) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topicA, 0, "k", "a0"));
            producer.send(new ProducerRecord<>(topicA, 1, "k", "a1"));
            producer.send(new ProducerRecord<>(topicB, 0, "k", "b0"));
            producer.commitTransaction();
            System.out.println("{\"event\": \"committed\"}");
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topicA, 0, "k", "aborted"));
            producer.flush();
            producer.abortTransaction();
            System.out.println("{\"event\": \"aborted\"}");
        }
    }
}
