package podfacts

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestEventRecorder(t *testing.T) {
	client := fake.NewClientset()
	rec, stop := NewEventRecorder(client, ComponentShim, "node-1")
	defer stop()
	rec.Warning(PodRef{Namespace: "team", Name: "big", UID: "u1"}, "DNSConfigForming", "Nameserver limits were exceeded")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		list, err := client.CoreV1().Events("team").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == 1 {
			ev := list.Items[0]
			if ev.InvolvedObject.Kind != "Pod" || ev.InvolvedObject.Name != "big" || string(ev.InvolvedObject.UID) != "u1" ||
				ev.Type != corev1.EventTypeWarning || ev.Reason != "DNSConfigForming" || ev.Source.Component != "dnsconfigurer-shim" || ev.Source.Host != "node-1" {
				t.Errorf("event = %+v", ev)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no event recorded")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
