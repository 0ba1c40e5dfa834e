package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// clock stamps the gateway's events in milliseconds, the resolution
// events are written with (schema.TimeLayout), so that what the gateway
// decides in memory is what a reader of the topics sees. Listings are
// strictly increasing (two listings of one server in one millisecond
// would leave the registry to choose between them), and a call is never
// stamped before the latest listing: a wall clock stepping back must not
// decide a call against a version older than the catalogue it was shown.
type clock struct {
	now func() time.Time

	mu   sync.Mutex   // serializes listings
	last atomic.Int64 // the latest listing, Unix ms
}

func (c *clock) ms() int64 { return c.now().UnixMilli() }

// listing returns the next listing's observed_at.
func (c *clock) listing() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := max(c.ms(), c.last.Load()+1)
	c.last.Store(t)
	return time.UnixMilli(t).UTC()
}

// call returns a call's emitted_at.
func (c *clock) call() time.Time {
	return time.UnixMilli(max(c.ms(), c.last.Load())).UTC()
}

// latest returns the latest listing's observed_at (zero before any).
func (c *clock) latest() time.Time {
	return time.UnixMilli(c.last.Load()).UTC()
}

// ids gives event ids unique across the gateway's processes: a random
// prefix per process, then a sequence ("gw-1f2e3d4c5b6a-c17").
type ids struct {
	prefix string
	seq    atomic.Uint64
}

func newIDs() *ids {
	var b [6]byte
	rand.Read(b[:])
	return &ids{prefix: "gw-" + hex.EncodeToString(b[:]) + "-"}
}

// next returns an id with kind ('c' call, 'l' listing) before the number.
func (x *ids) next(kind byte) string {
	b := make([]byte, 0, len(x.prefix)+21)
	b = append(b, x.prefix...)
	b = append(b, kind)
	b = strconv.AppendUint(b, x.seq.Add(1), 10)
	return string(b)
}
