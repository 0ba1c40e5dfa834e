package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/toolaudit/toolaudit/internal/fetchpool"
	"github.com/toolaudit/toolaudit/kafkaconf"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/registry/declared"
	"github.com/toolaudit/toolaudit/resolve/suggest"
	"github.com/toolaudit/toolaudit/signature"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// Pipeline is the engine of `resolverd run`: it reads the listings topic
// whole into a registry store, consumes the calls topic in a consumer
// group with one worker goroutine per assigned partition, and writes one
// decision row per call record to a sink (appender.Sink), committing
// offsets only after the sink has stored them. See the package
// documentation.
type Pipeline struct {
	cfg    Config
	policy string
	store  *registry.Store
	log    *slog.Logger
	reg    prometheus.Registerer
	m      *metrics

	wm  *watermark // the hold's clock, advanced by the listings reader and the prober
	arr *arrivals  // when calls records reached Kafka, from the prober
	wr  *writer

	calls *kgo.Client // made by Run

	base    context.Context // parent of the workers' contexts; outlives Run's ctx
	stopRun context.CancelCauseFunc

	ran    atomic.Bool
	joined atomic.Bool
	live   atomic.Bool // between start and the beginning of shutdown

	sugg     *suggest.Suggester
	declared *declared.Cache // the tool sets OTLP records carry

	mu      sync.Mutex
	workers map[topicPartition]*worker
	closing bool
	fatal   error

	pollErrs every
}

// New checks cfg and registers the pipeline's metrics on reg (once per
// Registerer: a second pipeline on the same one fails). It connects to
// nothing: Run does, and registers the Kafka clients' metrics too. A nil
// log logs nothing; a nil reg registers nowhere.
//
// The pipeline writes to sink with package appender's contract: an error
// that is not appender.IsPermanent is retried with the same rows, with
// backoff, until it succeeds or the pipeline stops (the partition stalls,
// nothing is dropped or skipped); a permanent one stops the pipeline and
// Run returns it. It writes from one goroutine, its writer, which gathers
// the rows of every assigned partition, through the sink's own batches
// when it is an appender.Batcher. A write must return soon after its ctx
// is done: revocation and shutdown wait for it (up to
// Config.DrainTimeout, after which ctx is canceled).
func New(cfg Config, store *registry.Store, sink appender.Sink, log *slog.Logger, reg prometheus.Registerer) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if store == nil || sink == nil {
		return nil, fmt.Errorf("%w: nil store or sink", ErrConfig)
	}
	if cfg.ArchiveCalls {
		if !appender.NewBatch(sink).Archives() {
			return nil, fmt.Errorf("%w: archiving calls needs a sink that stores call records (appender.Batch.Archives)", ErrConfig)
		}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pipeline{
		cfg:      cfg,
		policy:   cfg.policyVersion(),
		store:    store,
		log:      log,
		reg:      reg,
		wm:       newWatermark(),
		arr:      newArrivals(),
		workers:  map[topicPartition]*worker{},
		sugg:     cfg.Suggester,
		pollErrs: every{Interval: 10 * time.Second},
		declared: declared.NewCache(0, signature.Options{Formats: cfg.Resolver.Formats}),
	}
	if p.sugg == nil {
		p.sugg = suggest.New()
	}
	m, err := newMetrics(reg, store, func() float64 { return ageSeconds(p.wm.time()) }, p.lags)
	if err != nil {
		return nil, err
	}
	p.m = m
	p.wr = newWriter(cfg, sink, log, m)
	return p, nil
}

// Ready reports whether the pipeline decides calls: the listings topic has
// been read to its end once and the consumer group has been joined. For
// /readyz.
func (p *Pipeline) Ready() bool {
	return p.live.Load() && p.joined.Load() && !p.wm.time().IsZero()
}

// Decides reports whether the registry is complete enough to decide calls
// on, for the resolve API: nil once the listings topic has been read to
// its end once (the first catch-up; the group need not be joined), else
// why not.
func (p *Pipeline) Decides() error {
	if p.wm.time().IsZero() {
		return errors.New("the listings topic has not been read to its end yet")
	}
	return nil
}

// Run runs the pipeline until ctx is done, then shuts down in two phases:
// it stops fetching, lets every partition worker write and commit the rows
// it has decided (within DrainTimeout), leaves the group and closes the
// clients. It returns nil after a shutdown asked for by ctx, or the error
// that stopped it (a client that cannot be made, a permanent sink error).
// Run may be called once.
func (p *Pipeline) Run(ctx context.Context) error {
	if !p.ran.CompareAndSwap(false, true) {
		return ErrRunning
	}
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	p.base = base
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	p.stopRun = stop

	lcl, err := kgo.NewClient(p.listingsOpts()...)
	if err != nil {
		return fmt.Errorf("listings client: %w", err)
	}
	defer lcl.Close()
	ccl, err := kgo.NewClient(p.callsOpts()...)
	if err != nil {
		return fmt.Errorf("calls client: %w", err)
	}
	p.calls = ccl
	wctx, stopWriter := context.WithCancel(base)
	var wwg sync.WaitGroup
	wwg.Go(func() {
		if err := p.wr.run(wctx, ccl); err != nil {
			p.fail(err)
		}
	})
	p.live.Store(true)
	p.log.Info("pipeline starting", "brokers", p.cfg.Brokers, "group", p.cfg.Group,
		"calls", p.cfg.CallsTopic, "listings", p.cfg.ListingsTopic, "dlq", p.cfg.DLQTopic, "audit", p.cfg.AuditTopic,
		"otlp_spans", p.cfg.OTLPSpansTopic, "otlp_logs", p.cfg.OTLPLogsTopic,
		"listing_hold", p.cfg.ListingHold, "batch_rows", p.cfg.BatchRows, "batch_wait", p.cfg.BatchWait,
		"analysis", p.cfg.AnalysisID, "policy", p.policy, "passthrough", p.cfg.Passthrough, "archive_calls", p.cfg.ArchiveCalls)

	lctx, stopListings := context.WithCancel(base)
	// Checkpoints are read by short-lived clients without the metrics hooks.
	ckptOpts := append([]kgo.Opt{kgo.SeedBrokers(p.cfg.Brokers...), kgo.ClientID(p.cfg.ClientID + "-checkpoint"),
		kgo.WithLogger(kafkaconf.Logger(p.log)), kgo.FetchMaxBytes(p.cfg.FetchMaxBytes)}, p.cfg.KafkaOpts...)
	l := newListings(p.cfg, lcl, ckptOpts, p.store, p.wm, p.log, p.m)
	pr := &prober{cfg: p.cfg, adm: kadm.NewClient(lcl), wm: p.wm, arr: p.arr, log: p.log,
		errs: every{Interval: 10 * time.Second}, caughtUp: l.caughtUp, listed: l.consume}
	var wg sync.WaitGroup
	wg.Go(func() { l.run(lctx) })
	wg.Go(func() { pr.run(lctx) })

	p.poll(ctx)

	// Phase 1 is over: nothing more is fetched. Phase 2: drain, then close.
	p.live.Store(false)
	start := time.Now()
	p.log.Info("pipeline stopping: draining partition workers", "cause", context.Cause(ctx))
	p.stopWorkers(nil, true, true)
	stopWriter() // every worker has exited: what the writer holds is uncommitted
	wwg.Wait()
	ccl.CloseAllowingRebalance() // leaves the group; nothing is left to revoke
	stopListings()
	wg.Wait()
	p.mu.Lock()
	err = p.fatal
	p.mu.Unlock()
	p.log.Info("pipeline stopped", "took", time.Since(start).Round(time.Millisecond), "err", err)
	return err
}

// fail stops the pipeline with err (the first one wins).
func (p *Pipeline) fail(err error) {
	p.mu.Lock()
	if p.fatal == nil {
		p.fatal = err
		p.log.Error("pipeline failing", "err", err)
	}
	p.mu.Unlock()
	p.stopRun(err)
}

func (p *Pipeline) commonOpts(suffix string) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(p.cfg.Brokers...),
		kgo.ClientID(p.cfg.ClientID + suffix),
		kgo.WithLogger(kafkaconf.Logger(p.log)),
		kgo.FetchMaxBytes(p.cfg.FetchMaxBytes),
		kgo.FetchMaxWait(p.cfg.FetchMaxWait),
	}
	if p.reg != nil {
		opts = append(opts, kgo.WithHooks(kprom.NewMetrics("toolaudit_kafka",
			kprom.Registerer(p.reg), kprom.WithClientLabel())))
	}
	return opts
}

// The listings client's fetch batching (listingsOpts).
const (
	listingsFetchMinBytes = 256 << 10
	listingsFetchMaxWait  = 100 * time.Millisecond
)

func (p *Pipeline) listingsOpts() []kgo.Opt {
	// Partitions are added by the listings reader, each where the
	// registry checkpoint ends or at the start.
	opts := append(p.commonOpts("-listings"),
		kgo.KeepControlRecords(), // so transaction markers count as read
		// The history is read from the start before any call is decided:
		// in as few fetches as FetchMaxBytes allows, not 1 MiB per
		// partition at a time (the client's default).
		kgo.FetchMaxPartitionBytes(p.cfg.FetchMaxBytes),
		// Live, listings trickle in (a fleet relists all day): a fetch
		// per listing costs far more than the listing. The broker holds
		// a fetch until it has listingsFetchMinBytes or
		// listingsFetchMaxWait has passed, which batches a busy topic and
		// delays a quiet one's listing by at most that wait.
		kgo.FetchMinBytes(listingsFetchMinBytes),
		kgo.FetchMaxWait(min(p.cfg.FetchMaxWait, listingsFetchMaxWait)),
	)
	return append(opts, p.cfg.KafkaOpts...)
}

func (p *Pipeline) callsOpts() []kgo.Opt {
	opts := append(p.commonOpts("-calls"),
		kgo.ConsumerGroup(p.cfg.Group),
		kgo.ConsumeTopics(p.cfg.topics()...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(p.assigned),
		kgo.OnPartitionsRevoked(p.revoked),
		kgo.OnPartitionsLost(p.lost),
		kgo.WithPools(fetchpool.New()),
	)
	return append(opts, p.cfg.KafkaOpts...)
}

// poll fetches calls and hands each partition's records to its worker. It
// never blocks on a worker, so rebalances are held for the time of a
// dispatch only (BlockRebalanceOnPoll).
func (p *Pipeline) poll(ctx context.Context) {
	for {
		fs := p.calls.PollFetches(ctx)
		if fs.IsClientClosed() || ctx.Err() != nil {
			p.calls.AllowRebalance()
			return
		}
		at := time.Now()
		fs.EachError(func(topic string, part int32, err error) {
			if ok, n := p.pollErrs.Allow(); ok {
				p.log.Warn("calls fetch failed", "topic", topic, "partition", part, "err", err, "suppressed", n)
			}
		})
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if len(fp.Records) == 0 {
				return
			}
			p.mu.Lock()
			w := p.workers[topicPartition{fp.Topic, fp.Partition}]
			p.mu.Unlock()
			if w == nil {
				// Not reachable with BlockRebalanceOnPoll: assignment
				// precedes fetching and revocation waits for this loop.
				p.log.Error("records for a partition without a worker; dropped, they will be fetched again after the next rebalance",
					"topic", fp.Topic, "partition", fp.Partition, "records", len(fp.Records))
				return
			}
			w.enqueue(fp.Records, fp.HighWatermark, at)
		})
		p.calls.AllowRebalance()
	}
}

// topicPartition names a partition of one of the consumed topics.
type topicPartition struct {
	topic     string
	partition int32
}

// assigned starts a worker per newly assigned partition. kgo calls it
// before fetching them, and also on joins that assign nothing new.
func (p *Pipeline) assigned(_ context.Context, cl *kgo.Client, m map[string][]int32) {
	p.joined.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return
	}
	for _, topic := range p.cfg.topics() {
		parts := m[topic]
		if len(parts) == 0 {
			continue
		}
		for _, part := range parts {
			tp := topicPartition{topic, part}
			if p.workers[tp] != nil {
				continue
			}
			w := newWorker(p, cl, topic, part)
			p.workers[tp] = w
			go w.run()
		}
		p.log.Info("partitions assigned", "topic", topic, "added", sorted(parts), "now", p.ownedLocked(topic))
	}
	p.m.assigned.Set(float64(len(p.workers)))
}

func (p *Pipeline) revoked(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	if tps := p.ours(m); len(tps) > 0 {
		p.stopWorkers(tps, true, false)
	}
}

func (p *Pipeline) lost(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	p.joined.Store(false)
	if tps := p.ours(m); len(tps) > 0 {
		p.stopWorkers(tps, false, false)
	}
}

// ours returns the partitions of m of the consumed topics.
func (p *Pipeline) ours(m map[string][]int32) []topicPartition {
	var tps []topicPartition
	for _, topic := range p.cfg.topics() {
		for _, part := range m[topic] {
			tps = append(tps, topicPartition{topic, part})
		}
	}
	return tps
}

// stopWorkers stops the workers of tps (all of them with closing),
// draining them or not, and waits until they have exited. closing keeps
// new ones from starting.
func (p *Pipeline) stopWorkers(tps []topicPartition, drain, closing bool) {
	start := time.Now()
	p.mu.Lock()
	if closing {
		p.closing = true
		tps = nil
		for tp := range p.workers {
			tps = append(tps, tp)
		}
	}
	var ws []*worker
	for _, tp := range tps {
		if w := p.workers[tp]; w != nil {
			ws = append(ws, w)
			delete(p.workers, tp)
		}
	}
	p.m.assigned.Set(float64(len(p.workers)))
	p.mu.Unlock()
	if len(ws) == 0 {
		return
	}
	for _, w := range ws {
		w.stop(drain)
	}
	for _, w := range ws {
		w.wait()
	}
	how := "partitions revoked"
	switch {
	case closing:
		how = "partitions released for shutdown"
	case !drain:
		how = "partitions lost"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, topic := range p.cfg.topics() {
		var removed []int32
		for _, tp := range tps {
			if tp.topic == topic {
				removed = append(removed, tp.partition)
			}
		}
		if len(removed) > 0 {
			p.log.Info(how, "topic", topic, "removed", sorted(removed), "now", p.ownedLocked(topic),
				"drained", drain, "took", time.Since(start).Round(time.Millisecond))
		}
	}
}

// lags returns the lag of every partition with a worker (consumer_lag).
func (p *Pipeline) lags() []partitionLag {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]partitionLag, 0, len(p.workers))
	for _, w := range p.workers {
		if n, ok := w.lag(); ok {
			out = append(out, partitionLag{topic: w.topic, partition: w.partition, lag: n})
		}
	}
	return out
}

// ownedLocked returns the partitions of topic with a worker.
func (p *Pipeline) ownedLocked(topic string) []int32 {
	var parts []int32
	for tp := range p.workers {
		if tp.topic == topic {
			parts = append(parts, tp.partition)
		}
	}
	return sorted(parts)
}

// assignedPartitions returns the calls partitions with a worker (for
// tests).
func (p *Pipeline) assignedPartitions() []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ownedLocked(p.cfg.CallsTopic)
}

func sorted(parts []int32) []int32 {
	parts = slices.Clone(parts)
	slices.Sort(parts)
	return parts
}
