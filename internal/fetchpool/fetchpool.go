// Package fetchpool recycles a franz-go consumer's fetch memory
// (kgo.WithPools): the decompression buffers and record slabs of the
// records it returns, once the caller recycles every record of a batch
// (kgo.Record.Recycle). Shared by the clients that read the calls topic
// at full speed: the pipeline's and the re-analysis's.
package fetchpool

import (
	"bytes"
	"math/bits"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Pool recycles a client's decompression buffers and record slabs
// (kgo.WithPools(fetchpool.New())): the caller recycles each record once
// it is done with it, and when every record of a fetched batch is
// recycled the batch's memory comes back here. Without it these two
// allocations were about a quarter of resolverd's allocation rate at full
// speed, all of it for the garbage collector.
//
// Decompression buffers are pooled by size class, and a snappy batch (the
// producers' default codec) says its decoded length: each batch gets a
// buffer that fits it. One pool of buffers of any size handed small ones
// to large batches, which the codec then replaced with a fresh allocation
// of its own.
type Pool struct {
	bytes [numClasses]sync.Pool // *[]byte, cap == classSize(i)
	recs  sync.Pool             // *[]kgo.Record
}

// New returns an empty pool, for one client.
func New() *Pool { return new(Pool) }

var (
	_ kgo.PoolDecompressBytes = (*Pool)(nil)
	_ kgo.PoolRecords         = (*Pool)(nil)
)

// Size classes: 4 KiB, then four per power of two (at most 25% of a
// buffer unused) up to 64 MiB; larger buffers are not pooled.
const (
	minClassShift = 12
	numClasses    = 4*(26-minClassShift) + 1
)

// classOf returns the smallest class whose size is at least n.
func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	e := bits.Len(uint(n-1)) - 1   // 2^e < n <= 2^(e+1)
	q := (n - 1 - 1<<e) >> (e - 2) // quarter steps above 2^e: 0..3
	return 4*(e-minClassShift) + q + 1
}

// classSize is the capacity of the buffers of class c.
func classSize(c int) int {
	if c == 0 {
		return 1 << minClassShift
	}
	e := (c-1)/4 + minClassShift
	return 1<<e + ((c-1)%4+1)<<(e-2)
}

// xerialPrefix starts a snappy batch in the xerial framing, which does not
// say its decoded length up front.
var xerialPrefix = []byte{130, 83, 78, 65, 80, 80, 89, 0}

// GetDecompressBytes returns an empty buffer with room for the decoded
// batch when its codec says how much that is, else for four times the
// compressed bytes (the client grows it if the batch needs more).
func (p *Pool) GetDecompressBytes(compressed []byte, codec kgo.CompressionCodecType) []byte {
	n := 4 * len(compressed)
	if codec == kgo.CodecSnappy && !bytes.HasPrefix(compressed, xerialPrefix) {
		if l, err := s2.DecodedLen(compressed); err == nil {
			n = l
		}
	}
	c := classOf(n)
	if c >= numClasses {
		// Not from a header the client has checked yet (its
		// MaxDecompressBatchBytes comes after): let the codec allocate
		// once the claim has passed that check.
		return nil
	}
	if b, ok := p.bytes[c].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, classSize(c))
}

// PutDecompressBytes keeps b in the largest class it can serve.
func (p *Pool) PutDecompressBytes(b []byte) {
	c := classOf(cap(b))
	if classSize(c) > cap(b) {
		c-- // a buffer the client grew to an odd size
	}
	if c < 0 || c >= numClasses {
		return
	}
	b = b[:0:classSize(c)]
	p.bytes[c].Put(&b)
}

// GetRecords returns a pooled slab of at least n records, or a new one.
func (p *Pool) GetRecords(n int) []kgo.Record {
	if rs, ok := p.recs.Get().(*[]kgo.Record); ok && cap(*rs) >= n {
		return (*rs)[:n]
	}
	return make([]kgo.Record, n)
}

func (p *Pool) PutRecords(rs []kgo.Record) { p.recs.Put(&rs) }
