package schema

import "embed"

// Migrations holds the ClickHouse DDL of the store, ddl/NNNN_name.sql, applied
// in order by sink.Migrate. Each file is one or more statements, each ending
// with ";" at the end of a line; {db} stands for the database name. A file
// that has been applied somewhere must never change (the runner refuses a
// changed checksum): add a new file instead.
//
//go:embed ddl/*.sql
var Migrations embed.FS
