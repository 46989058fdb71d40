package garbagecollector

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fakemetadata "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
)

// A resource some controller watches through the typed factory shares that
// informer; any other resource gets a metadata-only informer, and no typed
// informer (which would cache whole objects) is created for it.
func TestInformerFactorySharesRunningTypedInformersOnly(t *testing.T) {
	typed := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	pods := typed.Core().V1().Pods().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		typed.Shutdown()
	}()
	typed.Start(ctx.Done())

	scheme := fakemetadata.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	md := metadatainformer.NewSharedInformerFactory(fakemetadata.NewSimpleMetadataClient(scheme), 0)
	f := NewInformerFactory(typed, md)

	got, err := f.ForResource(v1.SchemeGroupVersion.WithResource("pods"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Informer().GetStore() != pods.GetStore() {
		t.Error("pods: want the running typed informer")
	}

	configMaps := v1.SchemeGroupVersion.WithResource("configmaps")
	got, err = f.ForResource(configMaps)
	if err != nil {
		t.Fatal(err)
	}
	if got.Informer().GetStore() != md.ForResource(configMaps).Informer().GetStore() {
		t.Error("configmaps: want the metadata informer")
	}
	typed.Start(ctx.Done())
	for typ := range typed.WaitForCacheSync(ctx.Done()) {
		if typ.String() == "*v1.ConfigMap" {
			t.Error("a typed ConfigMap informer was created")
		}
	}
}
