// Package deploy holds no code: its tests validate the files of this
// directory, which run toolaudit for real (compose/, kubernetes/, the
// Dockerfile). No Docker engine or Kubernetes cluster is needed: the
// manifests are decoded strictly into their API types (k8s.io/api, the
// Prometheus Operator's, compose-go's), the Kustomize overlays are built
// with Kustomize's library, the Prometheus configuration is checked by
// promtool, and the ports, topics, flags and environment variables they
// name are checked against each other and against the --help of the real
// resolverd and ingest. See README.md for what was run here and what was
// not.
package deploy
