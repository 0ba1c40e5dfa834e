package sink

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/ClickHouse/ch-go"
	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/toolaudit/toolaudit/schema"
)

// ClickHouse writes decision rows to table decisions of one database, one
// native-protocol INSERT per Write.
//
// Two clients of the same protocol share the work: INSERTs go through
// github.com/ClickHouse/ch-go, the low-level client that clickhouse-go/v2
// is built on, because its columns can be kept and reused between inserts
// (clickhouse-go allocates a fresh block per batch, which at 100k rows/s
// made the garbage collector the pipeline's largest cost); everything else
// (migrations, the schema check, reads) uses clickhouse-go/v2 (Conn).
//
// It is safe for concurrent use: each Write takes its own connection from a
// pool of Config.MaxOpenConns (further Writes wait for one), and Close waits
// for the Writes in progress.
type ClickHouse struct {
	conn driver.Conn
	db   string
	log  *slog.Logger
	m    *metrics

	mu     sync.RWMutex // Write holds it shared, Close exclusively
	closed bool

	pool       *pool     // INSERT connections (ch-go)
	insertSQL  string    // INSERT INTO db.decisions (columns) VALUES
	archiveSQL string    // INSERT INTO db.call_events (columns) VALUES
	batches    sync.Pool // *Batch, for Write
}

var _ interface {
	Write(context.Context, []schema.Row) error
} = (*ClickHouse)(nil)

// insertSettings apply to every INSERT of Write:
//   - async_insert=0: the writer already batches, and an acknowledged Write
//     must mean a committed part (also: async inserts skip the insert
//     deduplication that makes retries of the same batch free);
//   - insert_deduplicate=1: a retried identical batch is dropped (the tables
//     set non_replicated_deduplication_window); each INSERT also carries
//     insert_deduplication_token, a hash of its rows (Batch.token), so the
//     server compares tokens instead of hashing every block;
//   - max_partitions_per_insert_block=0: a batch whose emitted_at span more
//     than 100 months (replays, clamped or timeless rows) must not fail
//     forever with TOO_MANY_PARTS, which is otherwise retryable;
//   - optimize_on_insert=0: ReplacingMergeTree would otherwise run its
//     merge over every inserted block to collapse keys repeated within
//     it, which a batch of distinct calls almost never has (a repeat is
//     collapsed by the next merge, and FINAL reads one row either way).
//     It took 28% of the server's INSERT CPU for this table: 1.69 s
//     against 2.34 s for 300k decision rows in 50k-row INSERTs, medians
//     of four interleaved runs on ClickHouse 26.7 (16% of its CPU with
//     the merges that follow).
//   - distributed_foreground_insert=1: through a Distributed table (a
//     cluster, see Cluster), the INSERT is acknowledged once every shard
//     has stored its rows, not once the initiating server has queued them
//     on its disk for a background send, which a crash of that server
//     could lose after the offsets were committed. Each shard then
//     deduplicates its part of a retried batch by the same token. No
//     effect on other tables.
var insertSettings = []ch.Setting{
	ch.SettingInt("async_insert", 0),
	ch.SettingInt("distributed_foreground_insert", 1),
	ch.SettingInt("insert_deduplicate", 1),
	ch.SettingInt("max_partitions_per_insert_block", 0),
	ch.SettingInt("optimize_on_insert", 0),
}

// NewClickHouse connects to ClickHouse (Config.Open), checks that table
// decisions has the columns this build writes, after applying the
// migrations when WithMigrate is given, and returns the writer: a missing or
// mismatched table is ErrSchemaMismatch, before any decision is at stake.
// ctx bounds the setup only.
func NewClickHouse(ctx context.Context, cfg Config, opts ...Option) (*ClickHouse, error) {
	cfg = cfg.withDefaults()
	o := buildOptions(opts)
	conn, err := cfg.Open(ctx)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*ClickHouse, error) {
		conn.Close()
		return nil, err
	}
	if o.migrate {
		var err error
		if o.cluster != nil {
			_, err = MigrateCluster(ctx, conn, cfg.Database, *o.cluster, o.log)
		} else {
			_, err = Migrate(ctx, conn, cfg.Database, o.log)
		}
		if err != nil {
			return fail(err)
		}
	}
	if err := checkColumns(ctx, conn, cfg.Database, "decisions", columns); err != nil {
		return fail(err)
	}
	c := &ClickHouse{
		conn:       conn,
		db:         cfg.Database,
		pool:       newPool(cfg),
		insertSQL:  "INSERT INTO `" + cfg.Database + "`.`decisions` (" + columnList(columns) + ") VALUES",
		archiveSQL: "INSERT INTO `" + cfg.Database + "`.`call_events` (" + columnList(archiveColumns) + ") VALUES",
		log:        o.log,
		m:          newMetrics(o.reg, "clickhouse"),
	}
	c.batches.New = func() any { return c.NewBatch() }
	o.log.Info("sink: clickhouse ready", "addr", cfg.Addr, "database", cfg.Database)
	return c, nil
}

// Open connects to ClickHouse as c says (zero fields defaulted) and pings
// it: a connection pool for Migrate (`resolverd migrate`) and ad hoc
// queries, without NewClickHouse's check of table decisions, which fails
// before the first migration. The connection has no default database:
// queries name it. The caller closes it.
func (c Config) Open(ctx context.Context) (driver.Conn, error) { return c.open(ctx, "") }

// OpenIn is Open with Database as the connection's default database, for
// queries that name tables without their database (package analytics:
// the dashboards' SQL, which the datasource's default database completes).
func (c Config) OpenIn(ctx context.Context) (driver.Conn, error) {
	c = c.withDefaults()
	if err := validDatabase(c.Database); err != nil {
		return nil, fmt.Errorf("sink: clickhouse open: %w", err)
	}
	return c.open(ctx, c.Database)
}

func (c Config) open(ctx context.Context, db string) (driver.Conn, error) {
	c = c.withDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	// One setting for the pool: auto compresses unless every address is
	// loopback.
	comp := clickhouse.CompressionNone
	for _, a := range c.Addr {
		switch c.compression(a) {
		case "lz4":
			comp = clickhouse.CompressionLZ4
		case "zstd":
			comp = clickhouse.CompressionZSTD
		}
	}
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:         c.Addr,
		Auth:         clickhouse.Auth{Database: db, Username: c.Username, Password: c.Password},
		TLS:          c.TLS,
		DialTimeout:  c.DialTimeout,
		ReadTimeout:  c.ReadTimeout,
		MaxOpenConns: c.MaxOpenConns,
		MaxIdleConns: c.MaxOpenConns,
		Compression:  &clickhouse.Compression{Method: comp},
		ClientInfo: clickhouse.ClientInfo{Products: []struct {
			Name    string
			Version string
		}{{Name: "toolaudit-sink", Version: "1"}}},
	})
	if err != nil {
		return nil, fmt.Errorf("sink: clickhouse open: %w", err)
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("sink: clickhouse ping %v: %w", c.Addr, withTLSHint(err))
	}
	return conn, nil
}

// checkColumns verifies that db.table has every column of cols with the
// same type, or is ErrSchemaMismatch (permanent). Extra columns are fine
// (a newer migration added them with defaults).
func checkColumns(ctx context.Context, conn driver.Conn, db, table string, cols []schema.Column) error {
	have, err := tableColumns(ctx, conn, db, table)
	if err != nil {
		return err
	}
	if len(have) == 0 {
		return &Permanent{Kind: KindSchema, Err: fmt.Errorf("%w: table %s.%s does not exist (run resolverd migrate)", ErrSchemaMismatch, db, table)}
	}
	for _, c := range cols {
		switch typ, ok := have[c.Name]; {
		case !ok:
			return &Permanent{Kind: KindSchema, Err: fmt.Errorf("%w: %s.%s has no column %s", ErrSchemaMismatch, db, table, c.Name)}
		case typ != string(c.Type):
			return &Permanent{Kind: KindSchema, Err: fmt.Errorf("%w: %s.%s.%s is %s, want %s", ErrSchemaMismatch, db, table, c.Name, typ, c.Type)}
		}
	}
	return nil
}

// tableColumns returns the type of every column of db.table by name;
// none when the table does not exist.
func tableColumns(ctx context.Context, conn driver.Conn, db, table string) (map[string]string, error) {
	rows, err := conn.Query(ctx, "SELECT name, type FROM system.columns WHERE database = ? AND table = ?", db, table)
	if err != nil {
		return nil, fmt.Errorf("sink: clickhouse schema check: %w", err)
	}
	defer rows.Close()
	have := map[string]string{}
	for rows.Next() {
		var name, typ string
		if err := rows.Scan(&name, &typ); err != nil {
			return nil, fmt.Errorf("sink: clickhouse schema check: %w", err)
		}
		have[name] = typ
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sink: clickhouse schema check: %w", err)
	}
	return have, nil
}

// Conn is the writer's connection pool, for Migrate and ad hoc queries.
func (c *ClickHouse) Conn() driver.Conn { return c.conn }

// Database is the database the writer writes to.
func (c *ClickHouse) Database() string { return c.db }

// Ping checks that the server answers.
func (c *ClickHouse) Ping(ctx context.Context) error {
	if err := c.conn.Ping(ctx); err != nil {
		return fmt.Errorf("sink: clickhouse ping: %w", err)
	}
	return nil
}

// Close waits for the Writes in progress, then closes the connections.
// Later Writes return ErrClosed.
func (c *ClickHouse) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.pool.close()
	return c.conn.Close()
}

// Write stores rows as one INSERT and returns nil only when ClickHouse has
// acknowledged it (the rows are in a committed part). On error the rows may
// or may not have been stored; see the package doc for what to do
// (appender.IsPermanent, IsRetryable). An empty batch is a no-op.
//
// Times are stored in milliseconds; a zero EmittedAt (no usable time) as
// 1970-01-01 00:00:00 (the readers here turn it back into the zero time), a
// zero DecidedAt as the time of the Write (the table's TTL would expire a
// row with neither time at once), and times outside 1900-01-01..2262-04-10
// as the nearest bound (counted in toolaudit_sink_clamped_times_total).
//
// Write encodes rows into a pooled Batch; a caller that gathers rows over
// time can append them to its own Batch instead (NewBatch, WriteBatch).
func (c *ClickHouse) Write(ctx context.Context, rows []schema.Row) error {
	if len(rows) == 0 {
		c.mu.RLock()
		defer c.mu.RUnlock()
		if c.closed {
			return ErrClosed
		}
		return nil
	}
	b := c.batches.Get().(*Batch)
	defer c.batches.Put(b)
	b.Reset()
	b.Append(rows)
	return c.WriteBatch(ctx, b)
}
