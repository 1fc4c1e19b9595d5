// Command group_consumer is franz-go's group consumer for the integration tests: it joins a group on one topic
// with the range balancer and polls until a line "close" (or the end of stdin), committing synchronously after
// every poll that returned records (rebalances wait until that commit is done). One JSON line per event on
// stdout, as tests/integration/java/GroupConsumer.java prints them: {"event":"assigned"|"revoked"|"lost",
// "partitions":[...]}, {"event":"record","partition":p,"offset":o,"value":"..."}, {"event":"committed"},
// {"event":"error","message":"..."}, {"event":"closed"}. Closing leaves the group.
//
// Usage: group_consumer BOOTSTRAP GROUP TOPIC NAME [METADATA_MAX_AGE_MS]
package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"gateway/tests/clients/jsonlines"
)

var emit = jsonlines.Emit

func partitions(assigned map[string][]int32) []int32 {
	all := []int32{}
	for _, ps := range assigned {
		all = append(all, ps...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return all
}

func main() {
	if len(os.Args) != 5 && len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: group_consumer BOOTSTRAP GROUP TOPIC NAME [METADATA_MAX_AGE_MS]")
		os.Exit(2)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(os.Args[1], ",")...),
		kgo.ConsumerGroup(os.Args[2]),
		kgo.ConsumeTopics(os.Args[3]),
		kgo.ClientID(os.Args[4]),
		kgo.Balancers(kgo.RangeBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(6 * time.Second),
		kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
			emit(map[string]any{"event": "assigned", "partitions": partitions(assigned)})
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				emit(map[string]any{"event": "error", "message": err.Error()})
			}
			emit(map[string]any{"event": "revoked", "partitions": partitions(revoked)})
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			emit(map[string]any{"event": "lost", "partitions": partitions(lost)})
		}),
	}
	if len(os.Args) == 6 {
		age, err := strconv.Atoi(os.Args[5])
		if err != nil || age <= 0 {
			fmt.Fprintln(os.Stderr, "group_consumer: METADATA_MAX_AGE_MS is a positive integer")
			os.Exit(2)
		}
		opts = append(opts, kgo.MetadataMaxAge(time.Duration(age)*time.Millisecond))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		emit(map[string]any{"event": "error", "message": err.Error()})
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stop := jsonlines.StopOn("close")
	go func() {
		<-stop
		cancel()
	}()
	for ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		fetches.EachError(func(topic string, partition int32, err error) {
			if ctx.Err() == nil {
				emit(map[string]any{"event": "error", "message": fmt.Sprintf("%s[%d]: %v", topic, partition, err)})
			}
		})
		records := 0
		fetches.EachRecord(func(r *kgo.Record) {
			records++
			emit(map[string]any{"event": "record", "partition": r.Partition, "offset": r.Offset, "value": string(r.Value)})
		})
		if records > 0 {
			if err := client.CommitUncommittedOffsets(context.Background()); err != nil {
				emit(map[string]any{"event": "error", "message": err.Error()})
			} else {
				emit(map[string]any{"event": "committed"})
			}
		}
		client.AllowRebalance()
	}
	client.Close() // leaves the group
	emit(map[string]any{"event": "closed"})
}
