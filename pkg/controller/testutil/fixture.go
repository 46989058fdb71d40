package testutil

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// Fixture is the fake API a controller unit test runs against: a fake
// clientset and an informer factory over it. Most tests never start the
// informers; they put objects into the stores and call the sync directly,
// which keeps them deterministic.
type Fixture struct {
	T         testing.TB
	Ctx       context.Context
	Client    *fake.Clientset
	Informers informers.SharedInformerFactory
}

// NewFixture returns a fixture whose clientset and informer stores both
// hold objs, with a context cancelled on t's cleanup.
func NewFixture(t testing.TB, objs ...runtime.Object) *Fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	f := &Fixture{
		T:         t,
		Ctx:       Context(t),
		Client:    client,
		Informers: informers.NewSharedInformerFactory(client, 0),
	}
	f.AddToCache(objs...)
	return f
}

// Add stores objs in both the clientset and the informer stores, as if the
// informers had caught up with their creation.
func (f *Fixture) Add(objs ...runtime.Object) {
	f.T.Helper()
	for _, o := range objs {
		if err := f.Client.Tracker().Add(o); err != nil {
			f.T.Fatalf("adding %T to the clientset: %v", o, err)
		}
	}
	f.AddToCache(objs...)
}

// AddToCache stores objs in the informer stores only, which is how a test
// shows a controller a cache that differs from the API server. The store
// is the factory's shared informer for the object's type, the one the
// controller under test was built with.
func (f *Fixture) AddToCache(objs ...runtime.Object) {
	f.T.Helper()
	AddToInformers(f.T, f.Informers, objs...)
}

// AddToInformers is AddToCache for tests that keep their own factory.
func AddToInformers(t testing.TB, factory informers.SharedInformerFactory, objs ...runtime.Object) {
	t.Helper()
	for _, o := range objs {
		inf, err := factory.ForResource(ResourceOf(t, o))
		if err != nil {
			t.Fatalf("no informer for %T: %v", o, err)
		}
		if err := inf.Informer().GetIndexer().Add(o); err != nil {
			t.Fatalf("adding %T to the informer store: %v", o, err)
		}
	}
}

// Start runs the informers that have been asked for until the test ends
// and waits for their first sync; for tests that drive a running
// controller through the fake API instead of calling its sync.
func (f *Fixture) Start() {
	f.T.Helper()
	// Shutdown waits for the informers, which stop only once their stop
	// channel closes; cleanups run last-registered first, so this one must
	// end the context itself rather than rely on Context's cleanup.
	ctx, cancel := context.WithCancel(f.Ctx)
	f.T.Cleanup(func() {
		cancel()
		f.Informers.Shutdown()
	})
	f.Informers.Start(ctx.Done())
	for typ, ok := range f.Informers.WaitForCacheSync(ctx.Done()) {
		if !ok {
			f.T.Fatalf("informer for %v never synced", typ)
		}
	}
}

// Run starts the informers and run (typically a controller's Run) on
// goroutines that end with the test: cleanup cancels their context, waits
// for run to return and shuts the informers down, so nothing the test
// started outlives it and races with the next test.
func (f *Fixture) Run(run func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(f.Ctx)
	done := make(chan struct{})
	f.T.Cleanup(func() {
		cancel()
		<-done
		f.Informers.Shutdown()
	})
	f.Informers.Start(ctx.Done())
	go func() {
		defer close(done)
		run(ctx)
	}()
}

// Writes lists the writes the clientset has seen with verb to resource;
// see the package function Writes.
func (f *Fixture) Writes(verb, resource string) []clienttesting.Action {
	return Writes(f.Client, verb, resource)
}

// AllWrites lists every write the clientset has seen.
func (f *Fixture) AllWrites() []clienttesting.Action {
	return AllWrites(f.Client)
}

// ResourceOf names the API resource of a typed object from client-go's
// scheme, the same way the fake clientset's tracker files it.
func ResourceOf(t testing.TB, obj runtime.Object) schema.GroupVersionResource {
	t.Helper()
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		t.Fatalf("%T is not a kind client-go knows: %v", obj, err)
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvks[0])
	return gvr
}

// ReplaceCache makes idx hold exactly items, as a relist would after the
// fake API changed under a test that drives syncs by hand.
func ReplaceCache[T any](t testing.TB, idx cache.Indexer, items []T) {
	t.Helper()
	objs := make([]any, 0, len(items))
	for i := range items {
		objs = append(objs, &items[i])
	}
	if err := idx.Replace(objs, ""); err != nil {
		t.Fatal(err)
	}
}
