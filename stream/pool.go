package stream

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchPool recycles the calls client's decompression buffers and record
// slabs (kgo.WithPools): a worker recycles each record once it is decided,
// and when every record of a fetched batch is recycled the batch's memory
// comes back here. Without it these two allocations were about a quarter
// of resolverd's allocation rate at full speed, all of it for the garbage
// collector.
type fetchPool struct {
	bytes sync.Pool // *[]byte
	recs  sync.Pool // *[]kgo.Record
}

var (
	_ kgo.PoolDecompressBytes = (*fetchPool)(nil)
	_ kgo.PoolRecords         = (*fetchPool)(nil)
)

// GetDecompressBytes returns a pooled buffer; the client grows it if the
// batch needs more.
func (p *fetchPool) GetDecompressBytes(compressed []byte, _ kgo.CompressionCodecType) []byte {
	if b, ok := p.bytes.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, 4*len(compressed))
}

func (p *fetchPool) PutDecompressBytes(b []byte) { p.bytes.Put(&b) }

// GetRecords returns a pooled slab of at least n records, or a new one.
func (p *fetchPool) GetRecords(n int) []kgo.Record {
	if rs, ok := p.recs.Get().(*[]kgo.Record); ok && cap(*rs) >= n {
		return (*rs)[:n]
	}
	return make([]kgo.Record, n)
}

func (p *fetchPool) PutRecords(rs []kgo.Record) { p.recs.Put(&rs) }
