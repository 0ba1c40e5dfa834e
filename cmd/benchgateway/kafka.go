package main

import (
	"context"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/internal/benchutil"
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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); benchutil.Trim(ctx, k.ListenAddrs(), auditTopic) }()
	return p, func() { cancel(); <-done; p.Close(); k.Close() }, nil
}
