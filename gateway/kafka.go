package gateway

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/schema"
)

// KafkaPublisher produces listing events with a franz-go client, which
// should require acks from all in-sync replicas (kgo.RequiredAcks
// (kgo.AllISRAcks()), franz-go's default): the gateway applies a listing
// to its registry only once it is in the topic, so that the pipeline
// reads the registry the gateway decided against.
type KafkaPublisher struct {
	cl    *kgo.Client
	topic string
}

var _ Publisher = (*KafkaPublisher)(nil)

// NewKafkaPublisher returns a publisher to topic through cl, which the
// caller closes.
func NewKafkaPublisher(cl *kgo.Client, topic string) *KafkaPublisher {
	return &KafkaPublisher{cl: cl, topic: topic}
}

// Publish produces the event and waits for its acknowledgement.
func (p *KafkaPublisher) Publish(ctx context.Context, l *schema.Listing, event []byte) error {
	r := &kgo.Record{Topic: p.topic, Key: []byte(l.Key()), Value: event, Timestamp: l.ObservedAt}
	if err := p.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("produce to %s: %w", p.topic, err)
	}
	return nil
}
