package main

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/audit"
)

const auditTopic = "tool-audit"

// kafkaAudit is an audit trail on an embedded broker through the
// gateway's own producer (audit.Kafka: acks=all, waited for before each
// call is acted on); the records are deleted as the run goes (nothing
// consumes them, and the broker keeps them in memory).
func kafkaAudit() (audit.Producer, func(), error) {
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(6, auditTopic))
	if err != nil {
		return nil, nil, err
	}
	p, err := audit.NewKafka(audit.KafkaConfig{Brokers: k.ListenAddrs(), Topic: auditTopic}, nil, nil)
	if err != nil {
		k.Close()
		return nil, nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.ListenAddrs()...))
	if err != nil {
		p.Close()
		k.Close()
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); trim(ctx, cl) }()
	return p, func() { cancel(); <-done; cl.Close(); p.Close(); k.Close() }, nil
}

// trim deletes the audit records produced so far, twice a second.
func trim(ctx context.Context, cl *kgo.Client) {
	adm := kadm.NewClient(cl)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ends, err := adm.ListEndOffsets(ctx, auditTopic)
		if err != nil {
			continue
		}
		os := kadm.Offsets{}
		ends.Each(func(o kadm.ListedOffset) { os.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset}) })
		adm.DeleteRecords(ctx, os)
	}
}
