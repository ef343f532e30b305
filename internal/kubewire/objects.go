package kubewire

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The field numbers read, from k8s.io/api's and apimachinery's
// generated.proto.
const (
	objMetadata, objSpec, objStatus = 1, 2, 3 // Pod, Node

	metaName, metaNamespace, metaUID, metaResourceVersion = 1, 3, 5, 6
	metaLabels, metaAnnotations                           = 11, 12
	mapKey, mapValue                                      = 1, 2

	podSpecNodeName                                 = 10
	podStatusPhase, podStatusPodIP, podStatusPodIPs = 1, 6, 12
	podIPIP                                         = 1
)

// Pod decodes a protobuf Pod (its bytes inside the runtime.Unknown) to
// the fields Keep lists. An error names the field that does not parse.
func Pod(raw []byte) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	err := fields(raw, func(num protowire.Number, v []byte) error {
		switch num {
		case objMetadata:
			return objectMeta(&p.ObjectMeta, v, "")
		case objSpec:
			node, err := field(v, podSpecNodeName)
			p.Spec.NodeName = string(node)
			return within("spec", err)
		case objStatus:
			return within("status", podStatus(&p.Status, v))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pod: %w", err)
	}
	return p, nil
}

func podStatus(s *corev1.PodStatus, b []byte) error {
	return fields(b, func(num protowire.Number, v []byte) error {
		switch num {
		case podStatusPhase:
			s.Phase = constant(v, corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown)
		case podStatusPodIP:
			s.PodIP = string(v)
		case podStatusPodIPs:
			ip, err := field(v, podIPIP)
			if err != nil {
				return within(fmt.Sprintf("podIPs[%d]", len(s.PodIPs)), err)
			}
			s.PodIPs = append(s.PodIPs, corev1.PodIP{IP: string(ip)})
		}
		return nil
	})
}

// Node decodes a protobuf Node to the fields Keep lists. An error names
// the field that does not parse.
func Node(raw []byte) (*corev1.Node, error) {
	n := &corev1.Node{}
	err := fields(raw, func(num protowire.Number, v []byte) error {
		if num == objMetadata {
			return objectMeta(&n.ObjectMeta, v, corev1.LabelTopologyZone)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	return n, nil
}

// objectMeta decodes the metadata Keep lists into m, with label the one
// label kept ("" for none).
func objectMeta(m *metav1.ObjectMeta, b []byte, label string) error {
	return within("metadata", fields(b, func(num protowire.Number, v []byte) error {
		switch num {
		case metaName:
			m.Name = string(v)
		case metaNamespace:
			m.Namespace = string(v)
		case metaUID:
			m.UID = types.UID(v)
		case metaResourceVersion:
			m.ResourceVersion = string(v)
		case metaLabels:
			if label != "" {
				return within("labels", entry(v, label, &m.Labels))
			}
		case metaAnnotations:
			return within("annotations", entry(v, metav1.InitialEventsAnnotationKey, &m.Annotations))
		}
		return nil
	}))
}

// entry adds the map entry b to *m when its key is key.
func entry(b []byte, key string, m *map[string]string) error {
	var k, v []byte
	err := fields(b, func(num protowire.Number, x []byte) error {
		switch num {
		case mapKey:
			k = x
		case mapValue:
			v = x
		}
		return nil
	})
	if err != nil || string(k) != key {
		return err
	}
	if *m == nil {
		*m = make(map[string]string, 1)
	}
	(*m)[key] = string(v)
	return nil
}

// within prefixes a field's error with its name.
func within(field string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", field, err)
}
