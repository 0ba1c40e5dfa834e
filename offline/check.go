package offline

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"sync"

	"github.com/toolaudit/toolaudit/registryversions"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

// Defaults of Config.
const (
	DefaultMaxLine    = 16 << 20 // a longer line is one MALFORMED decision
	DefaultChunkBytes = 256 << 10
)

// Config of a Check run. Zero fields take the defaults.
type Config struct {
	Resolver   resolve.Resolver
	Workers    int // default runtime.GOMAXPROCS(0)
	MaxLine    int // default DefaultMaxLine
	ChunkBytes int // default DefaultChunkBytes
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
func Check(ctx context.Context, cfg Config, snap *registryversions.Snapshot, calls io.Reader, out io.Writer) (Summary, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
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
			w := worker{res: cfg.Resolver, snap: snap, maxLine: cfg.MaxLine}
			for c := range work {
				w.run(c)
				done <- c
			}
		}()
	}
	readErr := make(chan error, 1)
	go func() {
		readErr <- read(ctx, cfg, calls, free, work)
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

// read splits the input into chunks of whole lines.
func read(ctx context.Context, cfg Config, r io.Reader, free <-chan *chunk, work chan<- *chunk) error {
	br := bufio.NewReaderSize(r, 1<<20)
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
		tooLong := false
		var err error
		for {
			var frag []byte
			frag, err = br.ReadSlice('\n')
			if !tooLong {
				if len(c.in)-start+len(frag) > cfg.MaxLine {
					tooLong = true
					c.in = c.in[:start]
				} else {
					c.in = append(c.in, frag...)
				}
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
		}
		switch {
		case tooLong:
			c.lines = append(c.lines, line{start, -1})
		case len(bytes.TrimSpace(c.in[start:])) > 0:
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
	snap    *registryversions.Snapshot
	maxLine int
	dec     schema.CallDecoder
	call    schema.Call
	d       schema.Decision
}

func (w *worker) run(c *chunk) {
	for _, l := range c.lines {
		if l.end < 0 {
			w.d.Reset()
			w.d.Set(schema.Malformed, "line longer than "+strconv.Itoa(w.maxLine)+" bytes")
		} else {
			w.res.Decide(w.snap, &w.dec, c.in[l.start:l.end], &w.call, &w.d)
		}
		c.counts[w.d.Class.Index()]++
		c.out = w.d.AppendJSON(c.out)
		c.out = append(c.out, '\n')
	}
}
