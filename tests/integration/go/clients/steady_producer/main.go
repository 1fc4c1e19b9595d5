// Command steady_producer is franz-go's steady producer for the integration tests (idempotent, franz-go's
// default): one record every few milliseconds, value "PREFIX-NNNNNN" to partition N % PARTITIONS, until a
// line "stop" (or the end of stdin); then it flushes for at most the flush timeout and exits. One JSON line
// per event on stdout, as tests/integration/java/SteadyProducer.java prints them:
// {"event":"acked","value":v,"sent_ms":t,"acked_ms":t}, {"event":"error","value":v,"message":m},
// {"event":"closed","sent":n} (times: the wall clock, in ms).
//
// Usage: steady_producer BOOTSTRAP TOPIC PREFIX PARTITIONS INTERVAL_MS FLUSH_TIMEOUT_MS [METADATA_MAX_AGE_MS]
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"gateway/tests/clients/jsonlines"
)

var emit = jsonlines.Emit

func main() {
	if len(os.Args) != 7 && len(os.Args) != 8 {
		fmt.Fprintln(os.Stderr, "usage: steady_producer BOOTSTRAP TOPIC PREFIX PARTITIONS INTERVAL_MS FLUSH_TIMEOUT_MS [METADATA_MAX_AGE_MS]")
		os.Exit(2)
	}
	topic, prefix := os.Args[2], os.Args[3]
	partitions, err1 := strconv.Atoi(os.Args[4])
	interval, err2 := strconv.Atoi(os.Args[5])
	flushTimeout, err3 := strconv.Atoi(os.Args[6])
	if err1 != nil || err2 != nil || err3 != nil || partitions <= 0 || interval <= 0 {
		fmt.Fprintln(os.Stderr, "steady_producer: PARTITIONS, INTERVAL_MS and FLUSH_TIMEOUT_MS are positive integers")
		os.Exit(2)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(os.Args[1], ",")...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ClientID("franz-go-steady-producer"),
	}
	if len(os.Args) == 8 {
		age, err := strconv.Atoi(os.Args[7])
		if err != nil || age <= 0 {
			fmt.Fprintln(os.Stderr, "steady_producer: METADATA_MAX_AGE_MS is a positive integer")
			os.Exit(2)
		}
		opts = append(opts, kgo.MetadataMaxAge(time.Duration(age)*time.Millisecond))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		emit(map[string]any{"event": "error", "value": nil, "message": err.Error()})
		os.Exit(1)
	}
	stop := jsonlines.StopOn("stop")
	sent := 0
	ticker := time.NewTicker(time.Duration(interval) * time.Millisecond)
	defer ticker.Stop()
loop:
	for {
		select {
		case <-stop:
			break loop
		case <-ticker.C:
			value := fmt.Sprintf("%s-%06d", prefix, sent)
			sentMs := time.Now().UnixMilli()
			record := &kgo.Record{Topic: topic, Partition: int32(sent % partitions), Value: []byte(value)}
			client.Produce(context.Background(), record, func(_ *kgo.Record, err error) {
				if err != nil {
					emit(map[string]any{"event": "error", "value": value, "message": err.Error()})
					return
				}
				emit(map[string]any{"event": "acked", "value": value, "sent_ms": sentMs, "acked_ms": time.Now().UnixMilli()})
			})
			sent++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(flushTimeout)*time.Millisecond)
	defer cancel()
	_ = client.Flush(ctx) // what is still unacknowledged after the timeout has no "acked" line
	client.Close()
	emit(map[string]any{"event": "closed", "sent": sent})
}
