package stream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/internal/topicrange"
)

// Registry checkpoints in Kafka.
//
// A checkpoint is the registry store's state (registry
// AppendCheckpoint) and the listings offsets it covers: every listing
// record below them is in the state. It is written to the checkpoint
// topic (one partition, delete policy, retention a day) as chunk records
// and then a marker record, whose value says where the chunks start, how
// many there are, their SHA-256, and the offsets. An instance starting
// up reads the last marker (from the end of the topic: the cost does not
// depend on how many checkpoints were written), loads the state and reads
// the listings topic from those offsets only. Listings produced after the
// checkpoint but observed (event time) long before it are then applied as
// any late listing is: the state holds every instant the store keeps, so
// they land exactly where a full replay would put them. Several instances
// may write; chunks of different checkpoints may interleave (a marker
// names its own by generation), and any complete checkpoint is correct
// because applying a listing twice changes nothing. A torn write (no
// marker after the last chunks) is skipped: every chunk carries the offset
// of the last marker its writer knew.

const (
	checkpointChunk = 512 << 10 // bytes of state per chunk record, under Kafka's default 1 MB
	hdrGen          = "ckpt-gen"
	hdrPart         = "ckpt-part"
	hdrPrev         = "ckpt-prev" // offset of the last marker the writer knew, -1 none
	hdrMarker       = "ckpt-marker"
)

// checkpointMarker is a marker record's value.
type checkpointMarker struct {
	Gen           string          `json:"gen"`
	First         int64           `json:"first"` // offset of the first chunk
	Parts         int             `json:"parts"`
	Size          int             `json:"size"`
	SHA256        string          `json:"sha256"`
	ListingsTopic string          `json:"listings_topic"`
	Offsets       map[int32]int64 `json:"offsets"` // next listings offset to read, per partition
	WrittenAt     time.Time       `json:"written_at"`
}

// checkpointer writes checkpoints; write is called from one goroutine at
// a time.
type checkpointer struct {
	cfg     Config
	cl      *kgo.Client
	adm     *kadm.Client
	created bool
	last    int64 // offset of the last marker written, -1 none
}

// write produces data as one checkpoint covering offsets.
func (c *checkpointer) write(ctx context.Context, data []byte, offsets map[int32]int64) error {
	topic := c.cfg.CheckpointTopic
	if !c.created {
		// One partition (markers find their chunks by offset), deleted
		// after a day: a restart reads only the newest.
		_, err := c.adm.CreateTopic(ctx, 1, -1, map[string]*string{
			"cleanup.policy": kadm.StringPtr("delete"),
			"retention.ms":   kadm.StringPtr(strconv.Itoa(int((24 * time.Hour).Milliseconds()))),
		}, topic)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create checkpoint topic %s: %w", topic, err)
		}
		c.created = true
	}
	sum := sha256.Sum256(data)
	gen := c.cfg.ClientID + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	parts := max(1, (len(data)+checkpointChunk-1)/checkpointChunk)
	prev := []byte(strconv.FormatInt(c.last, 10))
	first := int64(-1)
	for i := range parts {
		chunk := data[i*checkpointChunk : min(len(data), (i+1)*checkpointChunk)]
		rec := &kgo.Record{Topic: topic, Partition: 0, Value: chunk, Headers: []kgo.RecordHeader{
			{Key: hdrGen, Value: []byte(gen)},
			{Key: hdrPart, Value: []byte(strconv.Itoa(i))},
			{Key: hdrPrev, Value: prev},
		}}
		r, err := c.cl.ProduceSync(ctx, rec).First()
		if err != nil {
			return fmt.Errorf("produce checkpoint chunk: %w", err)
		}
		if i == 0 {
			first = r.Offset
		}
	}
	m, _ := json.Marshal(checkpointMarker{Gen: gen, First: first, Parts: parts, Size: len(data),
		SHA256: hex.EncodeToString(sum[:]), ListingsTopic: c.cfg.ListingsTopic, Offsets: offsets, WrittenAt: time.Now().UTC()})
	r, err := c.cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: m, Headers: []kgo.RecordHeader{
		{Key: hdrGen, Value: []byte(gen)}, {Key: hdrMarker, Value: []byte("1")},
	}}).First()
	if err != nil {
		return fmt.Errorf("produce checkpoint marker: %w", err)
	}
	c.last = r.Offset
	return nil
}

// errNoCheckpoint: the topic holds no complete checkpoint.
var errNoCheckpoint = errors.New("no checkpoint")

// readCheckpoint returns the newest complete checkpoint of the topic.
// opts make a client to the cluster; it is closed before returning.
func readCheckpoint(ctx context.Context, cfg Config, adm *kadm.Client, opts []kgo.Opt) (checkpointMarker, []byte, error) {
	topic := cfg.CheckpointTopic
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return checkpointMarker{}, nil, fmt.Errorf("list end offsets: %w", err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return checkpointMarker{}, nil, fmt.Errorf("list start offsets: %w", err)
	}
	end, eok := ends.Lookup(topic, 0)
	start, sok := starts.Lookup(topic, 0)
	if !eok || !sok || end.Err != nil || start.Err != nil {
		if end.Err != nil && errors.Is(end.Err, kerr.UnknownTopicOrPartition) || !eok {
			return checkpointMarker{}, nil, errNoCheckpoint
		}
		return checkpointMarker{}, nil, fmt.Errorf("checkpoint topic offsets: %w", errors.Join(end.Err, start.Err))
	}
	if end.Offset <= start.Offset {
		return checkpointMarker{}, nil, errNoCheckpoint
	}
	// The last record is a marker, or a chunk that names the last marker
	// its writer knew.
	var marker *kgo.Record
	at := end.Offset - 1
	for range 2 {
		var rec *kgo.Record
		if err := readRange(ctx, topic, at, at+1, opts, func(r *kgo.Record) { rec = r }); err != nil {
			return checkpointMarker{}, nil, err
		}
		if rec == nil {
			return checkpointMarker{}, nil, errNoCheckpoint
		}
		if headerValue(rec, hdrMarker) != "" {
			marker = rec
			break
		}
		p := headerValue(rec, hdrPrev)
		prev, err := strconv.ParseInt(p, 10, 64)
		if err != nil || prev < start.Offset {
			return checkpointMarker{}, nil, errNoCheckpoint
		}
		at = prev
	}
	if marker == nil {
		return checkpointMarker{}, nil, errNoCheckpoint
	}
	var m checkpointMarker
	if err := json.Unmarshal(marker.Value, &m); err != nil {
		return m, nil, fmt.Errorf("checkpoint marker at %d: %w", marker.Offset, err)
	}
	if m.ListingsTopic != cfg.ListingsTopic {
		return m, nil, fmt.Errorf("checkpoint of listings topic %q, not %q", m.ListingsTopic, cfg.ListingsTopic)
	}
	if m.First < start.Offset || m.First >= marker.Offset || m.Parts <= 0 || m.Size < 0 {
		return m, nil, fmt.Errorf("checkpoint marker at %d: chunks at %d not in the topic", marker.Offset, m.First)
	}
	chunks := make([][]byte, m.Parts)
	if err := readRange(ctx, topic, m.First, marker.Offset, opts, func(r *kgo.Record) {
		if headerValue(r, hdrGen) != m.Gen {
			return // another writer's
		}
		p := headerValue(r, hdrPart)
		if i, err := strconv.Atoi(p); err == nil && i >= 0 && i < len(chunks) {
			chunks[i] = r.Value
		}
	}); err != nil {
		return m, nil, err
	}
	data := bytes.Join(chunks, nil)
	sum := sha256.Sum256(data)
	if len(data) != m.Size || hex.EncodeToString(sum[:]) != m.SHA256 {
		return m, nil, fmt.Errorf("checkpoint %s: chunks missing or altered", m.Gen)
	}
	return m, data, nil
}

// readRange calls f with each record of partition 0 of topic in [from,
// to), read as every range reader of the module reads (topicrange.Read).
func readRange(ctx context.Context, topic string, from, to int64, opts []kgo.Opt, f func(*kgo.Record)) error {
	err := topicrange.Read(ctx, opts, topic, map[int32]topicrange.Range{0: {Start: from, End: to}}, nil, func(_ int32, recs []*kgo.Record) (bool, error) {
		for _, r := range recs {
			f(r)
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("read checkpoint topic: %w", err)
	}
	return nil
}
