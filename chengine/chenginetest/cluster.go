package chenginetest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/chengine"
)

// ClusterOptions prepares a cluster of n engines, one shard each without
// replicas, named name in every engine's remote_servers (so a Distributed
// table on any of them reaches all): the options of each engine, with
// its own data directory under tb.TempDir(), fixed free ports and the
// shared configuration file. Start them with Start (or a supervisor,
// which restarts an engine on the same options).
//
// The engines cannot replicate (the embedded engine runs ClickHouse's
// local mode, which never starts the interserver endpoint that
// replication needs): a cluster here is shards only.
func ClusterOptions(tb testing.TB, name string, n int) []chengine.Options {
	tb.Helper()
	dir := tb.TempDir()
	var ports []int
	var ls []net.Listener
	for range 2 * n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	var shards strings.Builder
	for i := range n {
		fmt.Fprintf(&shards, "<shard><replica><host>127.0.0.1</host><port>%d</port></replica></shard>", ports[2*i])
	}
	cfg := filepath.Join(dir, "cluster.xml")
	xml := fmt.Sprintf("<clickhouse><remote_servers><%s>%s</%s></remote_servers></clickhouse>\n", name, shards.String(), name)
	if err := os.WriteFile(cfg, []byte(xml), 0o644); err != nil {
		tb.Fatal(err)
	}
	opts := make([]chengine.Options, n)
	for i := range opts {
		opts[i] = chengine.Options{Dir: filepath.Join(dir, fmt.Sprintf("shard%d", i+1)), TCPPort: ports[2*i], HTTPPort: ports[2*i+1], ConfigFile: cfg}
	}
	return opts
}

// StartCluster starts the engines of ClusterOptions, stopped when the
// test ends. Gating is as for Server.
func StartCluster(tb testing.TB, name string, n int) []*chengine.Server {
	tb.Helper()
	var out []*chengine.Server
	for _, o := range ClusterOptions(tb, name, n) {
		out = append(out, Start(tb, o))
	}
	return out
}

// SuperviseCluster is StartCluster with supervised engines (Supervise):
// for tests that kill clients mid-INSERT, which can make an engine abort
// (chengine's README), as the product's embedded mode restarts it.
func SuperviseCluster(tb testing.TB, name string, n int) []*chengine.Supervisor {
	tb.Helper()
	var out []*chengine.Supervisor
	for _, o := range ClusterOptions(tb, name, n) {
		out = append(out, Supervise(tb, o))
	}
	return out
}
