package apiserver

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/mcs-api/config/crd"
	"sigs.k8s.io/yaml"
)

// CRDs is the API server's resource of CustomResourceDefinitions.
var CRDs = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallMCSCRDs creates, if they are not there, the ServiceImport and
// ServiceExport CRDs of sigs.k8s.io/mcs-api (the module's: v1alpha1 and
// v1beta1 served, v1beta1 stored) through rc, what an MCS implementation
// installs, and waits until both are listed at both versions or ctx ends.
func InstallMCSCRDs(ctx context.Context, rc *rest.Config) error {
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	for _, text := range [][]byte{crd.ServiceImportCRD, crd.ServiceExportCRD} {
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal(text, &obj.Object); err != nil {
			return fmt.Errorf("read the CRD: %w", err)
		}
		if _, err := dyn.Resource(CRDs).Create(ctx, &obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", obj.GetName(), err)
		}
	}
	served := func() error {
		for _, v := range []string{"v1alpha1", "v1beta1"} {
			for _, r := range []string{"serviceimports", "serviceexports"} {
				gvr := schema.GroupVersionResource{Group: "multicluster.x-k8s.io", Version: v, Resource: r}
				if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
					return fmt.Errorf("list %s: %w", gvr, err)
				}
			}
		}
		return nil
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := served()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the mcs-api CRDs are not served: %w (%w)", err, ctx.Err())
		case <-tick.C:
		}
	}
}
