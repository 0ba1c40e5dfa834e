package main

import (
	"context"
	"encoding/json"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/gateway"
)

const auditTopic = "tool-audit"

// kafkaAudit is an audit trail on an embedded broker: every record
// produced with acks=all and waited for, as the gateway's audit producer
// does; the records are deleted as the run goes (nothing consumes them,
// and the broker keeps them in memory).
func kafkaAudit() (gateway.Auditor, func(), error) {
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(6, auditTopic))
	if err != nil {
		return nil, nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.ListenAddrs()...), kgo.DefaultProduceTopic(auditTopic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	if err != nil {
		k.Close()
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); trim(ctx, cl) }()
	produce := func(ctx context.Context, recs ...*gateway.Record) error {
		rs := make([]*kgo.Record, len(recs))
		for i, r := range recs {
			v, _ := json.Marshal(r)
			rs[i] = &kgo.Record{Key: []byte(r.Key), Value: v}
		}
		return cl.ProduceSync(ctx, rs...).FirstErr()
	}
	return auditorFunc(produce), func() { cancel(); <-done; cl.Close(); k.Close() }, nil
}

type auditorFunc func(ctx context.Context, recs ...*gateway.Record) error

func (f auditorFunc) Produce(ctx context.Context, recs ...*gateway.Record) error {
	return f(ctx, recs...)
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
