import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;
import java.util.Random;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Kafka's Java transactional producer run until told to stop, for the fault tests: transaction i sends RECORDS
 * records "i-r" spread over PARTITIONS partitions of TOPIC, then aborts at random (one in three, seeded) or
 * commits. Its outcome is printed once known:
 * "committed i" / "aborted i" when the call returned; "unknown i ERROR" when the producer failed in a way that
 * leaves the outcome to the coordinator (a new producer with the same id is made, which completes or aborts it).
 * A commit or abort that times out is retried, as the client allows. It stops before the next transaction once
 * STOP_FILE exists, and prints "done".
 *
 * Arguments: bootstrap topic partitions records seed transactional-id stop-file [key=value producer settings...]
 */
public final class TransactionalStream {
    private static KafkaProducer<String, String> producer(Properties p) {
        while (true) {
            KafkaProducer<String, String> producer = new KafkaProducer<>(p);
            try {
                producer.initTransactions();
                return producer;
            } catch (TimeoutException e) {
                System.out.println("init " + e);
                producer.close();
            }
        }
    }

    /** The transaction's end, retried while it times out, as `commitTransaction`/`abortTransaction` allow. */
    private static void end(KafkaProducer<String, String> producer, boolean abort, int i) {
        while (true) {
            try {
                if (abort) {
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
                return;
            } catch (TimeoutException e) {
                System.out.println("retrying " + i + " " + e);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String topic = args[1];
        int partitions = Integer.parseInt(args[2]);
        int records = Integer.parseInt(args[3]);
        Random random = new Random(Long.parseLong(args[4]));
        Path stop = Path.of(args[6]);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, args[5]);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        for (int a = 7; a < args.length; a++) {
            String[] kv = args[a].split("=", 2);
            p.put(kv[0], kv[1]);
        }
        KafkaProducer<String, String> producer = producer(p);
        for (int i = 0; !Files.exists(stop); i++) {
            boolean abort = random.nextInt(3) == 0;
            try {
                try {
                    producer.beginTransaction();
                    for (int r = 0; r < records; r++) {
                        producer.send(new ProducerRecord<>(topic, (i + r) % partitions, "k", i + "-" + r));
                    }
                    if (abort) {
                        producer.flush();
                    }
                    end(producer, abort, i);
                    System.out.println((abort ? "aborted " : "committed ") + i);
                } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException
                         | UnsupportedVersionException | InvalidProducerEpochException e) {
                    throw e;  // fatal: the producer cannot abort itself
                } catch (KafkaException e) {
                    // abortable (a send or the commit failed): the producer aborts the transaction
                    System.out.println("abortable " + i + " " + e.toString().replace('\n', ' '));
                    end(producer, true, i);
                    System.out.println("aborted " + i);
                }
            } catch (KafkaException e) {
                // the producer cannot go on: a new one with the same id completes or aborts the transaction
                System.out.println("unknown " + i + " " + e.toString().replace('\n', ' '));
                try {
                    producer.close();
                } catch (KafkaException closing) {
                    System.out.println("closing " + closing);
                }
                producer = producer(p);
            }
            System.out.flush();
        }
        producer.close();
        System.out.println("done");
    }
}
