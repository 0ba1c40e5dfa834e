package check

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sync/semaphore"

	"github.com/toolaudit/toolaudit/internal/lines"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

// Defaults and limits of Config.
const (
	DefaultMaxLine    = 16 << 20 // a longer line is one MALFORMED decision
	DefaultChunkBytes = 256 << 10
	// DefaultMaxInFlight bounds the bytes of input in flight: read and
	// waiting for a worker, being decided, or decided and waiting for
	// their turn to be written. A chunk larger than it (one long line)
	// waits until nothing else is in flight.
	DefaultMaxInFlight = 32 << 20
	// LongLine is the length above which a line is decided by the one
	// decoder that all workers share, one line at a time: a line's tape
	// costs up to 8 bytes per byte (package jsontape), so long lines must
	// not be decoded on every core at once, and the shared decoder keeps
	// its tape from one long line to the next instead of leaving garbage.
	LongLine = 256 << 10
	// MaxWorkers bounds Workers: the work is CPU-bound, and each worker
	// holds its buffers (up to 8 bytes per byte of a LongLine).
	MaxWorkers = 256
)

// Config of a Check run. Zero fields take the defaults.
type Config struct {
	Resolver    resolve.Resolver
	Workers     int   // default runtime.GOMAXPROCS(0); at most MaxWorkers
	MaxLine     int   // default DefaultMaxLine
	ChunkBytes  int   // default DefaultChunkBytes
	MaxInFlight int64 // default DefaultMaxInFlight
	// ArgsKey, when set, adds "args_hash" to every decision of a decoded
	// call: the keyed hash of its arguments (schema.ArgsKey), as the
	// pipeline stores it, so that offline decisions can be joined with
	// stored ones. Unset, decision lines have no args_hash.
	ArgsKey *schema.ArgsKey
}

// Summary counts decisions per class.
type Summary struct {
	Calls   int
	ByClass map[schema.Class]int
}

// Allowed returns the number of allowed calls.
func (s Summary) Allowed() int { return s.ByClass[schema.OK] }

type line struct{ start, end int } // end < 0: the line was too long

// chunk is a run of input lines and, after a worker has seen it, their
// decisions. Chunks are recycled through a free list, which bounds memory.
type chunk struct {
	seq    int
	cost   int64 // of MaxInFlight, held while the chunk is in flight
	in     []byte
	lines  []line
	out    []byte
	counts [schema.NumClasses]int
}

// Check resolves every call of calls against the snapshot and writes one
// decision line per call to out, in input order. Blank lines are skipped;
// any other line gets exactly one decision (a line that is not a usable
// call is MALFORMED). It returns early only when ctx is done, a read fails
// or out fails.
//
// Memory is bounded whatever the input: lines longer than MaxLine are not
// held, at most MaxInFlight bytes of lines are in flight (plus the line
// being read), lines longer than LongLine are decoded one at a time by a
// shared decoder (its tape: up to 8 bytes per byte of MaxLine), and each
// of at most MaxWorkers workers keeps a decoder sized for LongLine. With
// the defaults, the heap stays under about 200 MiB plus 6 MiB per worker
// (the shared tape 128, lines in flight 32, the line being read up to 32;
// per worker a LongLine's tape and its chunks' buffers). A UTF-8 byte
// order mark at the start of calls is skipped, as ingest does.
func Check(ctx context.Context, cfg Config, snap *registry.Snapshot, calls io.Reader, out io.Writer) (Summary, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	cfg.Workers = min(cfg.Workers, MaxWorkers)
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = DefaultMaxInFlight
	}
	if cfg.MaxLine <= 0 {
		cfg.MaxLine = DefaultMaxLine
	}
	if cfg.ChunkBytes <= 0 {
		cfg.ChunkBytes = DefaultChunkBytes
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	nChunks := 4 * cfg.Workers
	budget := semaphore.NewWeighted(cfg.MaxInFlight)
	long := &longDecoder{d: decider{args: schema.NewArgsSummarizer(cfg.ArgsKey)}}
	free := make(chan *chunk, nChunks)
	for range nChunks {
		free <- &chunk{}
	}
	work := make(chan *chunk, nChunks)
	done := make(chan *chunk, nChunks)

	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := worker{res: cfg.Resolver, snap: snap, maxLine: cfg.MaxLine, long: long, hash: cfg.ArgsKey != nil}
			w.own.args = schema.NewArgsSummarizer(cfg.ArgsKey)
			for c := range work {
				w.run(c)
				done <- c
			}
		}()
	}
	readErr := make(chan error, 1)
	go func() {
		readErr <- read(ctx, cfg, calls, free, work, budget)
		close(work)
		wg.Wait()
		close(done)
	}()

	sum := Summary{ByClass: map[schema.Class]int{}}
	var counts [schema.NumClasses]int
	pending := map[int]*chunk{}
	next := 0
	var werr error
	for c := range done {
		pending[c.seq] = c
		for {
			c, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			next++
			if werr == nil {
				if _, err := out.Write(c.out); err != nil {
					werr = fmt.Errorf("write decisions: %w", err)
					cancel(werr)
				}
			}
			for i, n := range c.counts {
				counts[i] += n
			}
			budget.Release(c.cost)
			if cap(c.in) > 4*cfg.ChunkBytes { // a long line's buffer is not kept
				c.in = nil
			}
			if cap(c.out) > 4*cfg.ChunkBytes {
				c.out = nil
			}
			free <- c
		}
	}
	for i, n := range counts {
		if n > 0 {
			sum.ByClass[schema.Classes[i]] = n
			sum.Calls += n
		}
	}
	if err := <-readErr; err != nil && werr == nil {
		return sum, err
	}
	return sum, werr
}

// read splits the input into chunks of whole lines, each sent to the
// workers once the budget admits it.
func read(ctx context.Context, cfg Config, r io.Reader, free <-chan *chunk, work chan<- *chunk, budget *semaphore.Weighted) error {
	br := bufio.NewReaderSize(r, 1<<20)
	lines.SkipBOM(br)
	seq := 0
	var c *chunk
	get := func() bool {
		select {
		case c = <-free:
		case <-ctx.Done():
			return false
		}
		c.seq, seq = seq, seq+1
		c.in, c.lines, c.out = c.in[:0], c.lines[:0], c.out[:0]
		c.counts = [schema.NumClasses]int{}
		return true
	}
	flush := func() bool {
		c.cost = min(int64(len(c.in)), cfg.MaxInFlight)
		if budget.Acquire(ctx, c.cost) != nil {
			return false
		}
		select {
		case work <- c:
			c = nil
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		if c == nil && !get() {
			return context.Cause(ctx)
		}
		start := len(c.in)
		var tooLong bool
		var err error
		c.in, tooLong, err = lines.Append(br, c.in, cfg.MaxLine)
		switch {
		case tooLong:
			c.lines = append(c.lines, line{start, -1})
		case !lines.Blank(c.in[start:]):
			c.lines = append(c.lines, line{start, len(c.in)})
		default:
			c.in = c.in[:start]
		}
		eof := errors.Is(err, io.EOF)
		if err != nil && !eof {
			return fmt.Errorf("read calls: %w", err)
		}
		if eof || len(c.in) >= cfg.ChunkBytes {
			if len(c.lines) > 0 && !flush() {
				return context.Cause(ctx)
			}
			if eof {
				return nil
			}
			c = nil
		}
	}
}

type worker struct {
	res     resolve.Resolver
	snap    *registry.Snapshot
	maxLine int
	hash    bool // add args_hash
	own     decider
	long    *longDecoder
	d       schema.Decision
}

// decider is what deciding a line needs: a decoder (its tape), the call
// and the arguments' summarizer.
type decider struct {
	dec  schema.CallDecoder
	call schema.Call
	args schema.ArgsSummarizer
}

// longDecoder decides the lines longer than LongLine, one at a time.
type longDecoder struct {
	mu sync.Mutex
	d  decider
}

func (w *worker) run(c *chunk) {
	for _, l := range c.lines {
		if l.end < 0 {
			w.d.Reset()
			w.d.Set(schema.Malformed, "line longer than "+strconv.Itoa(w.maxLine)+" bytes")
			c.counts[w.d.Class.Index()]++
			c.out = append(w.d.AppendJSON(c.out), '\n')
			continue
		}
		line := c.in[l.start:l.end]
		if len(line) <= LongLine {
			c.out = w.decide(&w.own, line, c)
			continue
		}
		w.long.mu.Lock()
		c.out = w.decide(&w.long.d, line, c)
		w.long.mu.Unlock()
	}
}

// decide appends the decision line of one call line.
func (w *worker) decide(x *decider, line []byte, c *chunk) []byte {
	decoded := w.res.Decide(w.snap, &x.dec, line, &x.call, &w.d)
	c.counts[w.d.Class.Index()]++
	out := w.d.AppendJSON(c.out)
	if w.hash && decoded {
		// One more member before the closing brace.
		out = append(out[:len(out)-1], `,"args_hash":`...)
		out = schema.AppendString(out, x.args.Hash(x.call.Arguments))
		out = append(out, '}')
	}
	return append(out, '\n')
}
