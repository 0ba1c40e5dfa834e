package deploy

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/kustomize/api/krusty"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// rendered is one kustomization built, each object decoded strictly into
// its API type.
type rendered struct {
	deployments     []appsv1.Deployment
	services        []corev1.Service
	configMaps      []corev1.ConfigMap
	pdbs            []policyv1.PodDisruptionBudget
	serviceMonitors []monitoringv1.ServiceMonitor
	others          int // namespaces, service accounts
}

// decodeStrict decodes one manifest into the type of its kind, refusing
// unknown and repeated fields (sigs.k8s.io/yaml's strict mode), and adds
// it to r.
func (r *rendered) decodeStrict(b []byte) error {
	var meta struct{ APIVersion, Kind string }
	if err := yaml.Unmarshal(b, &meta); err != nil {
		return err
	}
	var err error
	switch meta.APIVersion + " " + meta.Kind {
	case "apps/v1 Deployment":
		var d appsv1.Deployment
		err = yaml.UnmarshalStrict(b, &d)
		r.deployments = append(r.deployments, d)
	case "v1 Service":
		var s corev1.Service
		err = yaml.UnmarshalStrict(b, &s)
		r.services = append(r.services, s)
	case "v1 ConfigMap":
		var c corev1.ConfigMap
		err = yaml.UnmarshalStrict(b, &c)
		r.configMaps = append(r.configMaps, c)
	case "policy/v1 PodDisruptionBudget":
		var p policyv1.PodDisruptionBudget
		err = yaml.UnmarshalStrict(b, &p)
		r.pdbs = append(r.pdbs, p)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		var s monitoringv1.ServiceMonitor
		err = yaml.UnmarshalStrict(b, &s)
		r.serviceMonitors = append(r.serviceMonitors, s)
	case "v1 ServiceAccount":
		err = yaml.UnmarshalStrict(b, &corev1.ServiceAccount{})
		r.others++
	case "v1 Namespace":
		err = yaml.UnmarshalStrict(b, &corev1.Namespace{})
		r.others++
	default:
		return fmt.Errorf("kind %s %s: no API type known to this test", meta.APIVersion, meta.Kind)
	}
	return err
}

// build runs Kustomize (its library, as `kubectl kustomize` does) on dir.
func build(t *testing.T, dir string) *rendered {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	r := &rendered{}
	for _, res := range m.Resources() {
		b, err := res.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		if err := r.decodeStrict(b); err != nil {
			t.Fatalf("%s: %s/%s: %v", dir, res.GetKind(), res.GetName(), err)
		}
	}
	return r
}

// TestManifestsStrict: every file of kubernetes/ decodes strictly, the
// kustomizations into Kustomize's type, the rest (patches included) into
// their API types: a misspelt or misplaced field fails here, not at
// `kubectl apply`.
func TestManifestsStrict(t *testing.T) {
	err := filepath.WalkDir("kubernetes", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if filepath.Base(p) == "kustomization.yaml" {
			if err := yaml.UnmarshalStrict(b, &kustypes.Kustomization{}); err != nil {
				t.Errorf("%s: %v", p, err)
			}
			return nil
		}
		if !strings.HasSuffix(p, ".yaml") {
			t.Errorf("%s: not a manifest", p)
			return nil
		}
		if err := (&rendered{}).decodeStrict(b); err != nil {
			t.Errorf("%s: %v", p, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestKubernetes: the base and the production overlay build, and what the
// objects say of each other and of resolverd agrees: the ConfigMap's
// variables are flags of `resolverd run --help`, the container listens on
// --http's port, the probes ask /healthz and /readyz there (over HTTPS
// when the API has TLS), the Service and the ServiceMonitor reach that
// port, the disruption budget and the selectors match the pods, every
// file the settings name is in a mounted Secret, the pods run as the
// image's non-root user on a read-only root filesystem with resources
// above the Go heap limit, and the replicas do not outnumber the calls
// topic's partitions.
func TestKubernetes(t *testing.T) {
	run := helpFlags(t, "resolverd", "run")
	partitions := topicPlan(t, loadCompose(t).Services["kafka-topics"])["tool-calls"].partitions
	for _, dir := range []string{"kubernetes/base", "kubernetes/overlays/production"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			r := build(t, dir)
			if len(r.deployments) != 1 || len(r.configMaps) != 1 || len(r.services) != 1 || len(r.pdbs) != 1 || len(r.serviceMonitors) != 1 {
				t.Fatalf("want one Deployment, ConfigMap, Service, PodDisruptionBudget and ServiceMonitor; got %d %d %d %d %d",
					len(r.deployments), len(r.configMaps), len(r.services), len(r.pdbs), len(r.serviceMonitors))
			}
			d, cm, svc, pdb, sm := r.deployments[0], r.configMaps[0], r.services[0], r.pdbs[0], r.serviceMonitors[0]
			checkEnv(t, dir+" ConfigMap", cm.Data, "RESOLVERD_", run)
			pod := d.Spec.Template
			if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 || int(*d.Spec.Replicas) > partitions {
				t.Errorf("replicas %v: want 2 up to the calls topic's %d partitions", d.Spec.Replicas, partitions)
			}
			if !selects(d.Spec.Selector.MatchLabels, pod.Labels) || !selects(svc.Spec.Selector, pod.Labels) ||
				!selects(pdb.Spec.Selector.MatchLabels, pod.Labels) || !selects(sm.Spec.Selector.MatchLabels, svc.Labels) {
				t.Errorf("a selector misses: deployment %v, service %v, pdb %v (pods %v); servicemonitor %v (service %v)",
					d.Spec.Selector.MatchLabels, svc.Spec.Selector, pdb.Spec.Selector.MatchLabels, pod.Labels, sm.Spec.Selector.MatchLabels, svc.Labels)
			}
			if pdb.Spec.MaxUnavailable == nil && pdb.Spec.MinAvailable == nil {
				t.Error("the PodDisruptionBudget bounds nothing")
			}

			if len(pod.Spec.Containers) != 1 {
				t.Fatalf("%d containers", len(pod.Spec.Containers))
			}
			c := pod.Spec.Containers[0]
			if !slices.Equal(c.Args, []string{"run"}) || len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != cm.Name {
				t.Errorf("container args %v envFrom %+v: want run with the ConfigMap %s", c.Args, c.EnvFrom, cm.Name)
			}
			_, httpPort := splitAddr(t, setting(cm.Data, "RESOLVERD_", run, "http"))
			port := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "http" })
			if port < 0 || strconv.Itoa(int(c.Ports[port].ContainerPort)) != httpPort {
				t.Errorf("container ports %+v: want http on --http's %s", c.Ports, httpPort)
			}
			scheme := corev1.URISchemeHTTP
			if cm.Data["RESOLVERD_HTTP_TLS_CERT"] != "" {
				scheme = corev1.URISchemeHTTPS
			}
			for _, pr := range []struct {
				name  string
				probe *corev1.Probe
				path  string
			}{{"startup", c.StartupProbe, "/healthz"}, {"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
				if pr.probe == nil || pr.probe.HTTPGet == nil || pr.probe.HTTPGet.Path != pr.path || pr.probe.HTTPGet.Port.String() != "http" || orHTTP(pr.probe.HTTPGet.Scheme) != scheme {
					t.Errorf("%s probe %+v: want %s %s on port http", pr.name, pr.probe, scheme, pr.path)
				}
			}
			if svc.Spec.Ports[0].TargetPort.String() != "http" || sm.Spec.Endpoints[0].Port != svc.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Path != "/metrics" {
				t.Errorf("service port %+v, servicemonitor endpoint %+v: want /metrics on the container's http port", svc.Spec.Ports[0], sm.Spec.Endpoints[0])
			}
			if got := strings.ToUpper(string(ptrOr(sm.Spec.Endpoints[0].Scheme))); (scheme == corev1.URISchemeHTTPS) != (got == "HTTPS") {
				t.Errorf("servicemonitor scheme %q, the API serves %s", got, scheme)
			}

			psc, sc := pod.Spec.SecurityContext, c.SecurityContext
			if psc == nil || sc == nil || !deref(psc.RunAsNonRoot) || ptrOr(psc.RunAsUser) != 65532 || !deref(sc.ReadOnlyRootFilesystem) ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("security contexts %+v / %+v: want non-root 65532 (the image's user), read-only root, no escalation, no capabilities", psc, sc)
			}
			if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
				t.Error("the pod mounts a service account token it does not use")
			}
			req, lim := c.Resources.Requests, c.Resources.Limits
			if req.Cpu().IsZero() || req.Memory().IsZero() || lim.Memory().IsZero() {
				t.Errorf("resources %+v: want CPU and memory requests and a memory limit", c.Resources)
			}
			heap, err := strconv.Atoi(setting(cm.Data, "RESOLVERD_", run, "memory-limit-mb"))
			if err != nil || resource.NewQuantity(int64(heap)<<20, resource.BinarySI).Cmp(*lim.Memory()) >= 0 {
				t.Errorf("--memory-limit-mb %d MiB is not below the container's memory limit %v", heap, lim.Memory())
			}

			// Every file a setting names is in a volume from a Secret.
			mounts := map[string]string{} // mount path -> secret
			for _, m := range c.VolumeMounts {
				for _, v := range pod.Spec.Volumes {
					if v.Name == m.Name && v.Secret != nil && m.ReadOnly {
						mounts[m.MountPath] = v.Secret.SecretName
					}
				}
			}
			for k, v := range cm.Data {
				if !strings.HasPrefix(v, "/") {
					continue
				}
				if _, ok := mounts[filepath.Dir(v)]; !ok {
					t.Errorf("%s=%s: no Secret is mounted at %s", k, v, filepath.Dir(v))
				}
			}
			if cm.Data["RESOLVERD_KAFKA_SASL_MECHANISM"] != "" && cm.Data["RESOLVERD_KAFKA_SASL_PASSWORD_FILE"] == "" {
				t.Error("SASL without --kafka-sasl-password-file: the password would have to be in the environment")
			}
			if cm.Data["RESOLVERD_CLICKHOUSE_TLS"] == "true" {
				for _, a := range strings.Split(cm.Data["RESOLVERD_CLICKHOUSE"], ",") {
					if _, p, _ := net.SplitHostPort(a); p != "9440" {
						t.Errorf("--clickhouse-tls to %s: the secure native port is 9440", a)
					}
				}
			}
		})
	}
}

// selects reports whether every label of sel is in labels.
func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func orHTTP(s corev1.URIScheme) corev1.URIScheme {
	if s == "" {
		return corev1.URISchemeHTTP
	}
	return s
}

func deref(b *bool) bool { return b != nil && *b }

func ptrOr[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
