package podfacts

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/dnsconfigurer/dnsconfigurer/internal/testkit"
)

func TestEventRecorder(t *testing.T) {
	client := fake.NewClientset()
	rec, stop := NewEventRecorder(client, ComponentShim, "node-1")
	defer stop()
	rec.Warning(PodRef{Namespace: "team", Name: "big", UID: "u1"}, "DNSConfigForming", "Nameserver limits were exceeded")
	var list *corev1.EventList
	testkit.WaitFor(t, 10*time.Second, func() (err error) {
		list, err = client.CoreV1().Events("team").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d events recorded, want 1", len(list.Items))
		}
		return nil
	})
	ev := list.Items[0]
	if ev.InvolvedObject.Kind != "Pod" || ev.InvolvedObject.Name != "big" || string(ev.InvolvedObject.UID) != "u1" ||
		ev.Type != corev1.EventTypeWarning || ev.Reason != "DNSConfigForming" || ev.Source.Component != "dnsconfigurer-shim" || ev.Source.Host != "node-1" {
		t.Errorf("event = %+v", ev)
	}
}
