// Command scram_client is the front door's franz-go client for the integration tests: it logs in with
// SASL/SCRAM over TLS (SASL_SSL, as Kafka's clients do: TLS first, then SaslHandshake and SaslAuthenticate),
// produces records to one topic-partition and waits for their acks, then fetches them back from the first
// acknowledged offset. It prints one JSON object and exits 1 when anything failed (the error's text is
// franz-go's, e.g. "SASL_AUTHENTICATION_FAILED: ..." for a refused login).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Result is what the program prints: the records as acknowledged and as fetched back, or the error.
type Result struct {
	Produced []Record `json:"produced"`
	Consumed []Record `json:"consumed"`
	Error    string   `json:"error,omitempty"`
}

// Record is one record's offset and value.
type Record struct {
	Offset int64  `json:"offset"`
	Value  string `json:"value"`
}

type options struct {
	bootstrap string
	caFile    string
	user      string
	password  string
	mechanism string
	topic     string
	partition int
	count     int
	timeout   time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.bootstrap, "bootstrap", "", "host:port[,host:port] of a SASL_SSL listener")
	flag.StringVar(&o.caFile, "ca", "", "PEM file of the CA that signed the listener's certificate")
	flag.StringVar(&o.user, "user", os.Getenv("SCRAM_USER"), "the SCRAM user (default $SCRAM_USER)")
	flag.StringVar(&o.password, "password", "", "the user's password (default $SCRAM_PASSWORD, which keeps it off the command line)")
	flag.StringVar(&o.mechanism, "mechanism", "SCRAM-SHA-512", "SCRAM-SHA-512 or SCRAM-SHA-256")
	flag.StringVar(&o.topic, "topic", "", "the topic to produce to and fetch from")
	flag.IntVar(&o.partition, "partition", 0, "the partition")
	flag.IntVar(&o.count, "count", 10, "how many records")
	flag.DurationVar(&o.timeout, "timeout", 60*time.Second, "give up after this long")
	flag.Parse()
	if o.password == "" {
		o.password = os.Getenv("SCRAM_PASSWORD")
	}
	result, err := run(o)
	if err != nil {
		result.Error = err.Error()
	}
	out, _ := json.Marshal(result)
	fmt.Println(string(out))
	if err != nil {
		os.Exit(1)
	}
}

func run(o options) (Result, error) {
	result := Result{Produced: []Record{}, Consumed: []Record{}}
	if o.bootstrap == "" || o.caFile == "" || o.user == "" || o.password == "" || o.topic == "" || o.count < 1 {
		return result, errors.New("-bootstrap, -ca, -user, -password (or $SCRAM_PASSWORD), -topic and a positive -count are required")
	}
	common, err := clientOptions(o)
	if err != nil {
		return result, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()

	producer, err := kgo.NewClient(append(common, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		return result, err
	}
	defer producer.Close()
	// A refused login fails the first request; without this ping a produce would retry until its timeout.
	if err := producer.Ping(ctx); err != nil {
		return result, err
	}
	records := make([]*kgo.Record, o.count)
	for i := range records {
		records[i] = &kgo.Record{Topic: o.topic, Partition: int32(o.partition), Value: []byte(fmt.Sprintf("franz-go-%d", i))}
	}
	if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return result, fmt.Errorf("produce: %w", err)
	}
	for _, r := range records {
		result.Produced = append(result.Produced, Record{Offset: r.Offset, Value: string(r.Value)})
	}

	first := records[0].Offset
	consumer, err := kgo.NewClient(append(common, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		o.topic: {int32(o.partition): kgo.NewOffset().At(first)},
	}))...)
	if err != nil {
		return result, err
	}
	defer consumer.Close()
	for len(result.Consumed) < o.count {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			return result, fmt.Errorf("fetched %d of %d records within %s", len(result.Consumed), o.count, o.timeout)
		}
		if errs := fetches.Errors(); len(errs) > 0 {
			return result, fmt.Errorf("fetch: %w", errs[0].Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if len(result.Consumed) < o.count {
				result.Consumed = append(result.Consumed, Record{Offset: r.Offset, Value: string(r.Value)})
			}
		})
	}
	return result, nil
}

func clientOptions(o options) ([]kgo.Opt, error) {
	pem, err := os.ReadFile(o.caFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", o.caFile)
	}
	auth := scram.Auth{User: o.user, Pass: o.password}
	var mechanism sasl.Mechanism
	switch o.mechanism {
	case "SCRAM-SHA-512":
		mechanism = auth.AsSha512Mechanism()
	case "SCRAM-SHA-256":
		mechanism = auth.AsSha256Mechanism()
	default:
		return nil, fmt.Errorf("unknown mechanism %q: SCRAM-SHA-512 or SCRAM-SHA-256", o.mechanism)
	}
	return []kgo.Opt{
		kgo.SeedBrokers(strings.Split(o.bootstrap, ",")...),
		// The host name (or IP) dialled is the one verified, as Kafka's ssl.endpoint.identification.algorithm=https.
		kgo.DialTLSConfig(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}),
		kgo.SASL(mechanism),
		kgo.ClientID("franz-go-scram-client"),
	}, nil
}
