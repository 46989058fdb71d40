package storageversionmigrator

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/metadata/metadatainformer"
)

func secretMeta(ns, name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "5"},
	}
}

func newTestMonitors(t *testing.T, ctx context.Context, started chan struct{}) (*MetadataMonitors, metadatainformer.SharedInformerFactory) {
	t.Helper()
	scheme := metadatafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	md := metadatafake.NewSimpleMetadataClient(scheme, secretMeta("ns", "a"), secretMeta("ns", "b"))
	factory := metadatainformer.NewSharedInformerFactory(md, 0)
	disc := discoveryWith(allVerbs)
	disc.Resources = append(disc.Resources, &metav1.APIResourceList{GroupVersion: "example.com/v9", APIResources: []metav1.APIResource{
		{Name: "nowatch", Namespaced: true, Verbs: metav1.Verbs{"delete", "list", "patch", "update"}},
	}})
	ignored := map[schema.GroupResource]struct{}{{Resource: "events"}: {}}
	m := NewMetadataMonitors(ctx, disc, factory, ignored, started)
	t.Cleanup(factory.Shutdown)
	return m, factory
}

func TestMetadataMonitorsServesSyncedCache(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	m, _ := newTestMonitors(t, ctx, started)

	// Before the app started its informers, nothing is started.
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	mon, synced, err := m.GetMonitor(short, secretsGVR)
	cancelShort()
	if err != nil || synced || mon != nil {
		t.Fatalf("before start: %v %v %v", mon, synced, err)
	}

	close(started)
	wait, cancelWait := context.WithTimeout(ctx, 10*time.Second)
	defer cancelWait()
	mon, synced, err = m.GetMonitor(wait, secretsGVR)
	if err != nil || !synced {
		t.Fatalf("GetMonitor: %v %v", synced, err)
	}
	keys := mon.Store.ListKeys()
	if len(keys) != 2 {
		t.Fatalf("cached %v", keys)
	}
	if mon.Controller == nil {
		t.Fatal("no resourceVersion source")
	}
	// The same informer is handed out again.
	again, _, _ := m.GetMonitor(wait, secretsGVR)
	if again.Store != mon.Store {
		t.Fatal("a second cache was made")
	}
}

// Only what the garbage collector monitors has a monitor; for anything
// else the migrator is told so (and retries, as upstream).
func TestMetadataMonitorsOnlyGCResources(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	close(started)
	m, _ := newTestMonitors(t, ctx, started)
	for _, gvr := range []schema.GroupVersionResource{
		{Version: "v1", Resource: "events"},                          // ignored by the collector
		{Group: "example.com", Version: "v9", Resource: "nowatch"},   // not watchable
		{Group: "example.com", Version: "v9", Resource: "missing"},   // not served
		{Group: "absent.example.com", Version: "v1", Resource: "xs"}, // group version not served
	} {
		mon, synced, err := m.GetMonitor(ctx, gvr)
		if err == nil || !strings.HasPrefix(err.Error(), "no monitor found for resource ") || synced || mon != nil {
			t.Errorf("%v: %v %v %v", gvr, mon, synced, err)
		}
	}
}
