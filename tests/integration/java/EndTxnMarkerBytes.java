import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.Iterator;

import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.EndTransactionMarker;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.common.record.RecordBatch;

/**
 * Kafka's own end-transaction marker codec, one stdin line per case, one stdout line per case:
 *
 *   build OFFSET TIMESTAMP LEADER_EPOCH PRODUCER_ID PRODUCER_EPOCH COMMIT|ABORT COORDINATOR_EPOCH
 *       -> "ok HEX" (MemoryRecords.withEndTransactionMarker) or "error CLASS: MESSAGE"
 *   parse HEX
 *       -> "ok TYPE COORDINATOR_EPOCH" (first batch: ensureValid, isControlBatch, first record read with
 *          EndTransactionMarker.deserialize, as a reader of the log does) or "error CLASS: MESSAGE"
 */
public final class EndTxnMarkerBytes {
    private EndTxnMarkerBytes() {
    }

    public static void main(String[] args) throws Exception {
        HexFormat hex = HexFormat.of();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            String[] f = line.trim().split(" ");
            try {
                if (f[0].equals("build")) {
                    EndTransactionMarker marker = new EndTransactionMarker(
                        ControlRecordType.valueOf(f[6]), Integer.parseInt(f[7]));
                    MemoryRecords records = MemoryRecords.withEndTransactionMarker(
                        Long.parseLong(f[1]), Long.parseLong(f[2]), Integer.parseInt(f[3]),
                        Long.parseLong(f[4]), Short.parseShort(f[5]), marker);
                    ByteBuffer buffer = records.buffer();
                    byte[] bytes = new byte[buffer.remaining()];
                    buffer.get(bytes);
                    System.out.println("ok " + hex.formatHex(bytes));
                } else if (f[0].equals("parse")) {
                    byte[] bytes = hex.parseHex(f[1]);
                    RecordBatch batch = MemoryRecords.readableRecords(ByteBuffer.wrap(bytes)).batches().iterator().next();
                    batch.ensureValid();
                    if (!batch.isControlBatch()) {
                        throw new IllegalStateException("not a control batch");
                    }
                    Iterator<Record> it = batch.iterator();
                    EndTransactionMarker marker = EndTransactionMarker.deserialize(it.next());
                    System.out.println("ok " + marker.controlType() + " " + marker.coordinatorEpoch());
                } else {
                    throw new IllegalArgumentException("unknown command " + f[0]);
                }
            } catch (RuntimeException e) {
                System.out.println("error " + e.getClass().getName() + ": " + String.valueOf(e.getMessage()).replace('\n', ' '));
            }
        }
    }
}
