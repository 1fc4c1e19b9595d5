import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java transactional producer and a read_committed consumer, for the tests: TRANSACTIONS transactions of
 * RECORDS records each, spread over PARTITIONS partitions of TOPIC; transaction i aborts when i % 3 == 1 (its
 * records sent and flushed first), commits otherwise. Then a read_committed consumer reads every partition from
 * the start to its end offsets (for read_committed: the last stable offset). One line per event on stdout:
 * "committed i", "aborted i", "read VALUE", "done N" (N records read). With a consumer group, each transaction
 * also sends the group's offset i + 1 of the topic's partition 0 to it (sendOffsetsToTransaction).
 *
 * Arguments: bootstrap topic partitions transactions records transactional-id [group]
 */
public final class TransactionalClients {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        int transactions = Integer.parseInt(args[3]);
        int records = Integer.parseInt(args[4]);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[5]);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        ConsumerGroupMetadata group = null;
        if (args.length > 6) {  // the group's metadata as its consumer has it (generation -1: not joined)
            Properties g = new Properties();
            g.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            g.put(ConsumerConfig.GROUP_ID_CONFIG, args[6]);
            g.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            g.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            try (KafkaConsumer<String, String> member = new KafkaConsumer<>(g)) {
                group = member.groupMetadata();
            }
        }
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            for (int i = 0; i < transactions; i++) {
                producer.beginTransaction();
                for (int r = 0; r < records; r++) {
                    producer.send(new ProducerRecord<>(topic, r % partitions, "k", "t" + i + "-" + r));
                }
                if (group != null) {
                    producer.sendOffsetsToTransaction(Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(i + 1)),
                            group);
                }
                if (i % 3 == 1) {
                    producer.flush();
                    producer.abortTransaction();
                    System.out.println("aborted " + i);
                } else {
                    producer.commitTransaction();
                    System.out.println("committed " + i);
                }
            }
        }
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        int read = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
            List<TopicPartition> assigned = new ArrayList<>();
            for (int i = 0; i < partitions; i++) {
                assigned.add(new TopicPartition(topic, i));
            }
            consumer.assign(assigned);
            consumer.seekToBeginning(assigned);
            var ends = consumer.endOffsets(assigned);
            long deadline = System.currentTimeMillis() + 60_000;
            while (System.currentTimeMillis() < deadline) {
                boolean done = true;
                for (TopicPartition tp : assigned) {
                    done &= consumer.position(tp) >= ends.get(tp);
                }
                if (done) {
                    break;
                }
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                    System.out.println("read " + record.value());
                    read++;
                }
            }
        }
        System.out.println("done " + read);
    }
}
