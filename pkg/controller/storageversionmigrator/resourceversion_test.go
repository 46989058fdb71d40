package storageversionmigrator

import (
	"context"
	"errors"
	"testing"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
)

var allVerbs = metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}

func discoveryOf(lists ...*metav1.APIResourceList) *fakediscovery.FakeDiscovery {
	return &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: lists}}
}

// discoveryWith serves secrets and nodes in v1 and widgets in
// example.com/v2 with verbs.
func discoveryWith(verbs metav1.Verbs) *fakediscovery.FakeDiscovery {
	return discoveryOf(
		&metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "secrets", Namespaced: true, Kind: "Secret", Verbs: verbs},
			{Name: "nodes", Namespaced: false, Kind: "Node", Verbs: verbs},
			{Name: "events", Namespaced: true, Kind: "Event", Verbs: verbs},
		}},
		&metav1.APIResourceList{GroupVersion: "example.com/v2", APIResources: []metav1.APIResource{
			{Name: "widgets", Namespaced: true, Kind: "Widget", Verbs: verbs},
		}},
	)
}

type rvFixture struct {
	*svmFixture
	c      *ResourceVersionController
	md     *metadatafake.FakeMetadataClient
	mapper *testMapper
	lists  []clienttesting.ListActionImpl
	opts   []metav1.ListOptions
}

// optionRecorder keeps the options of every metadata list (the fake's
// actions do not carry the limit).
type optionRecorder struct {
	metadata.Interface
	opts *[]metav1.ListOptions
}

func (r optionRecorder) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return getterRecorder{Getter: r.Interface.Resource(gvr), opts: r.opts}
}

type getterRecorder struct {
	metadata.Getter
	opts *[]metav1.ListOptions
}

func (g getterRecorder) Namespace(ns string) metadata.ResourceInterface {
	return resourceRecorder{ResourceInterface: g.Getter.Namespace(ns), opts: g.opts}
}

func (g getterRecorder) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	*g.opts = append(*g.opts, opts)
	return g.Getter.List(ctx, opts)
}

type resourceRecorder struct {
	metadata.ResourceInterface
	opts *[]metav1.ListOptions
}

func (r resourceRecorder) List(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	*r.opts = append(*r.opts, opts)
	return r.ResourceInterface.List(ctx, opts)
}

// newRVFixture lists return listRV as their resourceVersion.
func newRVFixture(t *testing.T, disc *fakediscovery.FakeDiscovery, listRV string, svms ...*svmv1.StorageVersionMigration) *rvFixture {
	t.Helper()
	f := &rvFixture{svmFixture: newSVMFixture(t, svms...), md: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), mapper: newTestMapper()}
	f.md.PrependReactor("list", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		f.lists = append(f.lists, a.(clienttesting.ListActionImpl))
		return true, &metav1.List{ListMeta: metav1.ListMeta{ResourceVersion: listRV}}, nil
	})
	ctx := klog.NewContext(context.Background(), klog.Background())
	f.c = NewResourceVersionController(ctx, f.client, disc, optionRecorder{Interface: f.md, opts: &f.opts}, f.factory.Storagemigration().V1().StorageVersionMigrations(), f.mapper)
	f.client.ClearActions()
	return f
}

func TestResourceVersionSkips(t *testing.T) {
	succeeded := cond(svmv1.MigrationSucceeded, metav1.ConditionTrue, migrationSucceededReason, "Migration completed")
	failed := cond(svmv1.MigrationFailed, metav1.ConditionTrue, migrationFailedReason, "x")
	notRunning := cond(svmv1.MigrationRunning, metav1.ConditionFalse, migrationCompletedReason, migrationCompletedMessage)
	for name, svm := range map[string]*svmv1.StorageVersionMigration{
		"not started":             newSVM("m", secretsGR),
		"running false":           newSVM("m", secretsGR, withConditions(notRunning)),
		"succeeded":               newSVM("m", secretsGR, withConditions(running, succeeded)),
		"failed":                  newSVM("m", secretsGR, withConditions(running, failed)),
		"resourceVersion already": newSVM("m", secretsGR, withConditions(running), withRV("5")),
	} {
		t.Run(name, func(t *testing.T) {
			f := newRVFixture(t, discoveryWith(allVerbs), "42", svm)
			if err := f.c.sync(context.Background(), "m"); err != nil {
				t.Fatal(err)
			}
			if len(f.client.Actions()) != 0 || len(f.lists) != 0 {
				t.Fatalf("unexpected work: %v %v", f.client.Actions(), f.lists)
			}
		})
	}
}

func TestResourceVersionRecorded(t *testing.T) {
	for _, tc := range []struct {
		name      string
		gr        metav1.GroupResource
		namespace string
	}{
		{"namespaced: listed in a namespace that cannot exist", secretsGR, "@fake:svm_ns!"},
		{"cluster-scoped: listed cluster-wide", metav1.GroupResource{Resource: "nodes"}, ""},
		{"custom resource", widgetsGR, "@fake:svm_ns!"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRVFixture(t, discoveryWith(allVerbs), "42", newSVM("m", tc.gr, withConditions(running)))
			if err := f.c.sync(context.Background(), "m"); err != nil {
				t.Fatal(err)
			}
			if len(f.lists) != 1 {
				t.Fatalf("%d lists", len(f.lists))
			}
			l := f.lists[0]
			if l.GetNamespace() != tc.namespace || l.GetResource().Resource != tc.gr.Resource {
				t.Fatalf("list %s in %q", l.GetResource(), l.GetNamespace())
			}
			if len(f.opts) != 1 || f.opts[0].Limit != 1 || f.opts[0].ResourceVersion != "" {
				t.Fatalf("list options %+v", f.opts)
			}
			s := f.lastStatus(t)
			if s.Status.ResourceVersion != "42" {
				t.Fatalf("status.resourceVersion %q", s.Status.ResourceVersion)
			}
			if len(s.Status.Conditions) != 1 {
				t.Fatalf("conditions changed: %+v", s.Status.Conditions)
			}
		})
	}
}

func TestResourceVersionFailures(t *testing.T) {
	unknown := metav1.GroupResource{Group: "nope.example.com", Resource: "things"}
	tests := []struct {
		name    string
		svm     *svmv1.StorageVersionMigration
		disc    *fakediscovery.FakeDiscovery
		listRV  string
		wantErr bool
		resets  int
		failed  string
	}{
		{
			name:    "unknown resource, fresh: retried after a mapper reset",
			svm:     newSVM("m", unknown, withConditions(running)),
			disc:    discoveryWith(allVerbs),
			wantErr: true,
			resets:  1,
		},
		{
			name:   "unknown resource after a minute: failed",
			svm:    newSVM("m", unknown, withConditions(running), createdAgo(61*time.Second)),
			disc:   discoveryWith(allVerbs),
			failed: "resource does not exist in discovery",
		},
		{
			name:   "resource without patch: failed",
			svm:    newSVM("m", secretsGR, withConditions(running)),
			disc:   discoveryWith(metav1.Verbs{"get", "list", "update", "watch"}),
			failed: `resource "/v1, Resource=secrets" does not support discovery operations: [update patch list]`,
		},
		{
			name:    "resource missing from its served group version: retried",
			svm:     newSVM("m", secretsGR, withConditions(running)),
			disc:    discoveryOf(&metav1.APIResourceList{GroupVersion: "v1"}),
			wantErr: true,
		},
		{
			name:   "group version not served: failed",
			svm:    newSVM("m", widgetsGR, withConditions(running)),
			disc:   discoveryOf(&metav1.APIResourceList{GroupVersion: "v1"}),
			failed: `resource "example.com/v2, Resource=widgets" does not support discovery operations: [update patch list]`,
		},
		{
			name:   "list resourceVersion not comparable: failed",
			svm:    newSVM("m", secretsGR, withConditions(running)),
			disc:   discoveryWith(allVerbs),
			listRV: "0",
			failed: "latest resourceVersion for /v1, Resource=secrets is not valid: resource version is not well formed: 0",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			listRV := tc.listRV
			if listRV == "" {
				listRV = "42"
			}
			f := newRVFixture(t, tc.disc, listRV, tc.svm)
			err := f.c.sync(context.Background(), "m")
			if (err != nil) != tc.wantErr {
				t.Fatalf("sync error = %v, wantErr %v", err, tc.wantErr)
			}
			if n := f.mapper.resetCount(); n != tc.resets {
				t.Fatalf("mapper reset %d times, want %d", n, tc.resets)
			}
			if tc.failed == "" {
				if len(f.statusUpdates()) != 0 {
					t.Fatal("status written")
				}
				return
			}
			s := f.lastStatus(t)
			expectCondition(t, s, svmv1.MigrationFailed, metav1.ConditionTrue, migrationFailedReason, tc.failed)
			if s.Status.ResourceVersion != "" {
				t.Fatalf("resourceVersion recorded: %q", s.Status.ResourceVersion)
			}
		})
	}
}

// Resets are rate limited to one per 10s.
func TestResourceVersionMapperResetLimited(t *testing.T) {
	unknown := metav1.GroupResource{Group: "nope.example.com", Resource: "things"}
	f := newRVFixture(t, discoveryWith(allVerbs), "42", newSVM("m", unknown, withConditions(running)))
	for range 3 {
		if err := f.c.sync(context.Background(), "m"); err == nil {
			t.Fatal("expected a retry")
		}
	}
	if n := f.mapper.resetCount(); n != 1 {
		t.Fatalf("%d resets, want 1", n)
	}
}

func TestResourceVersionDiscoveryError(t *testing.T) {
	d := discoveryWith(allVerbs)
	d.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("discovery down")
	})
	f := newRVFixture(t, d, "42", newSVM("m", secretsGR, withConditions(running)))
	if err := f.c.sync(context.Background(), "m"); err == nil {
		t.Fatal("expected an error")
	}
	if len(f.statusUpdates()) != 0 {
		t.Fatal("status written")
	}
}

// A condition already decided is never replaced by addConditionOnce.
func TestAddConditionOnce(t *testing.T) {
	svm := newSVM("m", secretsGR, withConditions(cond(svmv1.MigrationFailed, metav1.ConditionFalse, "Earlier", "earlier")))
	addConditionOnce(svm, svmv1.MigrationFailed, migrationFailedReason, "later")
	if len(svm.Status.Conditions) != 1 || svm.Status.Conditions[0].Message != "earlier" {
		t.Fatalf("conditions %+v", svm.Status.Conditions)
	}
	svm = newSVM("m", secretsGR, withConditions(cond(svmv1.MigrationFailed, metav1.ConditionUnknown, "Earlier", "earlier")))
	addConditionOnce(svm, svmv1.MigrationFailed, migrationFailedReason, "later")
	if len(svm.Status.Conditions) != 2 || svm.Status.Conditions[1].Message != "later" || svm.Status.Conditions[1].Status != metav1.ConditionTrue {
		t.Fatalf("conditions %+v", svm.Status.Conditions)
	}
}
