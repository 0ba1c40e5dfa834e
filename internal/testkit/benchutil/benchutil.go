// Package benchutil holds what the bench commands (cmd/benchapi,
// cmd/benchgateway) share: the -rates flag's list, the process's CPU
// time, a CPU profile for the run, an audit trail on an embedded broker
// whose topic is trimmed as nothing consumes it, and the quantile.
package benchutil

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/audit"
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

// KfakeAudit is an audit trail on an embedded broker through the
// front ends' own producer (audit.Kafka: acks=all, waited for before each
// answer), its topic trimmed as the run goes (Trim); stop closes it all.
func KfakeAudit() (p audit.Producer, stop func(), err error) {
	addrs, stopBroker, err := Kfake()
	if err != nil {
		return nil, nil, err
	}
	kp, err := audit.NewKafka(audit.KafkaConfig{Brokers: addrs}, nil, nil)
	if err != nil {
		stopBroker()
		return nil, nil, err
	}
	return kp, func() { kp.Close(); stopBroker() }, nil
}

// Kfake is an embedded broker holding audit.DefaultTopic, trimmed as the
// run goes (Trim), for an audit producer of this process or another;
// stop closes it.
func Kfake() (addrs []string, stop func(), err error) {
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(6, audit.DefaultTopic))
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); Trim(ctx, k.ListenAddrs(), audit.DefaultTopic) }()
	return k.ListenAddrs(), func() { cancel(); <-done; k.Close() }, nil
}

// ProcessCPU is the CPU time, user and system, that process pid has used
// so far (Linux: /proc/PID/stat, in clock ticks of 10 ms).
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// the fields after its closing one are fields 3 onwards.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var ticks int64
	for _, s := range f[11:13] { // utime, stime: fields 14 and 15
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// Quantile is the p-quantile (nearest rank) of sorted durations, 0 for
// none: both benches report their quantiles by it.
func Quantile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
