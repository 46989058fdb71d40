package storageversionmigrator

import (
	"context"
	"sync"
	"testing"

	svmv1 "k8s.io/api/storagemigration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

// The three loops together take a migration from creation to Running,
// a recorded resourceVersion, the writes, Succeeded and Running=False.
func TestLoopsTogether(t *testing.T) {
	client := fake.NewClientset(newSVM("mig", secretsGR))
	factory := informers.NewSharedInformerFactory(client, 0)
	svmInformer := factory.Storagemigration().V1().StorageVersionMigrations()

	md := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	md.PrependReactor("list", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &metav1.List{ListMeta: metav1.ListMeta{ResourceVersion: "42"}}, nil
	})
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		secretsGVR: "SecretList", CRDResource: "CustomResourceDefinitionList",
	})
	rec := &patchRecorder{errs: map[string]error{}}
	dyn.PrependReactor("patch", "secrets", rec.react)
	graph := &fakeGraph{synced: true, monitor: newMonitor(t, "50", objMeta("ns", "a", "10"), objMeta("ns", "b", "20"), objMeta("ns", "c", "45"))}
	mapper := newTestMapper()

	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	migrator := NewController(ctx, client, dyn, svmInformer, "storage-version-migrator-controller", mapper, graph)
	rv := NewResourceVersionController(ctx, client, discoveryWith(allVerbs), md, svmInformer, mapper)
	runner := NewCustomResourceController(ctx, client, svmInformer, dyn)
	factory.Start(ctx.Done())

	var wg sync.WaitGroup
	for _, run := range []func(context.Context){migrator.Run, rv.Run, runner.Run} {
		wg.Go(func() { run(ctx) })
	}
	defer func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	}()

	var final *svmv1.StorageVersionMigration
	testutil.WaitFor(t, "migration finished", func() bool {
		s, err := client.StoragemigrationV1().StorageVersionMigrations().Get(ctx, "mig", metav1.GetOptions{})
		if err != nil {
			return false
		}
		final = s
		c := meta.FindStatusCondition(s.Status.Conditions, string(svmv1.MigrationRunning))
		return c != nil && c.Status == metav1.ConditionFalse
	})
	if final.Status.ResourceVersion != "42" {
		t.Fatalf("resourceVersion %q", final.Status.ResourceVersion)
	}
	expectCondition(t, final, svmv1.MigrationSucceeded, metav1.ConditionTrue, migrationSucceededReason, "Migration completed")
	expectCondition(t, final, svmv1.MigrationRunning, metav1.ConditionFalse, migrationCompletedReason, migrationCompletedMessage)
	if got := sorted(rec.names()); len(got) != 2 || got[0] != "ns/a" || got[1] != "ns/b" {
		t.Fatalf("patched %v", got)
	}
}

// The queues carry upstream's names, the workqueue_* metrics' name label;
// the runner's queue shares the resource version controller's name, as
// upstream's does.
func TestQueueNames(t *testing.T) {
	rec := testutil.RecordQueueNames()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	svms := factory.Storagemigration().V1().StorageVersionMigrations()
	ctx := context.Background()
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	mapper := newTestMapper()
	NewController(ctx, client, dyn, svms, "storage-version-migrator-controller", mapper, &fakeGraph{})
	NewResourceVersionController(ctx, client, discoveryWith(allVerbs), metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), svms, mapper)
	NewCustomResourceController(ctx, client, svms, dyn)
	for _, name := range []string{"storage-version-migrator-controller", "resource-version-controller"} {
		if !rec.Has(name) {
			t.Errorf("no workqueue named %s (have %v)", name, rec.Names())
		}
	}
	if rec.Has("migration-runner-controller") {
		t.Error("runner queue named after the runner")
	}
}
