package sink

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ClickHouse/ch-go"
)

// pool holds the INSERT connections: ch-go clients, at most
// Config.MaxOpenConns, each used by one Write at a time. A connection on
// which an INSERT failed is closed, not reused: its protocol state is
// unknown.
type pool struct {
	cfg  Config
	sem  chan struct{} // one token per open or dialing connection in use
	mu   sync.Mutex
	idle []*ch.Client
	shut bool
}

func newPool(cfg Config) *pool {
	return &pool{cfg: cfg, sem: make(chan struct{}, cfg.MaxOpenConns)}
}

// get returns an idle connection or dials one, waiting while MaxOpenConns
// are in use.
func (p *pool) get(ctx context.Context) (*ch.Client, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	for len(p.idle) > 0 {
		cl := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if !cl.IsClosed() {
			p.mu.Unlock()
			return cl, nil
		}
	}
	p.mu.Unlock()
	cl, err := p.dial(ctx)
	if err != nil {
		<-p.sem
		return nil, err
	}
	return cl, nil
}

// put returns cl after a use that ended with err.
func (p *pool) put(cl *ch.Client, err error) {
	defer func() { <-p.sem }()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil || p.shut || cl.IsClosed() {
		cl.Close()
		return
	}
	p.idle = append(p.idle, cl)
}

// dial connects to the first address of Config.Addr that answers.
func (p *pool) dial(ctx context.Context) (*ch.Client, error) {
	var errs []error
	for _, addr := range p.cfg.Addr {
		comp := ch.CompressionLZ4
		switch p.cfg.compression(addr) {
		case "zstd":
			comp = ch.CompressionZSTD
		case "none":
			comp = ch.CompressionDisabled
		}
		cl, err := ch.Dial(ctx, ch.Options{
			Address:     addr,
			Database:    p.cfg.Database,
			User:        p.cfg.Username,
			Password:    p.cfg.Password,
			Compression: comp,
			ClientName:  "toolaudit-sink",
			DialTimeout: p.cfg.DialTimeout,
			ReadTimeout: p.cfg.ReadTimeout,
			TLS:         p.cfg.TLS,
		})
		if err == nil {
			return cl, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, withTLSHint(err)))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("dial: %w", errors.Join(errs...))
}

// close closes the idle connections; those in use close when put back.
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shut = true
	for _, cl := range p.idle {
		cl.Close()
	}
	p.idle = nil
}
