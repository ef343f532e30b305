package webhook

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// typicalPod is a Deployment's pod as the API server hands it to a
// validating webhook: labels, owner, two containers with env, resources,
// probes and mounts, the service account token volume, tolerations.
func typicalPod() *corev1.Pod {
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
		PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	mounts := []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}
	expiry := int64(3607)
	return pod("checkout-7d9f8b6c5-x2x9q", func(p *corev1.Pod) {
		p.Namespace = "shop"
		p.GenerateName = "checkout-7d9f8b6c5-"
		p.Labels = map[string]string{"app.kubernetes.io/name": "checkout", "app.kubernetes.io/part-of": "shop", "pod-template-hash": "7d9f8b6c5"}
		p.Annotations = map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "checkout-7d9f8b6c5", UID: "3f1c2b4e-8a6d-4c1e-9b7a-2d5e6f7a8b9c", Controller: ptr(true), BlockOwnerDeletion: ptr(true)}}
		p.Spec.Containers = []corev1.Container{
			{Name: "app", Image: "registry.example/shop/checkout:1.42.0", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env:       []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "DB_HOST", Value: "postgres.shop.svc.cluster.local"}, {Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}}},
				Resources: res, ReadinessProbe: probe, LivenessProbe: probe, VolumeMounts: mounts,
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent},
			{Name: "proxy", Image: "registry.example/envoy:1.31", Args: []string{"--config-path", "/etc/app/envoy.yaml"}, Resources: res, VolumeMounts: mounts,
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent},
		}
		p.Spec.Volumes = []corev1.Volume{
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "checkout"}}}},
			{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiry}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
			}}}},
		}
		p.Spec.RestartPolicy = corev1.RestartPolicyAlways
		p.Spec.ServiceAccountName = "checkout"
		p.Spec.SchedulerName = "default-scheduler"
		p.Spec.TerminationGracePeriodSeconds = ptr(int64(30))
		p.Spec.Tolerations = []corev1.Toleration{
			{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
			{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
		}
		p.Spec.DNSConfig = &corev1.PodDNSConfig{Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr("2")}}}
	})
}

// BenchmarkReview is the decision alone: decoding the pod from the review's
// request and running the engine.
func BenchmarkReview(b *testing.B) {
	r := testReviewer(b)
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(podReview(b, typicalPod()), &review); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		resp, _, _, err := r.Review(review.Request)
		if err != nil || !resp.Allowed {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N)/1e3, "cpu-µs/op")
}

// BenchmarkAdmission is the webhook as the API server sees it: a typical
// pod's AdmissionReview POSTed over HTTPS on a keep-alive connection,
// response read and decoded. It reports decisions per second and the
// latency percentiles.
func BenchmarkAdmission(b *testing.B) {
	for _, bc := range []struct {
		name     string
		h2       bool
		parallel bool
		review   func(testing.TB) []byte
	}{
		{"http1", false, false, nil},
		{"h2", true, false, nil},
		{"h2-parallel", true, true, nil},
		{"h2-deployment-create", true, false, func(t testing.TB) []byte { return deploymentReview(t, false) }},
		{"h2-deployment-update", true, false, func(t testing.TB) []byte { return deploymentReview(t, true) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ts := startServer(b, testReviewer(b))
			tr := &http.Transport{
				TLSClientConfig:     &tls.Config{RootCAs: ts.ca.Pool(), MinVersion: tls.VersionTLS12},
				ForceAttemptHTTP2:   bc.h2,
				MaxIdleConnsPerHost: 64,
			}
			if !bc.h2 {
				tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
			}
			b.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			body := podReview(b, typicalPod())
			if bc.review != nil {
				body = bc.review(b)
			}
			url := ts.url + PathValidate
			once := func() time.Duration {
				start := time.Now()
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				var out admissionv1.AdmissionReview
				err = json.NewDecoder(resp.Body).Decode(&out)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || out.Response == nil || !out.Response.Allowed {
					b.Fatalf("response: %v %+v", err, out.Response)
				}
				return time.Since(start)
			}
			once() // connect outside the measurement
			var (
				mu        sync.Mutex
				latencies = make([]time.Duration, 0, b.N)
			)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			if bc.parallel {
				b.RunParallel(func(pb *testing.PB) {
					local := make([]time.Duration, 0, 1024)
					for pb.Next() {
						local = append(local, once())
					}
					mu.Lock()
					latencies = append(latencies, local...)
					mu.Unlock()
				})
			} else {
				for range b.N {
					latencies = append(latencies, once())
				}
			}
			elapsed, cpu := time.Since(start), cpuTime()-cpu0
			b.StopTimer()
			slices.Sort(latencies)
			pct := func(p float64) float64 {
				return float64(latencies[min(len(latencies)-1, int(float64(len(latencies))*p))].Microseconds())
			}
			b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "decisions/s")
			b.ReportMetric(pct(0.50), "p50-µs")
			b.ReportMetric(pct(0.99), "p99-µs")
			// Client and server share the process: this is both sides' CPU.
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(len(latencies))/1e3, "cpu-µs/op")
		})
	}
}

// deploymentReview is the AdmissionReview of a Deployment whose template is
// typicalPod's: a CREATE, or an UPDATE (a scale: old and new objects
// differ in replicas only).
func deploymentReview(t testing.TB, update bool) []byte {
	t.Helper()
	p := typicalPod()
	d := appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "checkout", Namespace: "shop", Labels: p.Labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "checkout"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: p.Labels, Annotations: p.Annotations}, Spec: p.Spec}}}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	req := &admissionv1.AdmissionRequest{UID: "5bdc1a0b-5ad0-4c83-a8a4-1f2b3c4d5e6f",
		Kind:     metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		Name:     d.Name, Namespace: d.Namespace, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}
	if update {
		d.Spec.Replicas = ptr(int32(5))
		old, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		req.Operation, req.OldObject = admissionv1.Update, runtime.RawExtension{Raw: old}
	}
	return reviewJSON(t, req)
}
