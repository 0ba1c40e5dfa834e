// Package connsec builds the client side of a secured connection from
// files: a TLS configuration (the CAs to trust, a client certificate and
// its key, the server name to expect) and secrets such as passwords.
//
// Secrets come from a file or from one fixed environment variable, never
// from a flag value: ps shows every process's arguments to every user of
// the machine. A process's environment is less exposed but not private:
// /proc/PID/environ is readable by every process of the same user and by
// root, children inherit it, and container runtimes show it (docker
// inspect, a Pod's spec). A file can be readable by its owner alone, so
// the documentation recommends files and offers the variable for
// convenience. Secret.Read reads it once; Secret.Reader reads the file again
// at each use, so that a rotated Kubernetes Secret, updated in place in
// its mounted volume, takes effect at the next connection without a
// restart (Kafka's SASL password; the ClickHouse password is read once, at
// start). Certificates are read once, when the configuration is built:
// rotating them needs a restart (a rolling one in Kubernetes).
//
// Used by package kafkaconf (Kafka) and by resolverd's ClickHouse flags;
// the HTTP server's TLS is the server side and lives with the server.
package connsec
