import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;

import org.apache.kafka.storage.internals.log.AbortedTxn;
import org.apache.kafka.storage.internals.log.TransactionIndex;
import org.apache.kafka.storage.internals.log.TxnIndexSearchResult;

/**
 * Apache Kafka's own transaction index (`TransactionIndex`, `AbortedTxn`) driven by a script on stdin, one
 * operation a line, for the tests to run the same script through `storage.transaction_index`:
 *
 *   open PATH START_OFFSET | append PRODUCER_ID FIRST LAST LAST_STABLE | all | collect FETCH UPPER_BOUND
 *   | truncate OFFSET | reset | sanity | flush | close | delete
 *
 * One JSON line per operation on stdout: {"op":o} when it returned nothing, with "txns":[[version,
 * producerId, firstOffset, lastOffset, lastStableOffset], ...] (all, collect), "complete":b (collect) or
 * "deleted":b (delete); {"op":o,"error":class,"message":m} when it threw.
 */
public final class TxnIndexProbe {
    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : (s == null ? "" : s).toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    private static String txns(List<AbortedTxn> txns) {
        StringBuilder b = new StringBuilder("[");
        for (AbortedTxn t : txns) {
            if (b.length() > 1) b.append(',');
            b.append('[').append(t.version()).append(',').append(t.producerId()).append(',').append(t.firstOffset())
                .append(',').append(t.lastOffset()).append(',').append(t.lastStableOffset()).append(']');
        }
        return b.append(']').toString();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        TransactionIndex index = null;
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w[0].isEmpty()) continue;
            String out = "{\"op\":" + quote(w[0]);
            try {
                switch (w[0]) {
                    case "open":
                        index = new TransactionIndex(Long.parseLong(w[2]), new File(w[1]));
                        break;
                    case "append":
                        index.append(new AbortedTxn(Long.parseLong(w[1]), Long.parseLong(w[2]), Long.parseLong(w[3]),
                            Long.parseLong(w[4])));
                        break;
                    case "all":
                        out += ",\"txns\":" + txns(index.allAbortedTxns());
                        break;
                    case "collect":
                        TxnIndexSearchResult r = index.collectAbortedTxns(Long.parseLong(w[1]), Long.parseLong(w[2]));
                        out += ",\"txns\":" + txns(r.abortedTransactions()) + ",\"complete\":" + r.isComplete();
                        break;
                    case "truncate":
                        index.truncateTo(Long.parseLong(w[1]));
                        break;
                    case "reset":
                        index.reset();
                        break;
                    case "sanity":
                        index.sanityCheck();
                        break;
                    case "flush":
                        index.flush();
                        break;
                    case "close":
                        index.close();
                        break;
                    case "delete":
                        out += ",\"deleted\":" + index.deleteIfExists();
                        break;
                    default:
                        throw new IllegalArgumentException("unknown operation " + w[0]);
                }
            } catch (Exception e) {
                out += ",\"error\":" + quote(e.getClass().getName()) + ",\"message\":" + quote(e.getMessage());
            }
            System.out.println(out + "}");
            System.out.flush();
        }
    }
}
