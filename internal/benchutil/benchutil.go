// Package benchutil holds what the bench commands (cmd/benchapi,
// cmd/benchgateway) share: the -rates flag's list, the process's CPU
// time, a CPU profile for the run, and trimming an embedded broker's
// audit topic that nothing consumes.
package benchutil

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Ints parses a comma-separated list of positive integers (-rates).
func Ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: want positive integers", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// CPUTime is the process's CPU time so far, user and system: on shared
// cores the cost per operation that does not depend on the neighbours.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CPUProfile starts a CPU profile into path ("" : none) and returns the
// function that stops it and closes the file.
func CPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// Trim deletes the records of topic as they are produced, twice a second,
// until ctx is done: nothing consumes them in a bench, and an embedded
// broker keeps records in memory.
func Trim(ctx context.Context, brokers []string, topic string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			continue
		}
		os := kadm.Offsets{}
		ends.Each(func(o kadm.ListedOffset) { os.Add(kadm.Offset{Topic: o.Topic, Partition: o.Partition, At: o.Offset}) })
		adm.DeleteRecords(ctx, os)
	}
}
